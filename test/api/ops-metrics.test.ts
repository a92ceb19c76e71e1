/**
 * GET /metrics after known traffic (README, Operations): exact counts of usage events by outcome,
 * of requests by protocol, procedure and code (REST, Connect, gRPC from @grpc/grpc-js, unknown
 * paths collapsed to one label), group commits, the gauges read from the store, and the bearer
 * token. The tests run one after the other: the counters are the server's, so each test reads
 * what its own traffic added.
 */
import net from "node:net";
import test from "ava";
import { rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { grpcSubjects, grpcUnary, hasMetric, sample, scrape } from "../helpers/ops.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { startTestServer, useServer } from "../helpers/server.js";

// What these tests check does not depend on the store: they run on one that TEST_STORES selects.
const STORE = STORES.includes("sqlite") ? "sqlite" : (STORES[0] ?? "sqlite");
const TOKEN = "scrape-0123456789abcdef";
const server = useServer(STORE, { METRICS_TOKEN: TOKEN });
const metrics = () => scrape(server.url, TOKEN);

test.serial("the bearer token is required when configured; no API key is", async (t) => {
  const none = await fetch(`${server.url}/metrics`);
  t.is(none.status, 401);
  t.regex(none.headers.get("www-authenticate") ?? "", /^Bearer/);
  t.is((await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer wrong-token-0123456789" } })).status, 401);
  t.is((await fetch(`${server.url}/metrics`, { headers: { authorization: TOKEN } })).status, 401, "the scheme is required");
  const ok = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.is(ok.status, 200);
  t.regex(ok.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const text = await ok.text();
  // prom-client's default metrics: memory and the event loop's delay.
  for (const name of ["process_resident_memory_bytes", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes"]) t.true(hasMetric(text, name), name);
});

test.serial("usage events: 3 accepted, 1 duplicate, 1 rejected; group commits", async (t) => {
  const key = await server.freshKey();
  const subject = (await rest(server.url, "POST", "/subjects", key, { name: "Metered" })).body as { id: string };
  const before = await metrics();
  const event = (n: number) => ({ idempotency_key: `k${n}`, subject_id: subject.id, event_name: "api", data: { n: "1" }, timestamp: "2026-03-01T00:00:00Z" });
  for (const n of [1, 2, 3]) t.is(((await rest(server.url, "POST", "/usage-events", key, event(n))).body as { status: string }).status, "accepted");
  t.is(((await rest(server.url, "POST", "/usage-events", key, event(1))).body as { status: string }).status, "duplicate");
  const batch = await rest(server.url, "POST", "/usage-events/batch", key, { events: [{ ...event(9), subject_id: "nobody" }] });
  t.is((batch.body as { results: { status: string }[] }).results[0]?.status, "rejected");
  const after = await metrics();
  const delta = (outcome: string) => sample(after, "billing_usage_events_total", { outcome }) - sample(before, "billing_usage_events_total", { outcome });
  t.deepEqual([delta("accepted"), delta("duplicate"), delta("rejected")], [3, 1, 1]);
  // One request at a time, so each went alone in a transaction of its own: five commits of one
  // event (the unknown subject is found out inside the transaction, so the batch's event is one).
  t.is(sample(after, "billing_ingest_commit_events_count") - sample(before, "billing_ingest_commit_events_count"), 5);
  t.is(sample(after, "billing_ingest_commit_events_sum") - sample(before, "billing_ingest_commit_events_sum"), 5);
  t.is(sample(after, "billing_ingest_commit_requests_sum") - sample(before, "billing_ingest_commit_requests_sum"), 5);
  t.is(sample(after, "billing_ingest_commit_events_bucket", { le: "1" }) - sample(before, "billing_ingest_commit_events_bucket", { le: "1" }), 5);
});

test.serial("REST requests by route template and code; unknown paths collapse to one label", async (t) => {
  const key = await server.freshKey();
  const subject = (await rest(server.url, "POST", "/subjects", key, { name: "Counted" })).body as { id: string };
  const before = await metrics();
  for (let i = 0; i < 5; i++) t.is((await rest(server.url, "GET", `/subjects/${subject.id}`, key)).status, 200);
  for (let i = 0; i < 2; i++) t.is((await rest(server.url, "GET", `/subjects/nobody-${i}`, key)).status, 404);
  t.is((await rest(server.url, "GET", `/subjects/${subject.id}`)).status, 401);
  for (const p of ["/nothing-here", "/nothing/else/here", "/wp-admin.php"]) t.is((await rest(server.url, "GET", p)).status, 404);
  const after = await metrics();
  const delta = (labels: Record<string, string>) => sample(after, "billing_requests_total", labels) - sample(before, "billing_requests_total", labels);
  const route = { protocol: "rest", procedure: "GET /subjects/{subject_id}" };
  t.is(delta({ ...route, code: "ok" }), 5);
  t.is(delta({ ...route, code: "not_found" }), 2);
  t.is(delta({ ...route, code: "unauthenticated" }), 1);
  t.is(delta({ protocol: "http", procedure: "other", code: "not_found" }), 3, "unknown paths share one label value");
  t.false(after.includes("wp-admin"), "no path becomes a label");
  // The duration histogram (no code label) counted all eight.
  t.is(sample(after, "billing_request_duration_seconds_count", route) - sample(before, "billing_request_duration_seconds_count", route), 8);
  t.true(sample(after, "billing_request_duration_seconds_sum", route) > sample(before, "billing_request_duration_seconds_sum", route));
  // The earlier scrape is counted too (its line is written once it has been answered).
  t.true(sample(after, "billing_requests_total", { protocol: "http", procedure: "/metrics", code: "ok" }) >= 1);
});

test.serial("gRPC (grpc-js: the lean path, and gzip through connect-node) and Connect calls by protocol, method and code", async (t) => {
  const key = await server.freshKey();
  const subject = (await rest(server.url, "POST", "/subjects", key, { name: "Over gRPC" })).body as { id: string };
  const lean = grpcSubjects(server.url);
  const zipped = grpcSubjects(server.url, { "grpc.default_compression_algorithm": 2 });
  try {
    const before = await metrics();
    t.truthy((await grpcUnary(lean, "GetSubject", { subject_id: subject.id }, { "x-api-key": key })).ok);
    t.truthy((await grpcUnary(lean, "GetSubject", { subject_id: subject.id }, { "x-api-key": key })).ok);
    t.is((await grpcUnary(lean, "GetSubject", { subject_id: "nobody" }, { "x-api-key": key })).err?.code, 5);
    t.truthy((await grpcUnary(zipped, "GetSubject", { subject_id: subject.id }, { "x-api-key": key })).ok);
    t.is((await grpcUnary(zipped, "GetSubject", { subject_id: "nobody" }, { "x-api-key": key })).err?.code, 5);
    const connect = await fetch(`${server.url}/billing.v1.SubjectService/GetSubject`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1", "x-api-key": key },
      body: JSON.stringify({ subject_id: subject.id }),
    });
    t.is(connect.status, 200);
    await connect.body?.cancel();
    // gRPC-Web whose message does not decode: refused by the message check, its status in the body's trailers.
    const garbage = Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]);
    const web = await fetch(`${server.url}/billing.v1.SubjectService/GetSubject`, { method: "POST", headers: { "content-type": "application/grpc-web+proto", "x-api-key": key }, body: garbage });
    t.regex(Buffer.from(await web.arrayBuffer()).toString("latin1"), /grpc-status: ?3/);
    const after = await metrics();
    const method = "billing.v1.SubjectService/GetSubject";
    const delta = (protocol: string, code: string) =>
      sample(after, "billing_requests_total", { protocol, procedure: method, code }) - sample(before, "billing_requests_total", { protocol, procedure: method, code });
    t.deepEqual([delta("grpc", "ok"), delta("grpc", "not_found"), delta("connect", "ok"), delta("grpc-web", "invalid_argument")], [3, 2, 1, 1]);
    const grpcSeries = { protocol: "grpc", procedure: method };
    t.is(sample(after, "billing_request_duration_seconds_count", grpcSeries) - sample(before, "billing_request_duration_seconds_count", grpcSeries), 5);
  } finally {
    lean.close();
    zipped.close();
  }
});

test.serial("gauges read from the store: invoices by status, failing subscriptions, scheduler lag; the database pool", async (t) => {
  const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 1000 } } }] });
  const before = await metrics();
  const subscribed = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_OK);
  t.regex(String(subscribed.result_type), /^success/);
  await s.advance("2026-02-02T00:00:00Z");
  const statuses = (await s.invoices()).map((i) => i.status);
  t.is(statuses.length, 2);
  // Scrapes within a second share one read of the store: wait that out.
  await new Promise((r) => setTimeout(r, 1_100));
  const after = await metrics();
  for (const status of ["draft", "open", "paid", "void", "uncollectible"]) {
    const n = statuses.filter((x) => x === status).length;
    t.is(sample(after, "billing_invoices", { status }) - sample(before, "billing_invoices", { status }), n, status);
  }
  t.is(sample(after, "billing_subscriptions_failing"), 0);
  // Test-clock subscriptions are not the real-time scheduler's: nothing is due on real time.
  t.is(sample(after, "billing_scheduler_lag_seconds"), 0);
  t.is(sample(after, "billing_store_scrape_success"), 1);
  t.true(sample(after, "billing_db_pool_max") >= 1);
  t.true(hasMetric(after, "billing_db_pool_connections"));
  t.true(hasMetric(after, "billing_db_pool_waiting"));
});

test.serial("/metrics, /healthz and /readyz need no API key and are not rate limited", async (t) => {
  const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })));
  t.deepEqual(
    answers.map((r) => r.status),
    Array(20).fill(200),
  );
  await Promise.all(answers.map((r) => r.body?.cancel()));
  t.is((await rest(server.url, "GET", "/healthz")).status, 200);
  t.is((await rest(server.url, "GET", "/readyz")).status, 200);
});

test.serial("a full server (admission control) still answers /metrics, /readyz and /healthz, and counts what it refused", async (t) => {
  const full = await startTestServer(STORE, { MAX_REQUESTS_IN_FLIGHT: "2" });
  const held: net.Socket[] = [];
  try {
    const port = Number(new URL(full.url).port);
    // Two requests whose bodies are still coming hold the two places.
    for (let i = 0; i < 2; i++) {
      const socket = net.connect(port, "127.0.0.1");
      socket.on("error", () => {});
      socket.write(`POST /subjects HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\nx-api-key: ${full.keys.a}\r\n\r\n{"name":`);
      held.push(socket);
    }
    let refused = await rest(full.url, "GET", "/subjects", full.keys.a);
    for (let i = 0; i < 50 && refused.status !== 503; i++) {
      await new Promise((r) => setTimeout(r, 20));
      refused = await rest(full.url, "GET", "/subjects", full.keys.a);
    }
    t.is(refused.status, 503);
    const text = await scrape(full.url);
    t.true(sample(text, "billing_requests_total", { protocol: "rest", procedure: "GET /subjects", code: "unavailable" }) >= 1);
    t.is((await rest(full.url, "GET", "/readyz")).status, 200);
    t.is((await rest(full.url, "GET", "/healthz")).status, 200);
  } finally {
    for (const s of held) s.destroy();
    await full.stop();
  }
});
