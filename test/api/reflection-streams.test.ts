/**
 * gRPC server reflection needs no key, so it must not hold the API's admission slots (DESIGN §10):
 * key-less reflection streams are counted apart (MAX_REFLECTION_STREAMS; one more is UNAVAILABLE)
 * and each is reset after REFLECTION_STREAM_TIMEOUT_MS. With every API slot's worth of reflection
 * streams held open, a call with a key is still served; the held streams are cut, and reflection
 * then answers again.
 */
import http2 from "node:http2";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";

const store = STORES.includes("sqlite") ? "sqlite" : "mysql";
const server = useServer(store, { MAX_REQUESTS_IN_FLIGHT: "4", MAX_REFLECTION_STREAMS: "8", REFLECTION_STREAM_TIMEOUT_MS: "1500" });
const PATH = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

interface Held {
  status: Promise<{ grpcStatus: string | undefined; rstCode: number; data: number }>;
  stream: http2.ClientHttp2Stream;
}

/** A reflection stream opened and left open (nothing sent), or sent `message` and ended. */
function reflect(session: http2.ClientHttp2Session, message?: Uint8Array): Held {
  const stream = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers" });
  let grpcStatus: string | undefined;
  let data = 0;
  stream.on("response", (h) => {
    if (h["grpc-status"] !== undefined) grpcStatus = String(h["grpc-status"]);
  });
  stream.on("trailers", (h) => {
    grpcStatus = String(h["grpc-status"]);
  });
  stream.on("data", (c: Buffer) => {
    data += c.length;
  });
  stream.on("error", () => {});
  if (message) {
    const frame = Buffer.alloc(5 + message.length);
    frame.writeUInt32BE(message.length, 1);
    Buffer.from(message).copy(frame, 5);
    stream.end(frame);
  }
  const status = new Promise<{ grpcStatus: string | undefined; rstCode: number; data: number }>((resolve) => stream.on("close", () => resolve({ grpcStatus, rstCode: stream.rstCode ?? 0, data })));
  return { status, stream };
}

test(`${store}: key-less reflection streams hold no API slot, are bounded in number and time`, async (t) => {
  const session = http2.connect(server.url);
  session.on("error", () => {});
  try {
    const held = Array.from({ length: 8 }, () => reflect(session));
    await new Promise((r) => setTimeout(r, 300));
    // Past MAX_REFLECTION_STREAMS: refused at once, UNAVAILABLE.
    const extra = await reflect(session).status;
    t.is(extra.grpcStatus, "14");
    // Eight streams open, twice the API's four slots: a call with a key is served.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${server.url}/subjects?limit=1`, { headers: { "x-api-key": server.keys.a } });
      t.is(res.status, 200);
    }
    // Each held stream is reset after REFLECTION_STREAM_TIMEOUT_MS.
    const ends = await Promise.all(held.map((h) => h.status));
    t.deepEqual(
      ends.map((e) => e.rstCode),
      held.map(() => http2.constants.NGHTTP2_CANCEL),
    );
    // And reflection answers again: list_services (field 7, empty string).
    const listed = await reflect(session, Uint8Array.of(0x3a, 0x00)).status;
    t.is(listed.grpcStatus, "0");
    t.true(listed.data > 5);
  } finally {
    session.destroy();
  }
});
