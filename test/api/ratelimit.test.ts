/**
 * Per-key rate limits (issue 12): a token bucket per API key for usage ingest and another for
 * everything else, checked after the key and before the body; over it 429 / resource_exhausted,
 * reason RATE_LIMITED, with Retry-After, and RateLimit-* headers on every limited answer. The
 * limits come from the configuration or from the environment's override (keys CLI). Durations
 * are never asserted: a rate of 1 a second only makes a refill between two calls unlikely, so
 * each test calls until refused (the first `burst` calls always pass) rather than counting.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { PROTOCOLS, type RestResponse, reasonOf, rest, rpcClient } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { startTestServer } from "../helpers/server.js";

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The tests that do not depend on the database run on one store. */
const ONE_STORE = STORES.includes("sqlite") ? "sqlite" : (STORES[0] ?? "sqlite");

/** Calls until one is refused (at most `max` calls); every answer in order. */
async function untilLimited(call: () => Promise<RestResponse>, max = 20): Promise<RestResponse[]> {
  const out: RestResponse[] = [];
  for (let i = 0; i < max; i++) {
    const r = await call();
    out.push(r);
    if (r.status === 429) break;
  }
  return out;
}

const event = (n: number) => ({ idempotency_key: `rl-${n}`, subject_id: "subj_none", event_name: "tick", data: {} });

test(`${ONE_STORE}: REST: 429 RATE_LIMITED with Retry-After and RateLimit-* after the burst; refills; keys and the ingest bucket are separate; health exempt`, async (t) => {
  const server = await startTestServer(ONE_STORE, {
    RATE_LIMIT_API_RPS: "1",
    RATE_LIMIT_API_BURST: "3",
    RATE_LIMIT_INGEST_RPS: "1",
    RATE_LIMIT_INGEST_BURST: "2",
  });
  try {
    const { a, b, aPublishable } = server.keys;
    const api = await untilLimited(() => rest(server.url, "GET", "/subjects", a));
    t.true(api.length >= 4, "the burst passes");
    for (const r of api.slice(0, 3)) {
      t.is(r.status, 200);
      t.is(r.headers.get("ratelimit-limit"), "3");
    }
    t.is(api[0]?.headers.get("ratelimit-remaining"), "2");
    const limited = api[api.length - 1] as RestResponse;
    t.is(limited.status, 429);
    t.is(limited.body.code, "resource_exhausted");
    t.is(reasonOf(limited.body), "RATE_LIMITED");
    t.regex(limited.body.message, /rate limit for API requests/);
    t.is(limited.headers.get("retry-after"), "1");
    t.is(limited.headers.get("ratelimit-limit"), "3");
    t.is(limited.headers.get("ratelimit-remaining"), "0");
    t.regex(limited.headers.get("ratelimit-reset") ?? "", /^[1-3]$/);

    // Refused before the body is read: a POST over the limit is 429 too, whatever its body.
    const post = await rest(server.url, "POST", "/subjects", a, "{not json");
    if (post.status !== 429) t.log("a refill between two calls (slow machine)");
    else t.is(reasonOf(post.body), "RATE_LIMITED");

    // Another key (here of another environment) has its own bucket, and so has a publishable key.
    const other = await rest(server.url, "GET", "/subjects", b);
    t.is(other.status, 200);
    t.is(other.headers.get("ratelimit-remaining"), "2");
    const state = await rest(server.url, "GET", "/customer-access/subj_none/billing-state", aPublishable);
    t.not(state.status, 429);
    t.is(state.headers.get("ratelimit-limit"), "3");
    const pub = await untilLimited(() => rest(server.url, "GET", "/customer-access/subj_none/billing-state", aPublishable));
    t.is(pub[pub.length - 1]?.status, 429, "publishable keys are limited too");

    // The ingest bucket is not the API bucket: key a may still ingest (batches count as one).
    let n = 0;
    const first = await rest(server.url, "POST", "/usage-events", a, event(n++));
    t.not(first.status, 429);
    t.is(first.headers.get("ratelimit-limit"), "2");
    t.is(first.headers.get("ratelimit-remaining"), "1");
    const ingest = await untilLimited(() =>
      n % 2 === 0 ? rest(server.url, "POST", "/usage-events", a, event(n++)) : rest(server.url, "POST", "/usage-events/batch", a, { events: [event(n++), event(n++), event(n++)] }),
    );
    const refused = ingest[ingest.length - 1] as RestResponse;
    t.is(refused.status, 429);
    t.regex(refused.body.message, /usage-ingest/);
    t.is(refused.headers.get("retry-after"), "1");

    // Health is exempt: no bucket, no headers.
    for (let i = 0; i < 5; i++) {
      const h = await rest(server.url, "GET", "/healthz");
      t.is(h.status, 200);
      t.is(h.headers.get("ratelimit-limit"), null);
    }

    // The bucket refills: after Retry-After the key is served again.
    await sleep(Number(limited.headers.get("retry-after")) * 1000);
    const again = await rest(server.url, "GET", "/subjects", a);
    t.is(again.status, 200);
    t.is(again.headers.get("ratelimit-limit"), "3");
  } finally {
    await server.stop();
  }
});

test(`${ONE_STORE}: Connect, gRPC and gRPC-Web: resource_exhausted RATE_LIMITED with retry-after (trailers on gRPC) after the burst`, async (t) => {
  const server = await startTestServer(ONE_STORE, { RATE_LIMIT_API_RPS: "1", RATE_LIMIT_API_BURST: "2" });
  try {
    for (const protocol of PROTOCOLS) {
      const key = await server.freshKey();
      const client = rpcClient(SubjectService, server.url, protocol, key);
      let limitHeader = null as string | null;
      let err: ConnectError | undefined;
      for (let i = 0; i < 20 && !err; i++) {
        try {
          await client.listSubjects({}, { onHeader: (h) => (limitHeader = h.get("ratelimit-limit")) });
        } catch (e) {
          err = ConnectError.from(e);
          t.true(i >= 2, `${protocol}: the burst passes`);
        }
      }
      t.is(limitHeader, "2", `${protocol}: RateLimit-Limit on a served call`);
      t.truthy(err, protocol);
      t.is(err?.code, Code.ResourceExhausted, protocol);
      t.is(err?.metadata.get("retry-after"), "1", protocol);
      t.is(err?.findDetails(ErrorInfoSchema)[0]?.reason, "RATE_LIMITED", protocol);
    }
    // Connect over HTTP: the status is 429 by Connect's code table, Retry-After a header.
    const key = await server.freshKey();
    let res: Response | undefined;
    for (let i = 0; i < 20; i++) {
      res = await fetch(`${server.url}/billing.v1.SubjectService/ListSubjects`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key },
        body: "{}",
      });
      if (res.status === 429) break;
      await res.arrayBuffer();
    }
    t.is(res?.status, 429);
    t.is(res?.headers.get("retry-after"), "1");
    t.is(res?.headers.get("ratelimit-remaining"), "0");
    t.is(((await res!.json()) as { code: string }).code, "resource_exhausted");
  } finally {
    await server.stop();
  }
});

for (const store of STORES) {
  test(`${store}: an environment's override set with the keys CLI applies (API_KEY_CACHE_MS=0); 0 is unlimited, default goes back`, async (t) => {
    const server = await startTestServer(store, { API_KEY_CACHE_MS: "0" });
    const cli = (...args: string[]) => run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", ...args], { env: { ...process.env, DATABASE_URL: server.db.url } });
    try {
      const { a, b } = server.keys;
      t.is((await rest(server.url, "GET", "/subjects", a)).headers.get("ratelimit-limit"), "20000", "the server's default");

      t.regex((await cli("env", "set-limits", "env-a", "--api-rps", "1")).stdout, /^env_\w+\tenv-a\tingest default\tapi 1\/s\n$/);
      const limited = await untilLimited(() => rest(server.url, "GET", "/subjects", a));
      t.is(limited[0]?.headers.get("ratelimit-limit"), "2", "an override's burst is twice its rate");
      t.is(limited[limited.length - 1]?.status, 429);
      t.is(limited[limited.length - 1]?.headers.get("retry-after"), "1");
      const ingest = await rest(server.url, "POST", "/usage-events", a, event(1));
      t.is(ingest.headers.get("ratelimit-limit"), "40000", "the ingest bucket keeps the default");
      t.is((await rest(server.url, "GET", "/subjects", b)).headers.get("ratelimit-limit"), "20000", "another environment keeps the default");

      t.regex((await cli("env", "set-limits", "env-a", "--api-rps", "0", "--ingest-rps", "5")).stdout, /ingest 5\/s\tapi unlimited/);
      for (let i = 0; i < 10; i++) {
        const r = await rest(server.url, "GET", "/subjects", a);
        t.is(r.status, 200);
        t.is(r.headers.get("ratelimit-limit"), null, "unlimited: no bucket");
      }
      t.is((await rest(server.url, "POST", "/usage-events", a, event(2))).headers.get("ratelimit-limit"), "10");

      t.regex((await cli("env", "set-limits", "env-a", "--api-rps", "default", "--ingest-rps", "default")).stdout, /ingest default\tapi default/);
      t.is((await rest(server.url, "GET", "/subjects", a)).headers.get("ratelimit-limit"), "20000");

      const bad = await t.throwsAsync(cli("env", "set-limits", "env-a", "--api-rps", "fast"));
      t.regex(String((bad as { stderr?: string }).stderr), /--api-rps must be an integer/);
      const missing = await t.throwsAsync(cli("env", "set-limits", "nope", "--api-rps", "3"));
      t.regex(String((missing as { stderr?: string }).stderr), /no environment named nope/);
    } finally {
      await server.stop();
    }
  });
}
