/**
 * gRPC with a client nobody here wrote (issue 13): @grpc/grpc-js, loading the project's protos
 * with @grpc/proto-loader, against the real server on a port, on both stores. Unary calls go
 * through the server's lean gRPC path; the client stream through connect-node. Every answer is
 * read the way grpc-js reads it: status code, `details` (the decoded grpc-message) and the
 * grpc-status-details-bin trailer (a google.rpc.Status, decoded here field by field).
 * Compression on the lean path: grpc-js with gzip on both ways, and the bytes on the wire read
 * with a raw HTTP/2 client (compressed flag, `grpc-encoding`, a small answer left uncompressed).
 */
import http2 from "node:http2";
import { brotliCompressSync, gunzipSync, gzipSync } from "node:zlib";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { fromBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { grpcPackage } from "../helpers/grpc-package.js";
import test from "ava";
import { BadRequestSchema, ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { ok } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { type TestServer, startTestServer } from "../helpers/server.js";

const billing = grpcPackage(["billing/v1/subject_service.proto", "billing/v1/usage_event_service.proto", "billing/v1/health_service.proto"], { defaults: true, oneofs: true }).billing.v1;

// biome-ignore lint: grpc-js clients are untyped
type AnyClient = any;

function clients(server: TestServer) {
  const address = `127.0.0.1:${server.app.port}`;
  const creds = grpc.credentials.createInsecure();
  return {
    subjects: new billing.SubjectService(address, creds) as AnyClient,
    usage: new billing.UsageEventService(address, creds) as AnyClient,
    health: new billing.HealthService(address, creds) as AnyClient,
    raw: new grpc.Client(address, creds),
  };
}

function metadata(key?: string): grpc.Metadata {
  const m = new grpc.Metadata();
  if (key !== undefined) m.set("x-api-key", key);
  return m;
}

/** A unary call as a promise: the response, or the ServiceError. */
function unary<T>(client: AnyClient, method: string, request: unknown, md: grpc.Metadata, options: grpc.CallOptions = {}): Promise<T> {
  return new Promise((resolve, reject) => {
    client[method](request, md, options, (err: grpc.ServiceError | null, res: T) => (err ? reject(err) : resolve(res)));
  });
}

async function failure(p: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await p;
  } catch (err) {
    return err as grpc.ServiceError;
  }
  throw new Error("the call succeeded");
}

interface Status {
  code: number;
  message: string;
  details: { typeUrl: string; value: Uint8Array }[];
}

/** google.rpc.Status from its wire form: code 1, message 2, details 3 (Any: type_url 1, value 2). */
function decodeStatus(bytes: Uint8Array): Status {
  const r = new BinaryReader(bytes);
  const s: Status = { code: 0, message: "", details: [] };
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 1) s.code = r.int32();
    else if (field === 2) s.message = r.string();
    else if (field === 3) {
      const any = new BinaryReader(r.bytes());
      const d: { typeUrl: string; value: Uint8Array } = { typeUrl: "", value: new Uint8Array() };
      while (any.pos < any.len) {
        const [f, w] = any.tag();
        if (f === 1) d.typeUrl = any.string();
        else if (f === 2) d.value = any.bytes();
        else any.skip(w);
      }
      s.details.push(d);
    } else r.skip(wire);
  }
  return s;
}

function statusOf(err: grpc.ServiceError): Status {
  const bin = err.metadata.get("grpc-status-details-bin")[0];
  if (!(bin instanceof Buffer)) throw new Error("no grpc-status-details-bin");
  return decodeStatus(bin);
}

function errorInfo(err: grpc.ServiceError) {
  const d = statusOf(err).details.find((x) => x.typeUrl === "type.googleapis.com/google.rpc.ErrorInfo");
  return d ? fromBinary(ErrorInfoSchema, d.value) : undefined;
}

/** A unary call with bytes of our own making as the request message (what a broken client sends). */
function rawUnary(c: grpc.Client, method: string, bytes: Buffer, md: grpc.Metadata): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    c.makeUnaryRequest(
      method,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      md,
      {},
      (err, res) => (err ? reject(err) : resolve(res as Buffer)),
    );
  });
}

/** A raw HTTP/2 gRPC call whose body is held open for `holdMs`: the response headers and trailers. */
async function heldCall(url: string, headers: Record<string, string>, holdMs: number): Promise<Record<string, string>> {
  const session = http2.connect(url);
  try {
    const req = session.request({ ":method": "POST", "content-type": "application/grpc", te: "trailers", ...headers });
    let all: Record<string, string> = {};
    req.on("response", (h) => (all = { ...all, ...(h as Record<string, string>) }));
    req.on("trailers", (h) => (all = { ...all, ...(h as Record<string, string>) }));
    req.on("data", () => {});
    const timer = setTimeout(() => req.end(), holdMs);
    await new Promise((resolve) => {
      req.on("close", resolve);
      req.on("error", resolve);
    });
    clearTimeout(timer);
    return all;
  } finally {
    session.close();
  }
}

interface RawAnswer {
  /** The HEADERS frame that opened the answer (holding grpc-status when the answer is trailers-only). */
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  /** The first envelope of the body: its flags and its payload as sent (undefined: no body). */
  flags?: number;
  payload?: Buffer;
}

/** One unary gRPC call over a raw HTTP/2 stream, as grpc-js sends it but with an envelope of our own making. */
async function rawCall(url: string, headers: Record<string, string>, flags: number, payload: Buffer): Promise<RawAnswer> {
  const session = http2.connect(url);
  try {
    const req = session.request({ ":method": "POST", "content-type": "application/grpc", te: "trailers", ...headers });
    const answer: RawAnswer = { headers: {}, trailers: {} };
    const chunks: Buffer[] = [];
    req.on("response", (h) => (answer.headers = h));
    req.on("trailers", (h) => (answer.trailers = h));
    req.on("data", (d: Buffer) => chunks.push(d));
    const frame = Buffer.alloc(5);
    frame[0] = flags;
    frame.writeUInt32BE(payload.length, 1);
    req.end(Buffer.concat([frame, payload]));
    await new Promise((resolve, reject) => req.on("close", resolve).on("error", reject));
    const body = Buffer.concat(chunks);
    if (body.length >= 5) {
      answer.flags = body[0];
      answer.payload = body.subarray(5, 5 + body.readUInt32BE(1));
    }
    return answer;
  } finally {
    session.close();
  }
}

/** A string field of a message in the protobuf binary format (length as a varint). */
function stringField(field: number, value: string): Buffer {
  const bytes = Buffer.from(value);
  const len: number[] = [];
  let n = bytes.length;
  while (n > 0x7f) {
    len.push(0x80 | (n & 0x7f));
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([(field << 3) | 2, ...len]), bytes]);
}

for (const store of STORES) {
  let server: TestServer;
  let c: ReturnType<typeof clients>;
  test.before(async () => {
    server = await startTestServer(store);
    c = clients(server);
  });
  test.after.always(async () => {
    if (c) for (const client of Object.values(c)) client.close();
    await server?.stop();
  });

  test(`${store}: unary calls succeed and read back what was written`, async (t) => {
    const md = metadata(server.keys.a);
    const created = await unary<{ subject: { id: string; name: string; metadata: Record<string, string> } }>(c.subjects, "CreateSubject", { name: "Zoë: 100% 😀", metadata: { plan: "pro" } }, md);
    t.regex(created.subject.id, /^subj_/);
    const got = await unary<{ subject: { id: string; name: string; metadata: Record<string, string> } }>(c.subjects, "GetSubject", { subject_id: created.subject.id }, md);
    t.is(got.subject.id, created.subject.id);
    t.is(got.subject.name, "Zoë: 100% 😀");
    t.deepEqual(got.subject.metadata, { plan: "pro" });
    // The same subject over REST: one store behind both.
    t.is((await ok(server, server.keys.a, "GET", `/subjects/${created.subject.id}`)).name, "Zoë: 100% 😀");
    // A ping needs no key; a deadline far away is read and does not get in the way.
    t.deepEqual(await unary(c.health, "Ping", {}, metadata(), { deadline: Date.now() + 3_600_000 }), { ok: true });
  });

  test(`${store}: an error message with a colon, a percent sign and non-ASCII reads back exactly`, async (t) => {
    const id = "sub_zoë: 100% ☃";
    const err = await failure(unary(c.subjects, "GetSubject", { subject_id: id }, metadata(server.keys.a)));
    t.is(err.code, grpc.status.NOT_FOUND);
    t.is(err.details, `subject "${id}" not found`);
    t.is(statusOf(err).message, `subject "${id}" not found`);
    t.is(errorInfo(err)?.reason, "SUBJECT_NOT_FOUND");
    t.is(errorInfo(err)?.metadata.subject_id, id);
  });

  test(`${store}: error details decode: ErrorInfo and BadRequest with the field path, as connect-node sends them`, async (t) => {
    const fresh = await server.freshKey();
    const err = await failure(unary(c.subjects, "CreateSubject", { name: "x", email: "not-an-email" }, metadata(fresh)));
    t.is(err.code, grpc.status.INVALID_ARGUMENT);
    t.regex(err.details, /^email: /);
    const status = statusOf(err);
    t.is(status.code, grpc.status.INVALID_ARGUMENT);
    t.deepEqual(
      status.details.map((d) => d.typeUrl),
      ["type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.rpc.BadRequest", "type.googleapis.com/google.rpc.RequestInfo"],
    );
    t.is(errorInfo(err)?.reason, "INVALID_FIELD");
    t.is(errorInfo(err)?.domain, "billing.v1");
    const bad = fromBinary(BadRequestSchema, status.details[1]?.value ?? new Uint8Array());
    t.deepEqual(
      bad.fieldViolations.map((v) => v.field),
      ["email"],
    );
    // Nothing was written.
    t.deepEqual((await ok(server, fresh, "GET", "/subjects?limit=100")).subjects, []);
  });

  test(`${store}: without a key or with a revoked one the call is unauthenticated; a publishable key is denied`, async (t) => {
    const missing = await failure(unary(c.subjects, "CreateSubject", { name: "nobody" }, metadata()));
    t.is(missing.code, grpc.status.UNAUTHENTICATED);
    t.is(missing.details, "missing API key: send it in the X-API-Key header");
    t.is(errorInfo(missing)?.reason, "API_KEY_MISSING");
    const revoked = await failure(unary(c.subjects, "GetSubject", { subject_id: "sub_x" }, metadata(server.keys.aRevoked)));
    t.is(revoked.code, grpc.status.UNAUTHENTICATED);
    t.is(errorInfo(revoked)?.reason, "API_KEY_INVALID");
    const publishable = await failure(unary(c.subjects, "GetSubject", { subject_id: "sub_x" }, metadata(server.keys.aPublishable)));
    t.is(publishable.code, grpc.status.PERMISSION_DENIED);
    t.is(errorInfo(publishable)?.reason, "PUBLISHABLE_KEY_NOT_ALLOWED");
  });

  test(`${store}: bytes that are not the request message are invalid_argument MALFORMED_PROTOBUF, naming the type`, async (t) => {
    const err = await failure(rawUnary(c.raw, "/billing.v1.SubjectService/CreateSubject", Buffer.from([0xff, 0xff, 0xff]), metadata(server.keys.a)));
    t.is(err.code, grpc.status.INVALID_ARGUMENT);
    t.regex(err.details, /^the request is not a valid billing\.v1\.CreateSubjectRequest in the protobuf binary format: /);
    t.is(errorInfo(err)?.reason, "MALFORMED_PROTOBUF");
    t.is(errorInfo(err)?.metadata.message_type, "billing.v1.CreateSubjectRequest");
    // A string field that is not UTF-8 (name, field 4: "a", 0xFF, "b") is not a valid message either: nothing is created.
    const fresh = await server.freshKey();
    const notUtf8 = await failure(rawUnary(c.raw, "/billing.v1.SubjectService/CreateSubject", Buffer.from([0x22, 3, 0x61, 0xff, 0x62]), metadata(fresh)));
    t.is(notUtf8.code, grpc.status.INVALID_ARGUMENT);
    t.is(errorInfo(notUtf8)?.reason, "MALFORMED_PROTOBUF");
    t.deepEqual((await ok(server, fresh, "GET", "/subjects?limit=100")).subjects, []);
    // Well-formed bytes still reach the method: GetSubject of "nobody" (field 1) is not found.
    const nobody = Buffer.concat([Buffer.from([0x0a, 6]), Buffer.from("nobody")]);
    t.is((await failure(rawUnary(c.raw, "/billing.v1.SubjectService/GetSubject", nobody, metadata(server.keys.a)))).code, grpc.status.NOT_FOUND);
  });

  test(`${store}: a request body over the method's bound is resource_exhausted PAYLOAD_TOO_LARGE`, async (t) => {
    // GetSubject takes at most 256 KiB: a subject_id of 300 KB (field 1, length as a varint).
    const id = Buffer.alloc(300_000, "a");
    const len = [0x80 | (id.length & 0x7f), 0x80 | ((id.length >> 7) & 0x7f), id.length >> 14];
    const body = Buffer.concat([Buffer.from([0x0a, ...len]), id]);
    const err = await failure(rawUnary(c.raw, "/billing.v1.SubjectService/GetSubject", body, metadata(server.keys.a)));
    t.is(err.code, grpc.status.RESOURCE_EXHAUSTED);
    t.is(err.details, "the request body is larger than 262144 bytes, the most this method accepts");
    t.is(errorInfo(err)?.reason, "PAYLOAD_TOO_LARGE");
    // The connection serves the next call.
    t.deepEqual(await unary(c.health, "Ping", {}, metadata()), { ok: true });
  });

  test(`${store}: a call whose deadline passes before its body arrives is deadline_exceeded, from the server`, async (t) => {
    const trailers = await heldCall(server.url, { ":path": "/billing.v1.SubjectService/GetSubject", "x-api-key": server.keys.a, "grpc-timeout": "100m" }, 3_000);
    t.is(trailers["grpc-status"], String(grpc.status.DEADLINE_EXCEEDED));
    t.is(decodeURIComponent(trailers["grpc-message"] ?? ""), "the call's deadline of 100 ms passed before it was answered");
    const malformed = await heldCall(server.url, { ":path": "/billing.v1.SubjectService/GetSubject", "x-api-key": server.keys.a, "grpc-timeout": "soon" }, 0);
    t.is(malformed["grpc-status"], String(grpc.status.INVALID_ARGUMENT));
    // grpc-js's own deadline: the client gives up and says so.
    const err = await failure(unary(c.subjects, "GetSubject", { subject_id: "sub_x" }, metadata(server.keys.a), { deadline: Date.now() - 1 }));
    t.is(err.code, grpc.status.DEADLINE_EXCEEDED);
  });

  test(`${store}: grpc-js with gzip both ways: requests read, a large answer and a small one come back right`, async (t) => {
    const key = await server.freshKey();
    const address = `127.0.0.1:${server.app.port}`;
    const options = { "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip };
    const zipped = new billing.SubjectService(address, grpc.credentials.createInsecure(), options) as AnyClient;
    const healthZipped = new billing.HealthService(address, grpc.credentials.createInsecure(), options) as AnyClient;
    try {
      const md = metadata(key);
      // 20 subjects with 200 characters of metadata each: the list is far over 1 KiB.
      for (let i = 0; i < 20; i++) {
        await unary(zipped, "CreateSubject", { name: `Zipped ${i}`, external_id: `zip-${i}`, metadata: { note: String(i).repeat(200).slice(0, 200) } }, md);
      }
      const list = await unary<{ subjects: { name: string; metadata: Record<string, string> }[] }>(zipped, "ListSubjects", { limit: 100 }, md);
      t.is(list.subjects.length, 20);
      t.deepEqual(list.subjects.map((x) => x.name).sort(), Array.from({ length: 20 }, (_, i) => `Zipped ${i}`).sort());
      t.true(list.subjects.every((x) => x.metadata.note?.length === 200));
      t.deepEqual(await unary(healthZipped, "Ping", {}, metadata()), { ok: true }, "a small answer");
      // An error answer reads as without compression.
      const missing = await failure(unary(zipped, "GetSubject", { subject_id: "sub_nobody: 100%" }, md));
      t.is(missing.code, grpc.status.NOT_FOUND);
      t.is(missing.details, 'subject "sub_nobody: 100%" not found');
      // 1 MB of name compresses to about 1 KB: under the 256 KiB bound on the wire, over it once read.
      const huge = await failure(unary(zipped, "CreateSubject", { name: "a".repeat(1024 * 1024) }, md));
      t.is(huge.code, grpc.status.RESOURCE_EXHAUSTED, huge.details);
      t.is((await unary<{ subjects: unknown[] }>(zipped, "ListSubjects", { limit: 100 }, md)).subjects.length, 20, "nothing was written");
    } finally {
      zipped.close();
      healthZipped.close();
    }
  });

  test(`${store}: on the wire: an answer over 1 KiB is gzip for a client that accepts it, a small one is not; gzip and br requests are read`, async (t) => {
    const key = await server.freshKey();
    const accepts = { "grpc-accept-encoding": "identity,deflate,gzip", "x-api-key": key }; // what grpc-js sends
    for (let i = 0; i < 10; i++) await ok(server, key, "POST", "/subjects", { name: `Wire ${i}`, metadata: { note: "n".repeat(200) } });
    // ListSubjectsRequest { limit: 100 } (field 1, varint), uncompressed: a large answer in gzip.
    const list = await rawCall(server.url, { ":path": "/billing.v1.SubjectService/ListSubjects", ...accepts }, 0, Buffer.from([0x08, 100]));
    t.is(list.trailers["grpc-status"], "0", String(list.trailers["grpc-message"]));
    t.is(list.headers["grpc-encoding"], "gzip");
    t.is(list.flags, 1, "the answer's message is compressed");
    t.regex(gunzipSync(list.payload as Buffer).toString("latin1"), /Wire 9/);
    t.true((list.payload as Buffer).length < 1024, "and smaller than it was");

    // A small answer stays uncompressed (flag 0) under the same grpc-encoding.
    const ping = await rawCall(server.url, { ":path": "/billing.v1.HealthService/Ping", "grpc-accept-encoding": "gzip" }, 0, Buffer.alloc(0));
    t.is(ping.trailers["grpc-status"], "0");
    t.is(ping.headers["grpc-encoding"], "gzip");
    t.is(ping.flags, 0);
    // Without grpc-accept-encoding nothing is compressed, whatever its size.
    const plain = await rawCall(server.url, { ":path": "/billing.v1.SubjectService/ListSubjects", "x-api-key": key }, 0, Buffer.from([0x08, 100]));
    t.is(plain.headers["grpc-encoding"], undefined);
    t.is(plain.flags, 0);
    t.regex((plain.payload as Buffer).toString("latin1"), /Wire 9/);

    // A request in gzip, and one in br with an answer asked in br (CreateSubjectRequest: name is field 4).
    const gz = await rawCall(server.url, { ":path": "/billing.v1.SubjectService/CreateSubject", "grpc-encoding": "gzip", "x-api-key": key }, 1, gzipSync(stringField(4, "Gzipped: ☃")));
    t.is(gz.trailers["grpc-status"], "0", String(gz.trailers["grpc-message"]));
    t.is(gz.headers["grpc-encoding"], "gzip", "without grpc-accept-encoding the answer takes the request's compression");
    t.regex(gz.payload?.toString("utf8") ?? "", /Gzipped: ☃/, "a small answer uncompressed");
    const br = await rawCall(
      server.url,
      { ":path": "/billing.v1.SubjectService/ListSubjects", "grpc-encoding": "br", "grpc-accept-encoding": "br", "x-api-key": key },
      1,
      brotliCompressSync(Buffer.from([0x08, 100])),
    );
    t.is(br.trailers["grpc-status"], "0", String(br.trailers["grpc-message"]));
    t.is(br.headers["grpc-encoding"], "br");
    t.is(br.flags, 1);

    // Served by the lean path: its errors are trailers-only (connect-node sends headers, then trailers).
    const nobody = await rawCall(server.url, { ":path": "/billing.v1.SubjectService/GetSubject", "grpc-encoding": "gzip", "x-api-key": key }, 1, gzipSync(stringField(1, "nobody")));
    t.is(nobody.headers["grpc-status"], String(grpc.status.NOT_FOUND));
    // Compressed bytes without a grpc-encoding: the caller's fault, invalid_argument (Connect says internal).
    const unnamed = await rawCall(server.url, { ":path": "/billing.v1.SubjectService/GetSubject", "x-api-key": key }, 1, gzipSync(stringField(1, "nobody")));
    t.is(unnamed.headers["grpc-status"], String(grpc.status.INVALID_ARGUMENT));
    t.regex(decodeURIComponent(String(unnamed.headers["grpc-message"])), /flagged compressed \(envelope flags 0x01\), but the request names no compression/);
    // Bytes that are not gzip: invalid_argument; an encoding the server lacks: unimplemented.
    const notGzip = await rawCall(server.url, { ":path": "/billing.v1.SubjectService/GetSubject", "grpc-encoding": "gzip", "x-api-key": key }, 1, Buffer.from("not gzip"));
    t.is((notGzip.headers["grpc-status"] ?? notGzip.trailers["grpc-status"]) as string, String(grpc.status.INVALID_ARGUMENT), String(notGzip.headers["grpc-message"]));
    const snappy = await rawCall(server.url, { ":path": "/billing.v1.SubjectService/GetSubject", "grpc-encoding": "snappy", "x-api-key": key }, 1, Buffer.from("x"));
    t.is((snappy.headers["grpc-status"] ?? snappy.trailers["grpc-status"]) as string, String(grpc.status.UNIMPLEMENTED));
    t.deepEqual((await ok(server, key, "GET", "/subjects?limit=100")).subjects.length, 11, "only the gzip request created a subject");
  });

  test(`${store}: client-streaming ingest commits every event and counts the outcomes`, async (t) => {
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { external_id: `ext-${Math.random().toString(36).slice(2)}` });
    const metric = await ok(server, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const result = await new Promise<{ received: string; accepted: string; duplicate: string; rejected: string; rejections: { index: string }[] }>((resolve, reject) => {
      const call = c.usage.StreamUsageEvents(metadata(key), (err: grpc.ServiceError | null, res: never) => (err ? reject(err) : resolve(res)));
      for (let i = 0; i < 300; i++) {
        call.write({
          idempotency_key: i === 299 ? "e0" : `e${i}`,
          subject_id: subject.id,
          event_name: "api",
          data: { n: i === 150 ? "oops" : "0.5" },
          timestamp: { seconds: String(Date.parse("2026-03-01T10:00:00Z") / 1000), nanos: 0 },
        });
      }
      call.end();
    });
    t.deepEqual([result.received, result.accepted, result.duplicate, result.rejected], [300, 298, 1, 1]);
    t.deepEqual(
      result.rejections.map((r) => r.index),
      [150],
    );
    const summary = await ok(server, key, "POST", `/pricing-metrics/${metric.id}/summary`, {
      subject_id: subject.id,
      period: { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" },
    });
    t.is(summary[0].value, "149", "298 events of 0.5");
  });
}
