/**
 * GET /metrics of a real server passes `promtool check metrics` (Prometheus's own linter, from
 * Debian's prometheus package) after traffic of every kind: exit 0 and not one line of output.
 * billing_build_info names the version in package.json, the commit (BUILD_COMMIT, else git) and
 * the Node.js version; the in-flight gauges count a request whose body is still arriving.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import test from "ava";
import { rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { grpcSubjects, grpcUnary, sample, scrape } from "../helpers/ops.js";
import { useServer } from "../helpers/server.js";

const STORE = STORES.includes("sqlite") ? "sqlite" : (STORES[0] ?? "sqlite");
const PROMTOOL = "/usr/bin/promtool";
const promtoolThere = spawnSync(PROMTOOL, ["--version"]).status === 0;
// scripts/test-prerequisites.sh installs it (npm test, as root); test/preflight.ts stops npm test without it.
const lint = promtoolThere ? test.serial : test.serial.skip;
const lintTitle = promtoolThere ? "" : ` (SKIPPED: ${PROMTOOL} is not installed and scripts/test-prerequisites.sh could not install it: apt-get install prometheus)`;

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const server = useServer(STORE, { BUILD_COMMIT: COMMIT });

lint(`promtool check metrics: exit 0 and no output, after REST, Connect, gRPC, errors and usage events${lintTitle}`, async (t) => {
  const key = await server.freshKey();
  const subject = (await rest(server.url, "POST", "/subjects", key, { name: "Linted" })).body as { id: string };
  await rest(server.url, "GET", `/subjects/${subject.id}`, key);
  await rest(server.url, "GET", "/subjects/subj_missing", key);
  await rest(server.url, "GET", "/subjects", "sk_test_unknown");
  await rest(server.url, "POST", "/usage-events", key, { idempotency_key: "a", subject_id: subject.id, event_name: "api", data: {} });
  await rest(server.url, "POST", "/usage-events/batch", key, { events: [{ idempotency_key: "b", subject_id: "nobody", event_name: "api", data: {} }] });
  await fetch(`${server.url}/billing.v1.SubjectService/GetSubject`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key },
    body: JSON.stringify({ subject_id: subject.id }),
  });
  const client = grpcSubjects(server.url);
  try {
    await grpcUnary(client, "getSubject", { subject_id: subject.id }, { "x-api-key": key });
  } finally {
    client.close();
  }
  await fetch(`${server.url}/no/such/path`);
  const text = await scrape(server.url);
  const r = spawnSync(PROMTOOL, ["check", "metrics"], { input: text, encoding: "utf8" });
  t.is(`${r.stdout}${r.stderr}`, "");
  t.is(r.status, 0);
  // The linter does catch what prom-client writes by default: a gauge named like a counter.
  const misnamed = `${text}# HELP nodejs_active_handles_total Total number of active handles.\n# TYPE nodejs_active_handles_total gauge\nnodejs_active_handles_total 3\n`;
  const bad = spawnSync(PROMTOOL, ["check", "metrics"], { input: misnamed, encoding: "utf8" });
  t.not(bad.status, 0);
  t.regex(`${bad.stdout}${bad.stderr}`, /nodejs_active_handles_total non-counter metrics should not have "_total" suffix/);
  t.false(/^nodejs_active_(handles|requests|resources)_total/m.test(text), "the misnamed defaults are gone");
  t.true(/^nodejs_active_handles\{/m.test(text), "the same counts stay, by type");
});

test.serial("billing_build_info: package.json's version, the BUILD_COMMIT setting, the Node.js version", async (t) => {
  const { version } = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
  const text = await scrape(server.url);
  t.is(sample(text, "billing_build_info", { version, commit: COMMIT, node: process.version }), 1);
  t.is(text.match(/^billing_build_info\{/gm)?.length, 1, "one series");
});

test.serial("billing_requests_in_flight and billing_request_bytes_in_flight count a request whose body is still arriving", async (t) => {
  const key = await server.freshKey();
  const before = await scrape(server.url);
  t.is(sample(before, "billing_requests_in_flight"), 0, "a scrape takes no admission slot");
  t.is(sample(before, "billing_request_bytes_in_flight"), 0);
  const body = JSON.stringify({ name: "Slow" });
  let answered: Promise<number> | undefined;
  const req = request(`${server.url}/subjects`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json", "content-length": String(body.length) } }, (res) => {
    answered = new Promise((resolve) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
  });
  const done = new Promise<void>((resolve) => req.on("response", () => resolve()));
  req.write(body.slice(0, 5));
  // The server has the headers (and the slot is taken) once a scrape sees it: poll, never sleep a fixed time.
  let during = await scrape(server.url);
  for (let i = 0; i < 200 && sample(during, "billing_requests_in_flight") === 0; i++) {
    await new Promise((r) => setTimeout(r, 10));
    during = await scrape(server.url);
  }
  t.is(sample(during, "billing_requests_in_flight"), 1);
  t.is(sample(during, "billing_request_bytes_in_flight"), body.length, "a declared length counts in full at once");
  req.end(body.slice(5));
  await done;
  t.is(await answered, 200);
  const after = await scrape(server.url);
  t.is(sample(after, "billing_requests_in_flight"), 0);
  t.is(sample(after, "billing_request_bytes_in_flight"), 0);
  t.is(sample(after, "billing_bulk_requests_in_flight"), 0);
  t.is(sample(after, "billing_bulk_requests_waiting"), 0);
});
