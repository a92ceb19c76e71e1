/**
 * The benchmarks' lean gRPC client (bench/lean-grpc.ts) codes header fields with an HPACK dynamic
 * table, as gRPC's clients do. Its figures are only as good as its header blocks: here they are
 * decoded by decoders nobody here wrote, hpack.js's and node:http2's (nghttp2, which answers a
 * block it cannot decode with a COMPRESSION_ERROR for the whole connection), through the table's
 * evictions and a size the server lowers.
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import test from "ava";
import hpack from "hpack.js";
import { HpackEncoder, LeanGrpcConnection, envelope, unwrap } from "../../bench/lean-grpc.js";

const fieldsOf = (i: number): [string, string][] => [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", `/pkg.Service/Method${i % 37}`],
  [":authority", "127.0.0.1:1"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
  ["x-api-key", `key_${"k".repeat(i % 90)}`],
  [`x-extra-${i % 13}`, `v${i % 7}`],
];

for (const limit of [4096, 300, 0]) {
  test(`HpackEncoder: 2,000 blocks decode to their fields (${limit === 4096 ? "the table kept at 4096" : `the table lowered to ${limit} after 500`})`, (t) => {
    const encoder = new HpackEncoder();
    const decoder = hpack.decompressor.create({ table: { maxSize: 4096 } });
    const decode = (block: Buffer): [string, string][] => {
      decoder.write(block);
      decoder.execute();
      const got: [string, string][] = [];
      for (let h = decoder.read(); h !== null; h = decoder.read()) got.push([h.name, h.value]);
      return got;
    };
    const first = encoder.encode(fieldsOf(0));
    t.deepEqual(decode(first), fieldsOf(0));
    const repeat = encoder.encode(fieldsOf(0));
    t.deepEqual(decode(repeat), fieldsOf(0));
    for (let i = 1; i < 2000; i++) {
      if (i === 500) encoder.resize(limit);
      t.deepEqual(decode(encoder.encode(fieldsOf(i))), fieldsOf(i), `block ${i}`);
    }
    // The second call's block: one byte per field (all in the static or the dynamic table).
    t.is(repeat.length, fieldsOf(0).length, `the first block: ${first.length} bytes`);
  });
}

test("LeanGrpcConnection: node:http2 decodes every call's headers through evictions, and the client reads every answer", async (t) => {
  const server = http2.createServer({ settings: { headerTableSize: 512 } });
  const seen: string[] = [];
  server.on("stream", (stream, headers) => {
    seen.push(`${headers[":path"]} ${headers["x-api-key"]} ${headers.te}`);
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      stream.respond({ ":status": 200, "content-type": "application/grpc+proto", "x-request-id": `req_${seen.length}` }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "x-trailer": `t${seen.length}` }));
      stream.end(Buffer.concat(chunks)); // the request's envelope, echoed
    });
  });
  const sessionErrors: string[] = [];
  server.on("sessionError", (err) => sessionErrors.push(String(err)));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const conn = new LeanGrpcConnection((server.address() as AddressInfo).port);
  try {
    const want: string[] = [];
    for (let round = 0; round < 10; round++) {
      const calls = Array.from({ length: 20 }, (_, j) => {
        const i = round * 20 + j;
        const path = `/pkg.Service/Method${i % 23}`;
        const key = `key_${"k".repeat(i % 60)}`;
        want.push(`${path} ${key} trailers`);
        const message = Buffer.from(`message ${i}`);
        return conn.call(path, envelope(message), key).then((body) => t.is(unwrap(body).toString(), `message ${i}`));
      });
      await Promise.all(calls);
    }
    t.deepEqual(seen.sort(), want.sort());
    t.deepEqual(sessionErrors, []);
  } finally {
    conn.close();
    await new Promise((r) => setTimeout(r, 20));
    server.close();
  }
});
