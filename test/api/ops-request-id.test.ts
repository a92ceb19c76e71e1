/**
 * Request ids (DESIGN §10, README "Operations"): `X-Request-Id` is taken when it is printable
 * ASCII of at most 128 characters and made otherwise; it comes back on every answer (REST,
 * Connect, gRPC response metadata on the lean path and through connect-node, hosted pages,
 * health), as a google.rpc.RequestInfo detail of every error, and in the request's log lines: its
 * access line, and the line with the cause of an internal error whose body names the same id.
 */
import { createRegistry, fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import type * as grpc from "@grpc/grpc-js";
import test from "ava";
import { type App, startApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { createDatabase } from "../../src/db/datasource.js";
import { ErrorInfoSchema, RequestInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import { createLogger } from "../../src/log.js";
import { rest } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { grpcSubjects, grpcUnary } from "../helpers/ops.js";
import { seedKeys, useServer } from "../helpers/server.js";

const STORE = STORES.includes("sqlite") ? "sqlite" : (STORES[0] ?? "sqlite");
const server = useServer(STORE);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface ErrorBody {
  code: string;
  details: { type: string; value: string; debug?: { request_id?: string } }[];
}

/** The request id of a Connect/REST error body's RequestInfo detail, read from its bytes. */
function requestIdOfBody(body: ErrorBody): string | undefined {
  const d = body.details.find((x) => x.type === "google.rpc.RequestInfo");
  return d ? fromBinary(RequestInfoSchema, Buffer.from(d.value, "base64")).requestId : undefined;
}

/** A gRPC error's google.rpc.Status details (grpc-status-details-bin): their types in order, and the RequestInfo's id. */
function grpcDetails(err: grpc.ServiceError): { types: (string | undefined)[]; requestId: string | undefined } {
  const bin = err.metadata.get("grpc-status-details-bin")[0];
  if (!(bin instanceof Buffer)) return { types: [], requestId: undefined };
  const registry = createRegistry(ErrorInfoSchema, RequestInfoSchema);
  const details = fromBinary(StatusSchema, bin).details.map((d) => anyUnpack(d, registry));
  const info = details.find((d) => d?.$typeName === "google.rpc.RequestInfo") as { requestId: string } | undefined;
  return { types: details.map((d) => d?.$typeName), requestId: info?.requestId };
}

test("REST: a given id comes back on success and in the error's details; none or a bad one gets a new id", async (t) => {
  const key = server.keys.a;
  const ok = await fetch(`${server.url}/subjects?limit=1`, { headers: { "x-api-key": key, "x-request-id": "client-chosen id/42" } });
  t.is(ok.status, 200);
  t.is(ok.headers.get("x-request-id"), "client-chosen id/42");
  await ok.body?.cancel();

  const bad = await fetch(`${server.url}/subjects`, { method: "POST", headers: { "x-api-key": key, "x-request-id": "req-bad-1", "content-type": "application/json" }, body: '{"email":"nope"}' });
  t.is(bad.status, 400);
  t.is(bad.headers.get("x-request-id"), "req-bad-1");
  const body = (await bad.json()) as ErrorBody;
  t.deepEqual(
    body.details.map((d) => d.type),
    ["google.rpc.ErrorInfo", "google.rpc.BadRequest", "google.rpc.RequestInfo"],
  );
  t.is(requestIdOfBody(body), "req-bad-1");
  t.is(body.details[2]?.debug?.request_id, "req-bad-1");

  // Refused before any handler: no key at all, and an unknown route.
  const noKey = await fetch(`${server.url}/subjects`, { headers: { "x-request-id": "req-no-key" } });
  t.is(noKey.status, 401);
  t.is(requestIdOfBody((await noKey.json()) as ErrorBody), "req-no-key");
  const nowhere = await fetch(`${server.url}/nowhere`, { headers: { "x-request-id": "req-404" } });
  t.is(nowhere.status, 404);
  t.is(nowhere.headers.get("x-request-id"), "req-404");
  t.is(requestIdOfBody((await nowhere.json()) as ErrorBody), "req-404");

  const made = await rest(server.url, "GET", "/subjects?limit=1", key);
  t.regex(made.headers.get("x-request-id") ?? "", UUID);
  for (const given of ["x".repeat(129), "tab\there", ""]) {
    const r = await fetch(`${server.url}/subjects?limit=1`, { headers: { "x-api-key": key, "x-request-id": given } });
    t.regex(r.headers.get("x-request-id") ?? "", UUID, JSON.stringify(given));
    await r.body?.cancel();
  }
  const longest = "y".repeat(128);
  const kept = await fetch(`${server.url}/subjects?limit=1`, { headers: { "x-api-key": key, "x-request-id": longest } });
  t.is(kept.headers.get("x-request-id"), longest);
  await kept.body?.cancel();
});

test("Connect: the id on the answer and in the error's details", async (t) => {
  const call = (body: unknown, id?: string) =>
    fetch(`${server.url}/billing.v1.SubjectService/GetSubject`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1", "x-api-key": server.keys.a, ...(id ? { "x-request-id": id } : {}) },
      body: JSON.stringify(body),
    });
  const missing = await call({ subject_id: "nobody" }, "connect-1");
  t.is(missing.status, 404);
  t.is(missing.headers.get("x-request-id"), "connect-1");
  const body = (await missing.json()) as ErrorBody;
  t.is(body.code, "not_found");
  t.is(body.details[0]?.type, "google.rpc.ErrorInfo");
  t.is(requestIdOfBody(body), "connect-1");
  // Refused by the message check before any interceptor (a wrong JSON type): the id too.
  const badJson = await call({ subject_id: 5 }, "connect-2");
  t.is(badJson.status, 400);
  const badBody = (await badJson.json()) as ErrorBody;
  t.deepEqual(
    badBody.details.map((d) => d.type),
    ["google.rpc.ErrorInfo", "google.rpc.BadRequest", "google.rpc.RequestInfo"],
  );
  t.is(requestIdOfBody(badBody), "connect-2");
  const made = await call({ subject_id: "nobody" });
  const id = made.headers.get("x-request-id") ?? "";
  t.regex(id, UUID);
  t.is(requestIdOfBody((await made.json()) as ErrorBody), id);
});

test("gRPC (grpc-js): the id in the response metadata and the error's details, on the lean path and through connect-node (gzip)", async (t) => {
  const created = await rest(server.url, "POST", "/subjects", server.keys.a, { name: "Traced" });
  const id = (created.body as { id: string }).id;
  for (const [path, client] of [
    ["lean", grpcSubjects(server.url)],
    ["connect-node", grpcSubjects(server.url, { "grpc.default_compression_algorithm": 2 })],
  ] as const) {
    try {
      const ok = await grpcUnary(client, "GetSubject", { subject_id: id }, { "x-api-key": server.keys.a, "x-request-id": `grpc-${path}` });
      t.truthy(ok.ok, path);
      t.deepEqual(ok.headers?.get("x-request-id"), [`grpc-${path}`], path);

      const failed = await grpcUnary(client, "GetSubject", { subject_id: "nobody" }, { "x-api-key": server.keys.a, "x-request-id": `grpc-${path}-err` });
      t.is(failed.err?.code, 5, path);
      // Response header metadata: with the trailers of a trailers-only answer (the lean path), or
      // in the headers before them (connect-node); grpc-js shows them as the error's or the call's.
      const seen = [...(failed.headers?.get("x-request-id") ?? []), ...(failed.err?.metadata.get("x-request-id") ?? [])];
      t.true(seen.includes(`grpc-${path}-err`), `${path}: ${JSON.stringify(seen)}`);
      // After the other details: the reason stays first.
      t.deepEqual(grpcDetails(failed.err as grpc.ServiceError), { types: ["google.rpc.ErrorInfo", "google.rpc.RequestInfo"], requestId: `grpc-${path}-err` }, path);

      const noKey = await grpcUnary(client, "GetSubject", { subject_id: id }, { "x-request-id": `grpc-${path}-401` });
      t.is(noKey.err?.code, 16, path);
      t.is(grpcDetails(noKey.err as grpc.ServiceError).requestId, `grpc-${path}-401`, path);

      const made = await grpcUnary(client, "GetSubject", { subject_id: id }, { "x-api-key": server.keys.a });
      t.regex(String(made.headers?.get("x-request-id")[0]), UUID, path);
    } finally {
      client.close();
    }
  }
});

test("hosted pages and health answers carry the id too", async (t) => {
  for (const path of ["/hosted/invoices/0123456789abcdef0123", "/healthz", "/readyz"]) {
    const r = await fetch(`${server.url}${path}`, { headers: { "x-request-id": `plain ${path}` } });
    t.is(r.headers.get("x-request-id"), `plain ${path}`, path);
    await r.body?.cancel();
  }
});

test("log lines: one access line per request with its id (never the key), debug lines at LOG_LEVEL=debug, and an internal error's cause logged under the id its body names", async (t) => {
  const db = await createTestDatabase(STORE);
  const seeded = await seedKeys(db.url);
  const lines: Record<string, unknown>[] = [];
  let app: App | undefined;
  try {
    app = await startApp(
      loadConfig({ DATABASE_URL: db.url, PORT: "0", LOG_LEVEL: "debug", SCHEDULER_INTERVAL_MS: "0" }),
      createLogger("debug", (l) => lines.push(JSON.parse(l))),
    );
    const key = seeded.keys.a;
    const subject = (await fetch(`${app.url}/subjects`, { method: "POST", headers: { "x-api-key": key, "x-request-id": "log-1", "content-type": "application/json" }, body: '{"name":"Logged"}' }).then(
      (r) => r.json(),
    )) as { id: string };
    const event = await fetch(`${app.url}/usage-events`, {
      method: "POST",
      headers: { "x-api-key": key, "x-request-id": "log-2", "content-type": "application/json" },
      body: JSON.stringify({ idempotency_key: "e1", subject_id: subject.id, event_name: "api", data: { n: "1" } }),
    });
    t.is(event.status, 200);
    await event.body?.cancel();
    // The line is written once the answer has ended: give it a moment.
    await new Promise((r) => setTimeout(r, 100));
    const access = lines.find((l) => l.msg === "request" && l.request_id === "log-1");
    t.like(access, { level: "info", protocol: "rest", procedure: "POST /subjects", status: 200, code: "ok" });
    t.is(typeof access?.duration_ms, "number");
    t.regex(String(access?.environment), /^env_/);
    t.truthy(lines.find((l) => l.msg === "request" && l.request_id === "log-2" && l.procedure === "POST /usage-events"));
    t.false(JSON.stringify(lines).includes(key), "no line holds the API key");
    t.false(JSON.stringify(lines).includes("Logged"), "no line holds a request body");
    // Debug adds what info does not: each request's arrival, and the group commit of the event.
    t.like(
      lines.find((l) => l.msg === "request received" && l.request_id === "log-1"),
      { level: "debug", method: "POST", path: "/subjects" },
    );
    t.like(
      lines.find((l) => l.msg === "usage events committed"),
      { level: "debug", events: 1, requests: 1 },
    );

    // An unexpected failure: the table the lookup reads goes away under the running server.
    const other = await createDatabase(db.url, { poolSize: 1 });
    await other.dataSource.initialize();
    await other.dataSource.query("ALTER TABLE subjects RENAME TO subjects_gone");
    await other.dataSource.destroy();
    const broken = await fetch(`${app.url}/subjects/${subject.id}`, { headers: { "x-api-key": key } });
    t.is(broken.status, 500);
    const body = (await broken.json()) as ErrorBody & { message: string };
    t.is(body.message, "internal error");
    const id = requestIdOfBody(body);
    t.is(id, broken.headers.get("x-request-id") ?? "");
    await new Promise((r) => setTimeout(r, 100));
    const cause = lines.find((l) => l.level === "error" && l.request_id === id);
    t.truthy(cause, "the line with the cause names the request id");
    t.regex(JSON.stringify(cause?.err), /subjects/i);
    t.like(
      lines.find((l) => l.msg === "request" && l.request_id === id),
      { status: 500, code: "internal" },
    );
  } finally {
    await app?.stop();
    await seeded.close();
    await db.drop();
  }
});
