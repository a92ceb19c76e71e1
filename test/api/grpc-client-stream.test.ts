/**
 * Client-streaming gRPC (the ingest stream, served by connect-node: the lean path serves unary
 * calls only) at the edges of its framing, on both stores, against the server on a port: each
 * request is sent twice over node:http2, once as a plain gRPC client sends it and once with an
 * Origin header (a browser's call), and both answers must carry the same grpc-status,
 * grpc-message and counts. The cases: envelopes split across DATA frames at every byte, messages in gzip, a
 * compressed message without `grpc-encoding`, a message over the method's bound (its header whole
 * or in two frames), a large event in many frames, an envelope cut short at the end, and bytes
 * that are not an event after a good one.
 */
import { gzipSync } from "node:zlib";
import http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import test from "ava";
import { UsageEventInputSchema } from "../../src/gen/billing/v1/usage_event_pb.js";
import { StreamUsageEventsResponseSchema } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { ok } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";

const PATH = "/billing.v1.UsageEventService/StreamUsageEvents";

function envelope(message: Uint8Array, flags = 0): Buffer {
  const b = Buffer.alloc(5 + message.length);
  b[0] = flags;
  b.writeUInt32BE(message.length, 1);
  b.set(message, 5);
  return b;
}

interface Answer {
  status: string | undefined;
  message: string;
  counts?: { received: number; accepted: number; duplicate: number; rejected: number };
}

/** One call: `pieces` written one by one, each in its own DATA frame. */
async function call(url: string, key: string, pieces: Buffer[], headers: Record<string, string>): Promise<Answer> {
  const session = http2.connect(url);
  try {
    const req = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers", "x-api-key": key, ...headers });
    let all: Record<string, unknown> = {};
    const data: Buffer[] = [];
    req.on("response", (h) => (all = { ...all, ...h }));
    req.on("trailers", (h) => (all = { ...all, ...h }));
    req.on("data", (c: Buffer) => data.push(c));
    const closed = new Promise((r) => req.on("close", r));
    req.on("error", () => {});
    for (const piece of pieces) {
      if (req.destroyed || req.closed) break;
      await new Promise<void>((r) => req.write(piece, () => r()));
    }
    if (!req.destroyed && !req.closed) req.end();
    await closed;
    const body = Buffer.concat(data);
    const out: Answer = { status: all["grpc-status"] as string | undefined, message: decodeURIComponent(String(all["grpc-message"] ?? "")) };
    if (out.status === "0" && body.length >= 5) {
      const r = fromBinary(StreamUsageEventsResponseSchema, body.subarray(5, 5 + body.readUInt32BE(1)));
      out.counts = { received: r.received, accepted: r.accepted, duplicate: r.duplicate, rejected: r.rejected };
    }
    return out;
  } finally {
    session.close();
  }
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a client stream answers on the lean path as connect-node answers it`, async (t) => {
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { external_id: "streamer" });
    await ok(server, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "count" } });
    const event = (k: string) =>
      toBinary(
        UsageEventInputSchema,
        create(UsageEventInputSchema, { idempotencyKey: k, subjectId: subject.id, eventName: "api", data: { n: "1" }, timestamp: timestampFromDate(new Date("2026-03-01T10:00:00Z")) }),
      );
    // Each case as [pieces, headers], built per path (`p`) so that the two do not share keys.
    const cases: [name: string, build: (p: string) => [Buffer[], Record<string, string>]][] = [
      [
        "envelopes split at every byte",
        (p) => {
          const bytes = Buffer.concat([envelope(event(`${p}-a`)), envelope(event(`${p}-b`)), envelope(event(`${p}-c`))]);
          return [[...bytes].map((b) => Buffer.from([b])), {}];
        },
      ],
      ["messages in gzip", (p) => [[envelope(gzipSync(event(`${p}-z1`)), 1), envelope(gzipSync(event(`${p}-z2`)), 1)], { "grpc-encoding": "gzip" }]],
      ["a compressed message without grpc-encoding", (p) => [[envelope(gzipSync(event(`${p}-x`)), 1)], {}]],
      [
        "a message over the method's bound",
        (p) => {
          const big = Buffer.alloc(5);
          big.writeUInt32BE(64 * 1024 * 1024, 1);
          return [[envelope(event(`${p}-ok`)), big, Buffer.alloc(100)], {}];
        },
      ],
      [
        "a message over the bound, its header in two frames",
        (p) => {
          const big = Buffer.alloc(5);
          big.writeUInt32BE(2 * 1024 * 1024, 1);
          return [[envelope(event(`${p}-ok4`)), big.subarray(0, 2), big.subarray(2), Buffer.alloc(100)], {}];
        },
      ],
      [
        "a large event in many frames",
        (p) => {
          const large = toBinary(
            UsageEventInputSchema,
            create(UsageEventInputSchema, { idempotencyKey: `${p}-large`, subjectId: subject.id, eventName: "api", data: { n: "1", note: "x".repeat(900) } }),
          );
          const bytes = envelope(large);
          return [Array.from({ length: Math.ceil(bytes.length / 7) }, (_, i) => bytes.subarray(i * 7, i * 7 + 7)), {}];
        },
      ],
      ["an envelope cut short at the end", (p) => [[envelope(event(`${p}-ok2`)), envelope(event(`${p}-cut`)).subarray(0, 12)], {}]],
      ["bytes that are not an event after a good one", (p) => [[envelope(event(`${p}-ok3`)), envelope(Buffer.from([0xff, 0xff, 0xff]))], {}]],
    ];
    for (const [name, build] of cases) {
      const [leanPieces, leanHeaders] = build("lean");
      const [connectPieces, connectHeaders] = build("connect");
      const lean = await call(server.url, key, leanPieces, leanHeaders);
      const viaConnect = await call(server.url, key, connectPieces, { ...connectHeaders, origin: "http://example.test" });
      t.deepEqual(lean, viaConnect, name);
      t.not(lean.status, undefined, `${name}: answered with a grpc-status`);
    }
    // The successful cases counted their events once each, on each path.
    const counted = await ok(server, key, "POST", "/usage-events/batch", {
      events: ["a", "b", "c", "z1", "z2", "large"]
        .flatMap((k) => [`lean-${k}`, `connect-${k}`])
        .map((k) => ({
          idempotency_key: k,
          subject_id: subject.id,
          event_name: "api",
          data: { n: "1" },
          timestamp: "2026-03-01T10:00:00Z",
        })),
    });
    t.is(counted.accepted, 0, "every event of the successful streams was stored");
  });
}
