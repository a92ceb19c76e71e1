/**
 * The lean gRPC path (src/edge/lean) against connect-node: each case is sent by @grpc/grpc-js (or,
 * where grpc-js cannot send it, a raw HTTP/2 stream) to a server with the lean path on and to one
 * started with LEAN_GRPC=off, on each store, and the two answers must be the same: status, message,
 * grpc-status-details-bin, the other trailers and headers, and the response message (IDs and
 * instants of the two servers' own making aside). One difference is known and left out: a
 * deadline that passes before the body has arrived is answered deadline_exceeded at once by the
 * lean path (test/api/grpc-js-lean), while connect-node waits for the body.
 */
import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import test from "ava";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import { ok } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { grpcPackage } from "../helpers/grpc-package.js";
import { type TestServer, useServer } from "../helpers/server.js";

const billing = grpcPackage(["billing/v1/subject_service.proto", "billing/v1/usage_event_service.proto"], { defaults: true, oneofs: true, longs: String }).billing.v1;

// biome-ignore lint: grpc-js clients are untyped
type AnyClient = any;

/** A few calls per key pass; the rate-limit case spends a key's burst. */
const LIMITS = { RATE_LIMIT_API_RPS: "1", RATE_LIMIT_API_BURST: "6" };

/**
 * An answer as a client reads it. `metadata`: its headers and trailers together (an error may
 * come as trailers only, or as headers then trailers: the same to a client), without `date`
 * and the rate limit's state (TIMING).
 */
interface Outcome {
  code: number;
  details: string;
  metadata: unknown;
  status?: unknown;
  response?: unknown;
}

/** Headers that say when rather than what: the answer's date (which the lean path does not send), the rate limit's refill. */
const TIMING = new Set(["date", "ratelimit-reset", "ratelimit-remaining"]);

/** IDs and instants each server makes for itself, and headers that differ per answer, replaced by placeholders. */
function normalized(value: unknown): unknown {
  if (typeof value === "string") return value.replace(/\b[a-z]+_[A-Za-z0-9]{16,}\b/g, "<id>");
  if (Array.isArray(value)) return value.map(normalized);
  if (value && typeof value === "object") {
    if ("seconds" in value && "nanos" in value) return "<instant>";
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (!TIMING.has(k)) out[k] = normalized(v);
    return out;
  }
  return value;
}

function metadataObject(m: grpc.Metadata | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(m?.getMap() ?? {})) {
    if (k === "grpc-status-details-bin") continue;
    out[k] = Buffer.isBuffer(v) ? v.toString("base64") : v;
  }
  return out;
}

function statusDetails(m: grpc.Metadata | undefined): unknown {
  const bin = m?.get("grpc-status-details-bin")[0];
  if (!Buffer.isBuffer(bin)) return undefined;
  const s = fromBinary(StatusSchema, bin);
  return { code: s.code, message: s.message, details: s.details.map((d) => [d.typeUrl, Buffer.from(d.value).toString("base64")]) };
}

function metadata(key: string | undefined, extra: Record<string, string> = {}): grpc.Metadata {
  const m = new grpc.Metadata();
  if (key !== undefined) m.set("x-api-key", key);
  for (const [k, v] of Object.entries(extra)) m.set(k, v);
  return m;
}

/** A unary call through grpc-js: what came back, success or not. */
function unary(client: AnyClient, method: string, request: unknown, md: grpc.Metadata): Promise<Outcome> {
  return new Promise((resolve) => {
    let headers: grpc.Metadata | undefined;
    let response: unknown;
    const call = client[method](request, md, (_err: grpc.ServiceError | null, res: unknown) => {
      response = res;
    });
    call.on("metadata", (m: grpc.Metadata) => {
      headers = m;
    });
    call.on("status", (s: grpc.StatusObject) => {
      // The callback runs before 'status' (grpc-js calls it first).
      setImmediate(() =>
        resolve({
          code: s.code,
          details: s.details,
          metadata: normalized({ ...metadataObject(headers), ...metadataObject(s.metadata) }),
          status: statusDetails(s.metadata),
          response: normalized(response),
        }),
      );
    });
  });
}

/** A raw HTTP/2 gRPC call: `body` sent (or held open for `holdMs` first); the answer's headers and trailers. */
async function raw(url: string, headers: Record<string, string>, body: Buffer, holdMs = 0): Promise<Outcome> {
  const session = http2.connect(url);
  try {
    const req = session.request({ ":method": "POST", "content-type": "application/grpc", te: "trailers", ...headers });
    let all: Record<string, unknown> = {};
    req.on("response", (h) => (all = { ...all, ...h }));
    req.on("trailers", (h) => (all = { ...all, ...h }));
    req.on("data", () => {});
    const timer = setTimeout(() => req.end(body), holdMs);
    await new Promise((resolve) => req.on("close", resolve).on("error", resolve));
    clearTimeout(timer);
    const { "grpc-status": code, "grpc-message": message, ...rest } = all;
    return { code: Number(code), details: decodeURIComponent(String(message ?? "")), metadata: normalized(rest) };
  } finally {
    session.close();
  }
}

function clients(server: TestServer) {
  const address = `127.0.0.1:${server.app.port}`;
  const creds = grpc.credentials.createInsecure();
  const gzip = { "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip };
  return {
    subjects: new billing.SubjectService(address, creds) as AnyClient,
    gzipped: new billing.SubjectService(address, creds, gzip) as AnyClient,
    usage: new billing.UsageEventService(address, creds) as AnyClient,
    raw: new grpc.Client(address, creds),
  };
}

type Case = (server: TestServer, c: ReturnType<typeof clients>) => Promise<unknown>;

const CASES: [string, Case][] = [
  [
    "success with request metadata: the answer, its headers and trailers",
    async (s, c) => unary(c.subjects, "CreateSubject", { name: "Zoë: 100%", metadata: { plan: "pro" } }, metadata(await s.freshKey(), { "x-request-id": "parity-ok" })),
  ],
  [
    "invalid_argument with field violations",
    async (s, c) => unary(c.subjects, "CreateSubject", { name: "x", email: "not-an-email" }, metadata(await s.freshKey(), { "x-request-id": "parity-invalid" })),
  ],
  ["not_found", async (s, c) => unary(c.subjects, "GetSubject", { subject_id: "subj_nobody" }, metadata(await s.freshKey(), { "x-request-id": "parity-missing" }))],
  ["unauthenticated", async (_s, c) => unary(c.subjects, "GetSubject", { subject_id: "subj_x" }, metadata(undefined, { "x-request-id": "parity-nokey" }))],
  ["permission_denied", async (s, c) => unary(c.subjects, "CreateSubject", { name: "p" }, metadata(s.keys.aPublishable, { "x-request-id": "parity-publishable" }))],
  [
    "resource_exhausted: rate limited",
    async (s, c) => {
      const key = await s.freshKey();
      // At once, so that the bucket has no time to refill whatever the machine's speed.
      const answers = await Promise.all(Array.from({ length: 12 }, () => unary(c.subjects, "GetSubject", { subject_id: "subj_nobody" }, metadata(key, { "x-request-id": "parity-limit" }))));
      const limited = answers.find((a) => a.code === grpc.status.RESOURCE_EXHAUSTED);
      return limited && { ...limited, status: (limited.status as { code: number }).code };
    },
  ],
  [
    // The code only: connect-node refuses the message from its envelope's declared length, in its
    // own words ("message size … is larger than configured readMaxBytes"), where the lean path
    // says what the REST bridge says of a body over the bound (PAYLOAD_TOO_LARGE).
    "resource_exhausted: a body over the method's bound",
    async (s, c) => {
      // GetSubject takes at most 256 KiB: a subject_id of 300 KB (field 1, its length as a varint).
      const id = Buffer.alloc(300_000, "a");
      const body = Buffer.concat([Buffer.from([0x0a, 0x80 | (id.length & 0x7f), 0x80 | ((id.length >> 7) & 0x7f), id.length >> 14]), id]);
      const md = metadata(await s.freshKey(), { "x-request-id": "parity-large" });
      return new Promise((r) =>
        c.raw.makeUnaryRequest(
          "/billing.v1.SubjectService/GetSubject",
          (b: Buffer) => b,
          (b: Buffer) => b,
          body,
          md,
          (err) => r(err?.code),
        ),
      );
    },
  ],
  [
    "unimplemented: an unknown method",
    async (s, c) =>
      new Promise((r) =>
        c.raw.makeUnaryRequest(
          "/billing.v1.SubjectService/Nope",
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          metadata(s.keys.a),
          (err) => r({ code: err?.code, details: err?.details }),
        ),
      ),
  ],
  [
    "unimplemented: no request message",
    async (s) => raw(s.url, { ":path": "/billing.v1.SubjectService/GetSubject", "x-api-key": await s.freshKey(), "x-request-id": "parity-empty" }, Buffer.alloc(0)),
  ],
  [
    "deadlines: a malformed grpc-timeout, and one that passes on the client's side",
    async (s, c) => {
      const key = await s.freshKey();
      const malformed = await raw(
        s.url,
        { ":path": "/billing.v1.SubjectService/GetSubject", "x-api-key": key, "x-request-id": "parity-timeout", "grpc-timeout": "soon" },
        Buffer.from([0, 0, 0, 0, 0]),
      );
      const passed = await new Promise((r) => c.subjects.GetSubject({ subject_id: "subj_nobody" }, metadata(key), { deadline: Date.now() + 1 }, (err: grpc.ServiceError | null) => r(err?.code)));
      return { malformed, passed };
    },
  ],
  [
    "gzip both ways: a large answer and a small one",
    async (s, c) => {
      const key = await s.freshKey();
      const metadataOf = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`note${i}`, "x".repeat(100)]));
      const large = await unary(c.gzipped, "CreateSubject", { name: "big", metadata: metadataOf }, metadata(key, { "x-request-id": "parity-gzip" }));
      const small = await unary(c.gzipped, "GetSubject", { subject_id: "subj_nobody" }, metadata(key, { "x-request-id": "parity-gzip-small" }));
      return { large, small };
    },
  ],
  [
    "an Idempotency-Key replay: the same answer, marked replayed",
    async (s, c) => {
      const key = await s.freshKey();
      const md = () => metadata(key, { "idempotency-key": "parity-once", "x-request-id": "parity-idem" });
      const first = await unary(c.subjects, "CreateSubject", { name: "once" }, md());
      const again = await unary(c.subjects, "CreateSubject", { name: "once" }, md());
      const listed = await ok(s, key, "GET", "/subjects?limit=10");
      return { first, again, same: JSON.stringify(first.response) === JSON.stringify(again.response), subjects: listed.subjects.length };
    },
  ],
  [
    // Through connect-node on both servers: the lean path serves unary calls only (a lean client
    // stream missed the 2× rule: bench/README.md, gRPC); the case keeps the two configurations alike.
    "the ingest client stream",
    async (s, c) => {
      const key = await s.freshKey();
      const subject = await ok(s, key, "POST", "/subjects", { external_id: "streamer" });
      await ok(s, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
      return new Promise((resolve) => {
        const call = c.usage.StreamUsageEvents(metadata(key, { "x-request-id": "parity-stream" }), (err: grpc.ServiceError | null, res: unknown) =>
          resolve(err ? { code: err.code, details: err.details, status: statusDetails(err.metadata) } : normalized(res)),
        );
        for (let i = 0; i < 50; i++) {
          const timestamp = { seconds: String(Date.parse("2026-03-01T10:00:00Z") / 1000), nanos: 0 };
          call.write({ idempotency_key: i === 49 ? "e0" : `e${i}`, subject_id: subject.id, event_name: "api", data: { n: i === 20 ? "oops" : "1" }, timestamp });
        }
        call.end();
      });
    },
  ],
];

for (const store of STORES) {
  const lean = useServer(store, LIMITS);
  const connect = useServer(store, { ...LIMITS, LEAN_GRPC: "off" });
  for (const [name, run] of CASES) {
    test(`${store}: ${name}: the lean path answers as connect-node does`, async (t) => {
      const [a, b] = [clients(lean), clients(connect)];
      try {
        const viaLean = await run(lean, a);
        const viaConnect = await run(connect, b);
        t.not(viaLean, undefined);
        t.deepEqual(viaLean, viaConnect);
      } finally {
        for (const x of [...Object.values(a), ...Object.values(b)]) x.close();
      }
    });
  }
}
