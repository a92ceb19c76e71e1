/**
 * Idempotent writes (DESIGN §12), with the real server on a port, on both stores: the same
 * mutating call sent twice with one Idempotency-Key, one after the other and both at once, makes
 * one change and one charge, and both answers are the same bytes (the repeat says
 * `Idempotent-Replayed: true`); other parameters are a 400 IDEMPOTENCY_KEY_REUSED; a 4xx outcome
 * is replayed too; gRPC (grpc-js metadata) and REST share one key; a key held by a running call
 * is a 409 IDEMPOTENCY_KEY_IN_USE; a dead claim is taken over only if it changed nothing; expired
 * keys are swept; and on MariaDB a key is honoured across two server processes.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type UnaryRequest, createContextValues } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import test from "ava";
import { decide } from "../../src/billing/idempotency.js";
import { SqlIdempotencyStore } from "../../src/db/stores/idempotency-store.js";
import { CreateSubjectRequestSchema, CreateSubjectResponseSchema, SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { createLogger } from "../../src/log.js";
import { callerKey } from "../../src/rpc/context.js";
import { idempotencyInterceptor } from "../../src/rpc/idempotency.js";
import { STORES, withDatabase, withMigratedDatabase } from "../helpers/db.js";
import { grpcPackage } from "../helpers/grpc-package.js";
import { usd } from "../helpers/catalog-bodies.js";
import { reasonOf, violatedFields } from "../helpers/clients.js";
import { Scenario } from "../helpers/scenario.js";
import { startAppOn, untilHealthy, useServers } from "../helpers/server.js";

interface Answer {
  status: number;
  text: string;
  replayed: string | null;
  // biome-ignore lint: JSON answers are loosely typed in tests
  body: any;
}

async function send(url: string, key: string, method: string, path: string, body: unknown, idempotencyKey?: string): Promise<Answer> {
  const headers: Record<string, string> = { "x-api-key": key, "content-type": "application/json" };
  if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
  const res = await fetch(`${url}${path}`, { method, headers, body: JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, text, replayed: res.headers.get("idempotent-replayed"), body: parsed };
}

const pkg = grpcPackage(["billing/v1/subject_service.proto"], { enums: String, defaults: true, oneofs: true });
const SubjectClient = pkg.billing.v1.SubjectService as typeof grpc.Client;
// biome-ignore lint: generated client methods are untyped
type Untyped = grpc.Client & Record<string, any>;

function grpcCall(client: Untyped, method: string, req: unknown, md: grpc.Metadata): Promise<{ ok?: unknown; err?: grpc.ServiceError; replayed: string | undefined }> {
  return new Promise((resolve) => {
    let replayed: string | undefined;
    const call = client[method](req, md, (err: grpc.ServiceError | null, res: unknown) => resolve(err ? { err, replayed } : { ok: res, replayed }));
    call.on("metadata", (m: grpc.Metadata) => {
      replayed = m.get("idempotent-replayed")[0] as string | undefined;
    });
  });
}

const serverOf = useServers();

/** A scenario with a paid plan and a card on file (the first subscription paid through checkout). */
async function withCardOnFile(store: (typeof STORES)[number]) {
  const server = serverOf(store);
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(1000) }] });
  const first = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
  if (first.result_type !== "success_after_checkout") throw new Error(`no card on file: ${JSON.stringify(first)}`);
  const body = {
    subject_id: s.subjectId,
    rate_card_id: card,
    fixed_rate_quantities: { seats: 3 },
    checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
  };
  return { server, s, card, body };
}

for (const store of STORES) {
  test(`${store}: POST /subscriptions twice with one key, in turn: one subscription, one charge, the same bytes`, async (t) => {
    const { server, s, body } = await withCardOnFile(store);
    const subs = (await s.subscriptions()).length;
    const seen = new Set((await s.invoices()).map((i) => i.id));
    const a = await send(server.url, s.key, "POST", "/subscriptions", body, "create-sub-1");
    const b = await send(server.url, s.key, "POST", "/subscriptions", body, "create-sub-1");
    t.is(a.status, 200, a.text);
    t.is(a.body.result.result_type, "success");
    t.is(a.replayed, null);
    t.is(b.replayed, "true");
    t.is(b.text, a.text);
    t.is((await s.subscriptions()).length, subs + 1);
    const added = (await s.invoices()).filter((i) => !seen.has(i.id));
    t.deepEqual(
      added.map((i) => i.status),
      ["paid"],
      "one invoice, charged once",
    );
    // Without a key, the same call is a new subscription (the key is what makes it the same call).
    const c = await send(server.url, s.key, "POST", "/subscriptions", body);
    t.is(c.status, 200);
    t.not(c.body.result.subscription.id, a.body.result.subscription.id);
  });

  test(`${store}: POST /subscriptions twice with one key at once: one subscription, both answers the same`, async (t) => {
    const { server, s, body } = await withCardOnFile(store);
    const before = { subs: (await s.subscriptions()).length, invoices: (await s.invoices()).length };
    const [a, b] = await Promise.all([send(server.url, s.key, "POST", "/subscriptions", body, "together"), send(server.url, s.key, "POST", "/subscriptions", body, "together")]);
    t.is(a.status, 200, a.text);
    t.is(b.text, a.text);
    t.deepEqual([a.replayed, b.replayed].sort(), ["true", null].sort());
    t.is((await s.subscriptions()).length, before.subs + 1);
    t.is((await s.invoices()).length, before.invoices + 1);
  });

  test(`${store}: other parameters under a used key are a 400 IDEMPOTENCY_KEY_REUSED and change nothing`, async (t) => {
    const { server, s, body } = await withCardOnFile(store);
    const a = await send(server.url, s.key, "POST", "/subscriptions", body, "reused");
    t.is(a.status, 200);
    const subs = (await s.subscriptions()).length;
    const other = await send(server.url, s.key, "POST", "/subscriptions", { ...body, fixed_rate_quantities: { seats: 4 } }, "reused");
    t.is(other.status, 400);
    t.is(other.body.code, "invalid_argument");
    t.is(reasonOf(other.body), "IDEMPOTENCY_KEY_REUSED");
    t.deepEqual(violatedFields(other.body), ["Idempotency-Key"]);
    const elsewhere = await send(server.url, s.key, "POST", "/subjects", { name: "x" }, "reused");
    t.deepEqual([elsewhere.status, reasonOf(elsewhere.body)], [400, "IDEMPOTENCY_KEY_REUSED"]);
    t.is((await s.subscriptions()).length, subs);
    // Keys are per environment: another environment's call with the same key runs.
    const otherEnv = await server.freshKey();
    const there = await send(server.url, otherEnv, "POST", "/subjects", { name: "y" }, "reused");
    t.is(there.status, 200);
  });

  test(`${store}: change-rate-card, pause, resume and cancel repeated with their keys change once`, async (t) => {
    const { server, s, body } = await withCardOnFile(store);
    const sub = (await send(server.url, s.key, "POST", "/subscriptions", body)).body.result.subscription;
    const dear = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(2000) }] });
    const invoices = (await s.invoices()).length;
    const change = { rate_card_id: dear, upgrade_behavior: "rate_difference" };
    const c1 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/change-rate-card`, change, "change-1");
    const c2 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/change-rate-card`, change, "change-1");
    t.is(c1.status, 200, c1.text);
    t.deepEqual([c2.text, c2.replayed], [c1.text, "true"]);
    t.is((await s.invoices()).length, invoices + 1, "one rate-difference charge");

    const p1 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/pause`, {}, "pause-1");
    const p2 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/pause`, {}, "pause-1");
    t.is(p1.status, 200, p1.text);
    t.deepEqual([p2.text, p2.replayed], [p1.text, "true"]);
    const r1 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/resume`, {}, "resume-1");
    const r2 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/resume`, {}, "resume-1");
    t.is(r1.status, 200, r1.text);
    t.deepEqual([r2.text, r2.replayed], [r1.text, "true"]);

    const k1 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/cancel`, {}, "cancel-1");
    const k2 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/cancel`, {}, "cancel-1");
    t.is(k1.status, 200, k1.text);
    t.deepEqual([k2.status, k2.text, k2.replayed], [200, k1.text, "true"], "the repeat is the first answer, not 'already cancelled'");
    // A new key for the same cancel runs it: the subscription is cancelled already.
    const k3 = await send(server.url, s.key, "POST", `/subscriptions/${sub.id}/cancel`, {}, "cancel-2");
    t.deepEqual([k3.status, k3.body.code], [400, "failed_precondition"]);
  });

  test(`${store}: a checkout is made once; a 4xx outcome is stored and replayed too`, async (t) => {
    const server = serverOf(store);
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(500) }] });
    const body = {
      subject_id: s.subjectId,
      rate_card_id: card,
      fixed_rate_quantities: { seats: 1 },
      checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" },
    };
    const a = await send(server.url, s.key, "POST", "/subscriptions", body, "checkout-1");
    const b = await send(server.url, s.key, "POST", "/subscriptions", body, "checkout-1");
    t.is(a.body.result.result_type, "requires_action");
    t.deepEqual([b.text, b.replayed], [a.text, "true"], "the same checkout_url");
    const missing = { ...body, rate_card_id: "rc_doesnotexist000000000000" };
    const e1 = await send(server.url, s.key, "POST", "/subscriptions", missing, "bad-1");
    const e2 = await send(server.url, s.key, "POST", "/subscriptions", missing, "bad-1");
    t.true(e1.status >= 400 && e1.status < 500, e1.text);
    t.deepEqual([e2.status, e2.text, e2.replayed], [e1.status, e1.text, "true"]);
  });

  test(`${store}: bad keys are a 400 naming the Idempotency-Key header; reads ignore the header`, async (t) => {
    const server = serverOf(store);
    const key = await server.freshKey();
    for (const bad of ["x".repeat(256), "caf\u00e9", "tab\there"]) {
      const res = await fetch(`${server.url}/subjects`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": bad }, body: "{}" }).catch(
        () => undefined,
      );
      if (res === undefined) continue; // fetch itself refuses some header values
      const body = await res.json();
      t.deepEqual([res.status, body.code, violatedFields(body)], [400, "invalid_argument", ["Idempotency-Key"]], JSON.stringify(bad));
    }
    const listed = await fetch(`${server.url}/subjects?limit=1`, { headers: { "x-api-key": key, "idempotency-key": "read" } });
    t.is(listed.status, 200);
    t.is(listed.headers.get("idempotent-replayed"), null);
  });

  test(`${store}: gRPC (grpc-js metadata idempotency-key) and REST share the key and the stored answer`, async (t) => {
    const server = serverOf(store);
    const key = await server.freshKey();
    const client = new SubjectClient(server.url.replace(/^http:\/\//, ""), grpc.credentials.createInsecure()) as Untyped;
    try {
      const md = new grpc.Metadata();
      md.set("x-api-key", key);
      md.set("idempotency-key", "grpc-subject");
      const req = { name: "Grace Hopper", external_id: "grace" };
      const a = await grpcCall(client, "CreateSubject", req, md);
      const b = await grpcCall(client, "CreateSubject", req, md);
      t.truthy(a.ok, a.err?.message);
      t.deepEqual(b.ok, a.ok);
      t.is(a.replayed, undefined);
      t.is(b.replayed, "true");
      const other = await grpcCall(client, "CreateSubject", { name: "Someone else" }, md);
      t.is(other.err?.code, grpc.status.INVALID_ARGUMENT);
      // The same request over REST with the same key: the stored subject, not a second one (or a duplicate-external-id error).
      const r = await send(server.url, key, "POST", "/subjects", req, "grpc-subject");
      t.is(r.status, 200, r.text);
      t.is(r.replayed, "true");
      t.is(r.body.id, (a.ok as { subject: { id: string } }).subject.id);
      // And over the Connect protocol (connect-node's path): the same stored subject, replayed.
      const connect = await fetch(`${server.url}/billing.v1.SubjectService/CreateSubject`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key, "idempotency-key": "grpc-subject" },
        body: JSON.stringify(req),
      });
      t.is(connect.status, 200);
      t.is(connect.headers.get("idempotent-replayed"), "true");
      t.is((await connect.json()).subject.id, r.body.id);
      const list = await send(server.url, key, "GET", "/subjects?limit=100", undefined);
      t.is(list.body.subjects.length, 1);
    } finally {
      client.close();
    }
  });

  test(`${store}: a key held by a running call is 409 IN_USE; a dead claim runs again only if it changed nothing; expired keys are swept`, async (t) => {
    const server = serverOf(store);
    const key = await server.freshKey();
    const first = await send(server.url, key, "POST", "/subjects", { name: "Held" }, "held");
    t.is(first.status, 200);
    await withDatabase(server.db.url, async (db) => {
      const rows: { changed: unknown; state: string }[] = await db.sql.query("SELECT changed, state FROM idempotency_keys WHERE idem_key = ?", ["held"]);
      t.deepEqual(
        rows.map((r) => [Number(r.changed), r.state]),
        [[1, "done"]],
        "the change's transaction marked the key",
      );
      // As if the first call were still running on another server.
      await db.sql.query("UPDATE idempotency_keys SET state = 'running', outcome = NULL, locked_until = '2199-01-01 00:00:00.000' WHERE idem_key = ?", ["held"]);
    });
    const busy = await send(server.url, key, "POST", "/subjects", { name: "Held" }, "held");
    t.deepEqual([busy.status, busy.body.code, reasonOf(busy.body)], [409, "aborted", "IDEMPOTENCY_KEY_IN_USE"]);
    // Its server died after committing the change: never run again.
    await withDatabase(server.db.url, (db) => db.sql.query("UPDATE idempotency_keys SET locked_until = '2001-01-01 00:00:00.000' WHERE idem_key = ?", ["held"]));
    const lost = await send(server.url, key, "POST", "/subjects", { name: "Held" }, "held");
    t.deepEqual([lost.status, lost.body.code, reasonOf(lost.body)], [400, "failed_precondition", "IDEMPOTENCY_OUTCOME_LOST"]);
    // Its server died before committing anything: the retry runs.
    await withDatabase(server.db.url, (db) => db.sql.query("UPDATE idempotency_keys SET changed = 0 WHERE idem_key = ?", ["held"]));
    const rerun = await send(server.url, key, "POST", "/subjects", { name: "Held" }, "held");
    t.is(rerun.status, 200);
    t.is(rerun.replayed, null);
    t.not(rerun.body.id, first.body.id);
    // Past its expiry a key is swept, and then a new request may use it.
    await withDatabase(server.db.url, async (db) => {
      await db.sql.query("UPDATE idempotency_keys SET expires_at = '2001-01-01 00:00:00.000' WHERE idem_key = ?", ["held"]);
      t.true((await new SqlIdempotencyStore(db.sql).sweep(new Date(), 1000)) >= 1);
      const left: unknown[] = await db.sql.query("SELECT idem_key FROM idempotency_keys WHERE idem_key = ?", ["held"]);
      t.is(left.length, 0);
    });
    const fresh = await send(server.url, key, "POST", "/subjects", { name: "Other" }, "held");
    t.deepEqual([fresh.status, fresh.replayed], [200, null]);
  });
}

if (STORES.includes("mysql")) {
  test("mysql: a key is honoured across two server processes on one database", async (t) => {
    const { server, s, body } = await withCardOnFile("mysql");
    const second = await startAppOn(server.db.url, { SCHEDULER_INTERVAL_MS: "0" });
    try {
      await untilHealthy(second.url);
      const before = (await s.subscriptions()).length;
      const [a, b] = await Promise.all([send(server.url, s.key, "POST", "/subscriptions", body, "two-servers"), send(second.url, s.key, "POST", "/subscriptions", body, "two-servers")]);
      t.is(a.status, 200, a.text);
      t.is(b.text, a.text);
      const c = await send(second.url, s.key, "POST", "/subscriptions", body, "two-servers");
      t.deepEqual([c.text, c.replayed], [a.text, "true"]);
      t.is((await s.subscriptions()).length, before + 1);
    } finally {
      await second.stop();
    }
  });
}

for (const store of STORES) {
  test(`${store}: a 5xx outcome is not stored: the retry runs, unless the call had committed a change`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const intercept = idempotencyInterceptor(new SqlIdempotencyStore(db.sql), createLogger("error"));
      const method = SubjectService.method.createSubject;
      const call = (key: string) =>
        ({
          stream: false,
          service: SubjectService,
          method,
          url: "/billing.v1.SubjectService/CreateSubject",
          requestMethod: "POST",
          signal: new AbortController().signal,
          header: new Headers({ "idempotency-key": key }),
          contextValues: createContextValues().set(callerKey, { environmentId: "env_one", mode: "test", keyKind: "secret" }),
          message: create(CreateSubjectRequestSchema, { name: "Ada" }),
        }) as unknown as UnaryRequest;
      let runs = 0;
      const answer = () => ({ stream: false, service: SubjectService, method, header: new Headers(), trailer: new Headers(), message: create(CreateSubjectResponseSchema, {}) });
      const unavailable = async () => {
        runs++;
        throw new ConnectError("the database is unavailable", Code.Unavailable);
      };
      const ok = async () => {
        runs++;
        return answer();
      };
      // Nothing committed: the retry runs, and its success is what a third call gets.
      await t.throwsAsync(intercept(unavailable as never)(call("k1")), { message: /unavailable/ });
      await intercept(ok as never)(call("k1"));
      await intercept(ok as never)(call("k1"));
      t.is(runs, 3 - 1, "the third call was a replay");
      // A change committed, then the call failed: never run again, told the outcome was lost.
      runs = 0;
      const changedThenFailed = async () => {
        runs++;
        await db.sql.transaction((em) => em.query("SELECT 1"));
        throw new ConnectError("the database is unavailable", Code.Unavailable);
      };
      await t.throwsAsync(intercept(changedThenFailed as never)(call("k2")));
      const retry = await t.throwsAsync(intercept(ok as never)(call("k2")));
      t.is(runs, 1);
      t.is((retry as unknown as { reason: string }).reason, "IDEMPOTENCY_OUTCOME_LOST");
    });
  });
}

test("decide: what a call with a key meets", (t) => {
  const now = new Date("2026-06-01T00:00:00Z");
  const later = new Date("2026-06-01T00:05:00Z");
  const earlier = new Date("2026-05-31T23:00:00Z");
  const row = {
    fingerprint: "f",
    rpc: "m",
    state: "done" as const,
    claimToken: "x",
    changed: true,
    lockedUntil: earlier,
    expiresAt: new Date("2026-06-02T00:00:00Z"),
    outcome: { ok: true as const, message: "" },
  };
  const cases: [string, Parameters<typeof decide>[0], string, ReturnType<typeof decide>["kind"]][] = [
    ["no row", undefined, "f", "claim"],
    ["expired", { ...row, expiresAt: earlier }, "g", "claim"],
    ["done, same request", row, "f", "replay"],
    ["done, other request", row, "g", "reused"],
    ["running, other request", { ...row, state: "running", outcome: null, lockedUntil: later }, "g", "reused"],
    ["running, lease held", { ...row, state: "running", outcome: null, lockedUntil: later }, "f", "in_use"],
    ["running, lease lapsed, changed", { ...row, state: "running", outcome: null }, "f", "lost"],
    ["running, lease lapsed, nothing changed", { ...row, state: "running", outcome: null, changed: false }, "f", "claim"],
  ];
  for (const [name, r, fp, kind] of cases) t.is(decide(r, fp, now).kind, kind, name);
});
