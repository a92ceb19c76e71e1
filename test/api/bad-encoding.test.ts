/**
 * Bytes that do not read as what the request says they are (compression that does not
 * decompress, protobuf cut short, envelope flags no request has, base64 that is not) are the
 * caller's fault on every protocol and every call path: invalid_argument (HTTP 400 on Connect
 * unary, grpc-status 3 on gRPC and gRPC-Web, the end-stream error on Connect streams) with an
 * ErrorInfo reason, never a 500 / internal; without a key the answer is unauthenticated, before
 * any of the body is read. Each bad input goes to GetSubject and CreateUsageEventBatch (unary:
 * the lean gRPC path, connect-node otherwise), StreamUsageEvents (client stream: the lean gRPC
 * stream path) and WatchEvents (server stream: connect-node on every protocol), and nothing the
 * bad requests carried is written.
 */
import http2 from "node:http2";
import { brotliCompressSync, gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import test, { type ExecutionContext } from "ava";
import { WatchEventsRequestSchema } from "../../src/gen/billing/v1/event_service_pb.js";
import { GetSubjectRequestSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { UsageEventInputSchema } from "../../src/gen/billing/v1/usage_event_pb.js";
import { CreateUsageEventBatchRequestSchema } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { ok } from "../helpers/clients.js";
import { STORES, type Store } from "../helpers/db.js";
import { type Answer, connectGet, connectPost, envelope, grpcCall, grpcWebCall, restCall } from "../helpers/raw-rpc.js";
import { type TestServer, useServers } from "../helpers/server.js";

const serverOf = useServers();

const GET_SUBJECT = "/billing.v1.SubjectService/GetSubject";
const BATCH = "/billing.v1.UsageEventService/CreateUsageEventBatch";
const STREAM = "/billing.v1.UsageEventService/StreamUsageEvents";
const WATCH = "/billing.v1.EventService/WatchEvents";

type Method = "GetSubject" | "CreateUsageEventBatch" | "StreamUsageEvents" | "WatchEvents";
const PATHS: Record<Method, string> = { GetSubject: GET_SUBJECT, CreateUsageEventBatch: BATCH, StreamUsageEvents: STREAM, WatchEvents: WATCH };
const STREAMING = new Set<Method>(["StreamUsageEvents", "WatchEvents"]);

/** An environment with one subject, and the one event every bad request of a test carries. */
interface Fixture {
  key: string;
  subjectId: string;
  event: { idempotency_key: string; subject_id: string; event_name: string; timestamp: string };
}

async function fixture(server: TestServer): Promise<Fixture> {
  const key = await server.freshKey();
  const subject = await ok(server, key, "POST", "/subjects", { name: "Encodings" });
  return { key, subjectId: subject.id, event: { idempotency_key: "bad-encoding-1", subject_id: subject.id, event_name: "api", timestamp: "2026-03-01T10:00:00Z" } };
}

/** The method's request message (a stream's one message) in binary, valid: each bad input below spoils it. */
function messageOf(method: Method, f: Fixture): Uint8Array {
  const event = create(UsageEventInputSchema, {
    idempotencyKey: f.event.idempotency_key,
    subjectId: f.event.subject_id,
    eventName: f.event.event_name,
    timestamp: timestampFromDate(new Date(f.event.timestamp)),
  });
  switch (method) {
    case "GetSubject":
      return toBinary(GetSubjectRequestSchema, create(GetSubjectRequestSchema, { subjectId: f.subjectId }));
    case "CreateUsageEventBatch":
      return toBinary(CreateUsageEventBatchRequestSchema, create(CreateUsageEventBatchRequestSchema, { events: [event] }));
    case "StreamUsageEvents":
      return toBinary(UsageEventInputSchema, event);
    case "WatchEvents":
      return toBinary(WatchEventsRequestSchema, create(WatchEventsRequestSchema, { after: "evt_00000000000000000000000000", types: ["invoice.finalized"] }));
  }
}

/** A gzip member with one byte of its deflate data changed: the data no longer inflates, or its CRC fails. */
function corruptGzip(bytes: Uint8Array): Buffer {
  const gz = Buffer.from(gzipSync(bytes));
  gz[12] = (gz[12] as number) ^ 0x5a;
  gz[gz.length - 8] = (gz[gz.length - 8] as number) ^ 0xff;
  return gz;
}

/**
 * One bad input: the message's bytes as sent (`payload`), under the compression the request
 * names (undefined: none), in an envelope with `flags` on the enveloped protocols; the reason it
 * is refused with. `enveloped`: only protocols with envelopes can carry it.
 */
interface Kind {
  name: string;
  reason: string;
  compression?: "gzip" | "br" | "identity";
  flags?: number;
  enveloped?: boolean;
  payload: (message: Uint8Array) => Uint8Array;
}

const KINDS: Kind[] = [
  { name: "corrupt gzip (a changed byte)", reason: "MALFORMED_COMPRESSION", compression: "gzip", flags: 1, payload: corruptGzip },
  { name: "gzip cut short", reason: "MALFORMED_COMPRESSION", compression: "gzip", flags: 1, payload: (m) => gzipSync(m).subarray(0, 14) },
  { name: "bytes that are not gzip", reason: "MALFORMED_COMPRESSION", compression: "gzip", flags: 1, payload: () => Buffer.from("not gzip at all") },
  { name: "brotli cut short", reason: "MALFORMED_COMPRESSION", compression: "br", flags: 1, payload: (m) => brotliCompressSync(m).subarray(0, 4) },
  { name: "bytes that are not brotli", reason: "MALFORMED_COMPRESSION", compression: "br", flags: 1, payload: () => Buffer.from([0x1b, 0xff, 0xff, 0x00, 0x01, 0x02, 0x03]) },
  { name: "truncated protobuf", reason: "MALFORMED_PROTOBUF", payload: (m) => m.subarray(0, m.length - 1) },
  { name: "truncated protobuf in valid gzip", reason: "MALFORMED_PROTOBUF", compression: "gzip", flags: 1, payload: (m) => gzipSync(m.subarray(0, m.length - 1)) },
  { name: "truncated protobuf in valid brotli", reason: "MALFORMED_PROTOBUF", compression: "br", flags: 1, payload: (m) => brotliCompressSync(m.subarray(0, m.length - 1)) },
  { name: "envelope flags 0x02", reason: "MALFORMED_ENVELOPE", flags: 0x02, enveloped: true, payload: (m) => m },
  { name: "envelope flags 0x80", reason: "MALFORMED_ENVELOPE", flags: 0x80, enveloped: true, payload: (m) => m },
  { name: "envelope flags 0x03 under gzip", reason: "MALFORMED_ENVELOPE", compression: "gzip", flags: 0x03, enveloped: true, payload: (m) => gzipSync(m) },
  { name: "envelope flags 0x01 without an encoding", reason: "MALFORMED_ENVELOPE", flags: 0x01, enveloped: true, payload: (m) => gzipSync(m) },
  { name: "envelope flags 0x01 under identity", reason: "MALFORMED_ENVELOPE", compression: "identity", flags: 0x01, enveloped: true, payload: (m) => gzipSync(m) },
];

/** Answers without a key (unauthenticated) and with one (the kind's refusal): the second is what the caller was told about its bytes. */
async function both(send: (headers: Record<string, string>) => Promise<Answer>, key: string): Promise<{ keyless: Answer; keyed: Answer }> {
  return { keyless: await send({}), keyed: await send({ "x-api-key": key }) };
}

/** The answers' codes and reasons as they should be; `http`: the HTTP status each protocol answers them with. */
function expectRefused(t: ExecutionContext, label: string, answers: { keyless: Answer; keyed: Answer }, reason: string, http: { keyless: number; keyed: number }): void {
  const { keyless, keyed } = answers;
  t.is(keyless.code, "unauthenticated", `${label}, without a key: ${JSON.stringify(keyless)}`);
  t.is(keyless.http, http.keyless, `${label}, without a key: ${JSON.stringify(keyless)}`);
  t.is(keyed.code, "invalid_argument", `${label}: ${JSON.stringify(keyed)}`);
  t.is(keyed.reason, reason, `${label}: ${JSON.stringify(keyed)}`);
  t.is(keyed.http, http.keyed, `${label}: ${JSON.stringify(keyed)}`);
  t.false(keyed.message.includes("    at "), "no stack trace");
}

/** Nothing the bad requests carried was written: the event they all held is new when sent properly now. */
async function nothingWritten(t: ExecutionContext, server: TestServer, f: Fixture): Promise<void> {
  const sent = await ok(server, f.key, "POST", "/usage-events", f.event);
  t.is(sent.status, "accepted", "no bad request ingested the event");
}

type Protocol = "connect" | "grpc" | "grpc-web" | "grpc-web-text";

/** The enveloped body of a kind: its payload in one envelope (a stream's too, then the end of the body). */
const enveloped = (kind: Kind, message: Uint8Array) => envelope(kind.flags ?? 0, kind.payload(message));

/** Sends one kind to one method over one protocol (with or without a key, as `headers` says). */
function sender(protocol: Protocol, method: Method, kind: Kind, message: Uint8Array, server: TestServer, session: http2.ClientHttp2Session) {
  const path = PATHS[method];
  const encodingHeader = (name: string) => (kind.compression ? { [name]: kind.compression } : {});
  return (headers: Record<string, string>): Promise<Answer> => {
    switch (protocol) {
      case "connect":
        if (STREAMING.has(method))
          return connectPost(server.url, path, { "content-type": "application/connect+proto", ...encodingHeader("connect-content-encoding"), ...headers }, enveloped(kind, message));
        return connectPost(server.url, path, { "content-type": "application/proto", ...encodingHeader("content-encoding"), ...headers }, kind.payload(message));
      case "grpc":
        return grpcCall(session, path, { ...encodingHeader("grpc-encoding"), ...headers }, enveloped(kind, message));
      case "grpc-web":
        return grpcWebCall(server.url, path, { ...encodingHeader("grpc-encoding"), ...headers }, enveloped(kind, message));
      case "grpc-web-text":
        return grpcWebCall(server.url, path, { ...encodingHeader("grpc-encoding"), ...headers }, enveloped(kind, message).toString("base64"), true);
    }
  };
}

const METHODS: Method[] = ["GetSubject", "CreateUsageEventBatch", "StreamUsageEvents", "WatchEvents"];

for (const store of STORES as Store[]) {
  for (const protocol of ["connect", "grpc", "grpc-web", "grpc-web-text"] as Protocol[]) {
    for (const method of METHODS) {
      // Connect unary has no envelope: the flags kinds are for the enveloped protocols.
      const kinds = KINDS.filter((k) => !k.enveloped || protocol !== "connect" || STREAMING.has(method));
      test(`${store} ${protocol} ${method}: ${kinds.length} kinds of bad bytes are invalid_argument with a reason (unauthenticated without a key), and write nothing`, async (t) => {
        const server = serverOf(store);
        const f = await fixture(server);
        const message = messageOf(method, f);
        const session = http2.connect(server.url);
        try {
          // On Connect a unary error is its HTTP status; a stream's is in its end-stream message (HTTP 200); gRPC's always HTTP 200.
          const http = protocol === "connect" && !STREAMING.has(method) ? { keyless: 401, keyed: 400 } : { keyless: 200, keyed: 200 };
          for (const kind of kinds) {
            expectRefused(t, kind.name, await both(sender(protocol, method, kind, message, server, session), f.key), kind.reason, http);
          }
          if (protocol === "grpc-web-text") {
            // Base64 that does not decode: a character outside the alphabet, and a dangling one at the end.
            for (const text of ["AAAA*AAA", `${envelope(0, message).toString("base64")}A`]) {
              const send = (headers: Record<string, string>) => grpcWebCall(server.url, PATHS[method], headers, text, true);
              expectRefused(t, `base64 ${JSON.stringify(text)}`, await both(send, f.key), "MALFORMED_BASE64", http);
            }
          }
        } finally {
          session.close();
        }
        if (method === "CreateUsageEventBatch" || method === "StreamUsageEvents") await nothingWritten(t, server, f);
      });
    }
  }

  test(`${store} the same bytes well formed are read on every protocol (the table's requests reach the method)`, async (t) => {
    const server = serverOf(store);
    const f = await fixture(server);
    const message = messageOf("GetSubject", f);
    const session = http2.connect(server.url);
    try {
      const good: Kind[] = [
        { name: "uncompressed", reason: "", payload: (m) => m },
        { name: "gzip", reason: "", compression: "gzip", flags: 1, payload: (m) => gzipSync(m) },
        { name: "brotli", reason: "", compression: "br", flags: 1, payload: (m) => brotliCompressSync(m) },
        { name: "flags 0x00 under gzip", reason: "", compression: "gzip", flags: 0, enveloped: true, payload: (m) => m },
      ];
      for (const protocol of ["connect", "grpc", "grpc-web", "grpc-web-text"] as Protocol[]) {
        for (const kind of good) {
          if (kind.enveloped && protocol === "connect") continue;
          const answer = await sender(protocol, "GetSubject", kind, message, server, session)({ "x-api-key": f.key });
          t.is(answer.code, "ok", `${protocol} ${kind.name}: ${JSON.stringify(answer)}`);
        }
      }
      const get = await connectGet(server.url, GET_SUBJECT, `encoding=proto&base64=1&compression=gzip&message=${Buffer.from(gzipSync(message)).toString("base64url")}`, { "x-api-key": f.key });
      t.is(get.code, "ok", JSON.stringify(get));
    } finally {
      session.close();
    }
  });

  test(`${store} Connect GET: a query-string message that does not decode is invalid_argument with a reason; unauthenticated without a key`, async (t) => {
    const server = serverOf(store);
    const f = await fixture(server);
    const message = messageOf("GetSubject", f);
    const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64url");
    const cases: [string, string, string][] = [
      ["message=%FF with base64=1", "encoding=proto&base64=1&message=%FF", "MALFORMED_BASE64"],
      ["message=!!! with base64=1", "encoding=proto&base64=1&message=!!!", "MALFORMED_BASE64"],
      ["a dangling base64 character", "encoding=proto&base64=1&message=Cg0AA", "MALFORMED_BASE64"],
      ["message=Cg (a field cut short)", "encoding=proto&base64=1&message=Cg", "MALFORMED_PROTOBUF"],
      ["message=%FF in binary without base64", "encoding=proto&message=%FF", "MALFORMED_PROTOBUF"],
      ["truncated protobuf", `encoding=proto&base64=1&message=${b64(message.subarray(0, message.length - 1))}`, "MALFORMED_PROTOBUF"],
      ["corrupt gzip", `encoding=proto&base64=1&compression=gzip&message=${b64(corruptGzip(message))}`, "MALFORMED_COMPRESSION"],
      ["gzip cut short", `encoding=proto&base64=1&compression=gzip&message=${b64(gzipSync(message).subarray(0, 14))}`, "MALFORMED_COMPRESSION"],
      ["brotli cut short", `encoding=proto&base64=1&compression=br&message=${b64(brotliCompressSync(message).subarray(0, 4))}`, "MALFORMED_COMPRESSION"],
      ["corrupt gzip of JSON", `encoding=json&base64=1&compression=gzip&message=${b64(corruptGzip(Buffer.from(`{"subject_id":"${f.subjectId}"}`)))}`, "MALFORMED_COMPRESSION"],
      ["JSON that is not JSON", "encoding=json&message=%7B%22subject_id%22", "MALFORMED_JSON"],
    ];
    for (const [name, query, reason] of cases) {
      const send = (headers: Record<string, string>) => connectGet(server.url, GET_SUBJECT, query, headers);
      expectRefused(t, name, await both(send, f.key), reason, { keyless: 401, keyed: 400 });
    }
    // Read as a POST reads it: JSON through the one JSON reader.
    const json = await connectGet(server.url, GET_SUBJECT, `encoding=json&message=${encodeURIComponent(JSON.stringify({ subject_id: f.subjectId }))}`, { "x-api-key": f.key });
    t.is(json.code, "ok", JSON.stringify(json));
  });

  test(`${store} REST: a body with a Content-Encoding (corrupt or not) is refused 415 without being read as JSON; unauthenticated without a key`, async (t) => {
    const server = serverOf(store);
    const f = await fixture(server);
    const json = Buffer.from(JSON.stringify({ events: [f.event] }));
    const bodies: [string, string, Uint8Array][] = [
      ["valid gzip", "gzip", gzipSync(json)],
      ["corrupt gzip", "gzip", corruptGzip(json)],
      ["gzip cut short", "gzip", gzipSync(json).subarray(0, 14)],
      ["corrupt brotli", "br", brotliCompressSync(json).subarray(0, 4)],
      ["an unknown encoding", "snappy", json],
    ];
    for (const [name, encoding, body] of bodies) {
      const send = (headers: Record<string, string>) => restCall(server.url, "POST", "/usage-events/batch", { "content-type": "application/json", "content-encoding": encoding, ...headers }, body);
      const { keyless, keyed } = await both(send, f.key);
      t.is(keyless.http, 401, `${name}, without a key: ${JSON.stringify(keyless)}`);
      t.is(keyed.http, 415, `${name}: ${JSON.stringify(keyed)}`);
      t.is(keyed.code, "invalid_argument");
      t.is(keyed.reason, "UNSUPPORTED_CONTENT_ENCODING");
    }
    const identity = await restCall(server.url, "POST", "/subjects", { "content-type": "application/json", "content-encoding": "identity", "x-api-key": f.key }, Buffer.from("{}"));
    t.is(identity.code, "ok", "identity is the body as sent");
    await nothingWritten(t, server, f);
  });
}
