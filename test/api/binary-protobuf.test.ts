/**
 * Binary protobuf that does not decode is bad input: invalid_argument (reason MALFORMED_PROTOBUF,
 * naming the message type), never internal, on Connect (application/proto), gRPC and gRPC-Web,
 * unary and client-streaming. Well-formed binary requests still reach the method.
 */
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import test from "ava";
import { GetSubjectRequestSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { UsageEventInputSchema } from "../../src/gen/billing/v1/usage_event_pb.js";
import { ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { reasonOf } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";

const GARBAGE = Buffer.from([0xff, 0xff, 0xff]);
const envelope = (msg: Uint8Array, flags = 0) => {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(msg.byteLength, 1);
  return Buffer.concat([head, msg]);
};

/** A raw gRPC call over HTTP/2 (prior knowledge): the response trailers. */
async function grpcCall(url: string, path: string, key: string, body: Buffer): Promise<Record<string, string>> {
  const session = http2.connect(url);
  try {
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers", "x-api-key": key });
    let trailers: Record<string, string> = {};
    let headers: Record<string, string> = {};
    req.on("response", (h) => (headers = h as Record<string, string>));
    req.on("trailers", (h) => (trailers = h as Record<string, string>));
    req.on("data", () => {});
    req.end(body);
    await new Promise((r, j) => {
      req.on("close", r);
      req.on("error", j);
    });
    // A trailers-only response carries the status in the headers.
    return { ...headers, ...trailers };
  } finally {
    session.close();
  }
}

/** The gRPC-Web trailer block at the end of a response body. */
function grpcWebTrailers(body: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let at = 0;
  while (at + 5 <= body.length) {
    const flags = body[at] as number;
    const len = body.readUInt32BE(at + 1);
    if (flags & 0x80) {
      for (const line of body
        .subarray(at + 5, at + 5 + len)
        .toString()
        .split("\r\n")) {
        const i = line.indexOf(":");
        if (i > 0) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
    }
    at += 5 + len;
  }
  return out;
}

const reasonOfBin = (b64: string | undefined) => {
  if (!b64) return undefined;
  // grpc-status-details-bin: a google.rpc.Status; its details are Any. Find the ErrorInfo's reason by decoding loosely.
  const text = Buffer.from(b64, "base64").toString("latin1");
  return /MALFORMED_PROTOBUF/.test(text) ? "MALFORMED_PROTOBUF" : undefined;
};

for (const store of STORES) {
  const server = useServer(store);

  const GET_SUBJECT = "/billing.v1.SubjectService/GetSubject";

  test(`${store}: Connect application/proto: garbage is a 400 invalid_argument naming the message type`, async (t) => {
    for (const body of [GARBAGE, Buffer.from([0x0a, 0x05, 0x61])]) {
      const res = await fetch(`${server.url}${GET_SUBJECT}`, { method: "POST", headers: { "content-type": "application/proto", "x-api-key": server.keys.a }, body });
      const json = await res.json();
      t.is(res.status, 400);
      t.is(json.code, "invalid_argument");
      t.regex(json.message, /not a valid billing\.v1\.GetSubjectRequest in the protobuf binary format/);
      t.is(reasonOf(json), "MALFORMED_PROTOBUF");
    }
    // A well-formed binary request still reaches the method (not found, binary error body is JSON).
    const ok = toBinary(GetSubjectRequestSchema, create(GetSubjectRequestSchema, { subjectId: "nobody" }));
    const res = await fetch(`${server.url}${GET_SUBJECT}`, { method: "POST", headers: { "content-type": "application/proto", "x-api-key": server.keys.a }, body: ok });
    t.is(res.status, 404);
    t.is((await res.json()).code, "not_found");
  });

  test(`${store}: gRPC: garbage in the envelope is grpc-status 3 (invalid_argument), unary and streaming`, async (t) => {
    const trailers = await grpcCall(server.url, GET_SUBJECT, server.keys.a, envelope(GARBAGE));
    t.is(trailers["grpc-status"], "3");
    t.regex(decodeURIComponent(trailers["grpc-message"] ?? ""), /not a valid billing\.v1\.GetSubjectRequest/);
    t.is(reasonOfBin(trailers["grpc-status-details-bin"]), "MALFORMED_PROTOBUF");

    // Well-formed: the method answers (not found, 5).
    const ok = toBinary(GetSubjectRequestSchema, create(GetSubjectRequestSchema, { subjectId: "nobody" }));
    t.is((await grpcCall(server.url, GET_SUBJECT, server.keys.a, envelope(ok)))["grpc-status"], "5");

    // Client streaming: a good event, then a bad one.
    const good = toBinary(UsageEventInputSchema, create(UsageEventInputSchema, { idempotencyKey: "k1", subjectId: "nobody", eventName: "e" }));
    const stream = await grpcCall(server.url, "/billing.v1.UsageEventService/StreamUsageEvents", server.keys.a, Buffer.concat([envelope(good), envelope(GARBAGE)]));
    t.is(stream["grpc-status"], "3");
    t.regex(decodeURIComponent(stream["grpc-message"] ?? ""), /not a valid billing\.v1\.UsageEventInput/);
  });

  test(`${store}: gRPC-Web: garbage in the envelope is grpc-status 3 (invalid_argument)`, async (t) => {
    const res = await fetch(`${server.url}${GET_SUBJECT}`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-api-key": server.keys.a },
      body: envelope(GARBAGE),
    });
    const body = Buffer.from(await res.arrayBuffer());
    const trailers = { ...Object.fromEntries(res.headers), ...grpcWebTrailers(body) };
    t.is(trailers["grpc-status"], "3");
    t.regex(decodeURIComponent(trailers["grpc-message"] ?? ""), /not a valid billing\.v1\.GetSubjectRequest/);
    // An envelope announcing more bytes than sent is still Connect's protocol error, not internal.
    const cut = await fetch(`${server.url}${GET_SUBJECT}`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-api-key": server.keys.a },
      body: envelope(GARBAGE).subarray(0, 6),
    });
    const cutTrailers = { ...Object.fromEntries(cut.headers), ...grpcWebTrailers(Buffer.from(await cut.arrayBuffer())) };
    t.is(cutTrailers["grpc-status"], "3");
  });

  test(`${store}: the ErrorInfo detail decodes (connect-node clients read it)`, async (t) => {
    const res = await fetch(`${server.url}${GET_SUBJECT}`, { method: "POST", headers: { "content-type": "application/proto", "x-api-key": server.keys.a }, body: GARBAGE });
    const json = await res.json();
    const info = fromBinary(ErrorInfoSchema, Buffer.from(json.details[0].value, "base64"));
    t.deepEqual([info.reason, info.domain, info.metadata.message_type], ["MALFORMED_PROTOBUF", "billing.v1", "billing.v1.GetSubjectRequest"]);
  });
}
