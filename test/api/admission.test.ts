/**
 * What a request may cost before it is served (DESIGN §10): the key is checked from the headers
 * before the body is read, each method has a body bound, the server bounds requests and body
 * bytes in flight (503 with Retry-After, health exempt), and a usage stream of any length is
 * answered with bounded detail.
 */
import http2 from "node:http2";
import net from "node:net";
import test from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { UsageEventService } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { ok, reasonOf, rest, rpcClient } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { type TestServer, startTestServer, useServer } from "../helpers/server.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

const MiB = 1024 * 1024;

/** The google.rpc.ErrorInfo of a REST error body, as its readable `debug`. */
// biome-ignore lint: JSON error bodies are loosely typed in tests
const errorInfo = (body: any): { reason?: string; metadata?: Record<string, string> } | undefined => body?.details?.find((d: { type: string }) => d.type === "google.rpc.ErrorInfo")?.debug;

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * An HTTP/1.1 connection on which requests are written by hand, so that a test can send the
 * headers and only part of a body, and read the answer while the rest is still unsent.
 */
class Raw {
  readonly socket: net.Socket;
  private buf = Buffer.alloc(0);
  private waiter?: () => void;
  closed = false;
  constructor(port: number) {
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.on("data", (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      this.waiter?.();
    });
    this.socket.on("close", () => {
      this.closed = true;
      this.waiter?.();
    });
    this.socket.on("error", () => {});
  }

  send(method: string, path: string, headers: Record<string, string | number>, body: Buffer | string = ""): void {
    const lines = [`${method} ${path} HTTP/1.1`, "host: localhost", ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "", ""];
    this.socket.write(lines.join("\r\n"));
    if (body.length > 0) this.socket.write(body);
  }

  /** The next response on the connection (bodies with content-length only). */
  async response(): Promise<RawResponse> {
    for (;;) {
      const end = this.buf.indexOf("\r\n\r\n");
      if (end !== -1) {
        const [statusLine, ...lines] = this.buf.subarray(0, end).toString("latin1").split("\r\n");
        const headers: Record<string, string> = {};
        for (const l of lines) {
          const i = l.indexOf(":");
          headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
        }
        if (headers["transfer-encoding"] === "chunked") {
          // Kept with its chunk framing: the tests look for text in it.
          const last = this.buf.indexOf("\r\n0\r\n\r\n", end);
          if (last !== -1) {
            const body = this.buf.subarray(end + 4, last).toString("latin1");
            this.buf = this.buf.subarray(last + 7);
            return { status: Number(statusLine?.split(" ")[1]), headers, body };
          }
        }
        const length = Number(headers["content-length"] ?? 0);
        if (headers["transfer-encoding"] !== "chunked" && this.buf.length >= end + 4 + length) {
          const body = this.buf.subarray(end + 4, end + 4 + length).toString("utf8");
          this.buf = this.buf.subarray(end + 4 + length);
          return { status: Number(statusLine?.split(" ")[1]), headers, body };
        }
      }
      if (this.closed) throw new Error(`connection closed before a whole response: ${JSON.stringify(this.buf.toString("latin1").slice(0, 200))}`);
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  /** Resolves once the server has closed the connection. */
  async closedByServer(): Promise<void> {
    while (!this.closed) await new Promise<void>((r) => (this.waiter = r));
  }

  destroy(): void {
    this.socket.destroy();
  }
}

const portOf = (server: TestServer) => Number(new URL(server.url).port);

/** A usage event of about `bytes` bytes of JSON (data values of at most 1,000 characters). */
function event(subjectId: string, key: string, bytes: number) {
  const data: Record<string, string> = {};
  for (let i = 0; i * 1000 < bytes; i++) data[`k${i}`] = "x".repeat(Math.min(1000, bytes - i * 1000));
  return { idempotency_key: key, subject_id: subjectId, event_name: "api", data, timestamp: "2026-03-01T10:00:00Z" };
}

/** Waits until the server's billing_request_bytes_in_flight gauge satisfies `ok` (read from /metrics). */
async function bytesInFlight(url: string, ok: (n: number) => boolean): Promise<void> {
  for (;;) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const n = Number(/^billing_request_bytes_in_flight (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
    if (ok(n)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const store of STORES) {
  const server = useServer(store);

  for (const [api, path, contentType] of [
    ["rest", "/subjects", "application/json"],
    ["connect", "/billing.v1.SubjectService/CreateSubject", "application/json"],
    ["grpc-web", "/billing.v1.SubjectService/CreateSubject", "application/grpc-web+json"],
  ] as const) {
    test.serial(`${store} ${api}: a 5 MB body without a valid key is answered 401 after its first 64 KiB, the rest never sent; the connection is closed`, async (t) => {
      for (const key of [undefined, "sk_test_unknown0000000000000000", server.keys.aRevoked]) {
        const raw = new Raw(portOf(server));
        try {
          raw.send("POST", path, { "content-type": contentType, "content-length": 5 * MiB, ...(key ? { "x-api-key": key } : {}) }, Buffer.alloc(64 * 1024, "a"));
          const r = await raw.response();
          if (api === "grpc-web") {
            t.is(r.status, 200);
            t.true(r.body.includes(`grpc-status: ${Code.Unauthenticated}\r\n`), r.body);
          } else {
            t.is(r.status, 401, r.body);
            t.is(JSON.parse(r.body).code, "unauthenticated");
          }
          t.is(r.headers.connection, "close");
          await raw.closedByServer();
          t.pass();
        } finally {
          raw.destroy();
        }
      }
    });
  }

  test.serial(`${store}: a publishable key is refused (403) before the body is read, and reads billing state`, async (t) => {
    const raw = new Raw(portOf(server));
    try {
      raw.send("POST", "/subjects", { "content-type": "application/json", "content-length": 5 * MiB, "x-api-key": server.keys.aPublishable }, Buffer.alloc(64 * 1024, "a"));
      const r = await raw.response();
      t.is(r.status, 403);
      t.is(JSON.parse(r.body).code, "permission_denied");
    } finally {
      raw.destroy();
    }
    const subject = await ok(server, server.keys.a, "POST", "/subjects", {});
    const state = await rest(server.url, "GET", `/customer-access/${subject.id}/billing-state`, server.keys.aPublishable);
    t.is(state.status, 200, JSON.stringify(state.body));
  });

  test.serial(`${store}: a small body without a key is answered 401 and the connection stays open for the next request`, async (t) => {
    const raw = new Raw(portOf(server));
    try {
      const body = JSON.stringify({ name: "x".repeat(1000) });
      raw.send("POST", "/subjects", { "content-type": "application/json", "content-length": Buffer.byteLength(body) }, body);
      const first = await raw.response();
      t.is(first.status, 401);
      t.not(first.headers.connection, "close");
      raw.send("GET", "/subjects?limit=1", { "x-api-key": server.keys.a });
      t.is((await raw.response()).status, 200);
    } finally {
      raw.destroy();
    }
  });

  test.serial(`${store} grpc: a body without a valid key is answered unauthenticated on HTTP/2 before it is sent whole, and the stream is reset without error`, async (t) => {
    const session = http2.connect(server.url);
    try {
      const stream = session.request({ ":method": "POST", ":path": "/billing.v1.SubjectService/CreateSubject", "content-type": "application/grpc", te: "trailers" });
      // An envelope announcing 5 MB, then only its first 64 KiB.
      const head = Buffer.alloc(5);
      head.writeUInt32BE(5 * MiB, 1);
      stream.write(Buffer.concat([head, Buffer.alloc(64 * 1024, 1)]));
      let status: unknown;
      stream.once("response", (h) => (status ??= h["grpc-status"]));
      stream.once("trailers", (h) => (status ??= h["grpc-status"]));
      stream.resume();
      await new Promise((r) => stream.once("close", r));
      t.is(status, String(Code.Unauthenticated));
      t.is(stream.rstCode, http2.constants.NGHTTP2_NO_ERROR);
    } finally {
      session.destroy();
    }
  });

  test.serial(`${store}: bodies are bounded per method before they are read: 1 MiB for one event, less for a subject; a batch up to 5 MiB`, async (t) => {
    const subject = await ok(server, server.keys.a, "POST", "/subjects", {});
    // 1 MiB and a little more: over the bound of one event (1 MiB) and of a subject (256 KiB).
    const oneEvent = event(subject.id, "big-one", MiB + 1024);
    const r1 = await rest(server.url, "POST", "/usage-events", server.keys.a, oneEvent);
    t.is(r1.status, 413, JSON.stringify(r1.body));
    t.is(r1.body.code, "resource_exhausted");
    t.is(reasonOf(r1.body), "PAYLOAD_TOO_LARGE");
    // The ErrorInfo names the bound, on REST as on Connect and gRPC: 1 MiB for one event, 256 KiB for a subject.
    t.deepEqual(errorInfo(r1.body)?.metadata, { limit: String(MiB) });
    const r2 = await rest(server.url, "POST", "/subjects", server.keys.a, { name: "big", padding: "x".repeat(MiB) });
    t.is(r2.status, 413);
    t.deepEqual(errorInfo(r2.body), { reason: "PAYLOAD_TOO_LARGE", domain: "billing.v1", metadata: { limit: String(256 * 1024) } });
    // Connect and gRPC: resource_exhausted (429 on Connect's code table), whatever the length header says, with the same ErrorInfo.
    for (const protocol of ["connect", "grpc"] as const) {
      const c = rpcClient(SubjectService, server.url, protocol, server.keys.a);
      const err = ConnectError.from(await t.throwsAsync(c.createSubject({ name: "big", metadata: { a: "x".repeat(MiB) } })));
      t.is(err.code, Code.ResourceExhausted, protocol);
      const info = err.findDetails(ErrorInfoSchema)[0];
      t.deepEqual([info?.reason, info?.domain, info?.metadata], ["PAYLOAD_TOO_LARGE", "billing.v1", { limit: String(256 * 1024) }], protocol);
    }
    // Without a declared length (chunked): refused once the bound is passed.
    const chunked = await fetch(`${server.url}/subjects`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": server.keys.a },
      body: new ReadableStream({
        start(ctrl) {
          for (let i = 0; i < 8; i++) ctrl.enqueue(new TextEncoder().encode(i === 0 ? `{"name":"${"x".repeat(64 * 1024)}` : "x".repeat(64 * 1024)));
          ctrl.enqueue(new TextEncoder().encode('"}'));
          ctrl.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    t.is(chunked.status, 413);
    const chunkedBody = (await chunked.json()) as { code: string };
    t.is(chunkedBody.code, "resource_exhausted");
    t.deepEqual(errorInfo(chunkedBody)?.metadata, { limit: String(256 * 1024) });
    // The largest event the rules allow, every character escaped (\uXXXX): about 760 KB, under its bound.
    const data: Record<string, string> = {};
    for (let i = 0; i < 100; i++) data[`${String(i).padStart(3, "0")}${"語".repeat(252)}`] = "語".repeat(1000);
    const escaped = JSON.stringify({ ...event(subject.id, "largest", 0), data }).replace(/語/g, "\\u8a9e");
    t.true(escaped.length > 750_000, String(escaped.length));
    const largest = await rest(server.url, "POST", "/usage-events", server.keys.a, escaped);
    t.is(largest.status, 200, JSON.stringify(largest.body));
    // A batch of nearly 5 MiB is accepted.
    const events = Array.from({ length: 1000 }, (_, i) => event(subject.id, `bulk-${i}`, 4900));
    const body = JSON.stringify({ events });
    t.true(body.length > 4.8 * MiB && body.length < 5 * MiB, String(body.length));
    const batch = await ok(server, server.keys.a, "POST", "/usage-events/batch", body);
    t.is(batch.accepted, 1000);
  });

  test(`${store} grpc: a stream of 50,000 events for an unknown subject is answered with every count and the first 1,000 rejections`, async (t) => {
    const client = createClient(UsageEventService, createGrpcTransport({ baseUrl: server.url }));
    const N = 50_000;
    async function* events() {
      for (let i = 0; i < N; i++) {
        yield { idempotencyKey: `s-${i}`, subjectId: "subj_nobody_is_here", eventName: "api", data: { n: "1" }, timestamp: timestampFromDate(new Date("2026-03-01T10:00:00Z")) };
      }
    }
    const res = await client.streamUsageEvents(events(), { headers: { "x-api-key": server.keys.a } });
    t.is(res.received, N);
    t.is(res.rejected, N);
    t.is(res.accepted, 0);
    t.is(res.rejections.length, 1000);
    t.deepEqual(
      res.rejections.map((r) => Number(r.index)),
      Array.from({ length: 1000 }, (_, i) => i),
    );
    t.is(res.rejections[0]?.error?.code, "not_found");
  });
}

for (const store of STORES) {
  test(`${store}: over the bound on requests in flight: 503 with Retry-After at once on every protocol, health exempt, then recovery`, async (t) => {
    const server = await startTestServer(store, { MAX_REQUESTS_IN_FLIGHT: "2" });
    const held: Raw[] = [];
    try {
      // Two requests whose bodies are still coming hold the two places.
      for (let i = 0; i < 2; i++) {
        const raw = new Raw(portOf(server));
        raw.send("POST", "/subjects", { "content-type": "application/json", "content-length": 100, "x-api-key": server.keys.a }, '{"name":');
        held.push(raw);
      }
      // Wait until both are admitted (a third is refused).
      let r = await rest(server.url, "GET", "/subjects", server.keys.a);
      for (let i = 0; i < 50 && r.status !== 503; i++) {
        await new Promise((ok) => setTimeout(ok, 20));
        r = await rest(server.url, "GET", "/subjects", server.keys.a);
      }
      t.is(r.status, 503);
      t.is(r.body.code, "unavailable");
      t.is(r.headers.get("retry-after"), "1");
      t.is(reasonOf(r.body), "OVERLOADED");
      // Even without a key: refused before anything else is looked at.
      t.is((await rest(server.url, "POST", "/subjects", undefined, {})).status, 503);
      const connect = await fetch(`${server.url}/billing.v1.SubjectService/ListSubjects`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": server.keys.a }, body: "{}" });
      t.is(connect.status, 503);
      t.is(connect.headers.get("retry-after"), "1");
      const grpc = rpcClient(SubjectService, server.url, "grpc", server.keys.a);
      const err = ConnectError.from(await t.throwsAsync(grpc.listSubjects({})));
      t.is(err.code, Code.Unavailable);
      t.is(err.metadata.get("retry-after"), "1");
      // Health is exempt.
      t.is((await rest(server.url, "GET", "/healthz")).status, 200);
      t.is((await rest(server.url, "GET", "/ping")).status, 200);
      // The held requests finish; places free up.
      for (const raw of held) {
        raw.socket.write(`"held"}${" ".repeat(100 - '{"name":"held"}'.length)}`);
        t.is((await raw.response()).status, 200);
      }
      t.is((await rest(server.url, "GET", "/subjects", server.keys.a)).status, 200);
      t.is((await grpc.listSubjects({})).subjects.length, 2);
    } finally {
      for (const raw of held) raw.destroy();
      await server.stop();
    }
  });

  test(`${store}: over the bound on body bytes in flight: 503 with Retry-After, never queued; a closed connection frees its bytes`, async (t) => {
    const server = await startTestServer(store, { MAX_REQUEST_BYTES_IN_FLIGHT: String(5 * MiB) });
    const raw = new Raw(portOf(server));
    try {
      raw.send("POST", "/usage-events/batch", { "content-type": "application/json", "content-length": 5 * MiB, "x-api-key": server.keys.a }, '{"events":[');
      // Once the server has counted the stalled body's bytes (its gauge says so), the bound is full.
      await bytesInFlight(server.url, (n) => n >= 5 * MiB);
      const r = await rest(server.url, "POST", "/subjects", server.keys.a, {});
      t.is(r.status, 503);
      t.is(r.headers.get("retry-after"), "1");
      // A request without a body needs no bytes.
      t.is((await rest(server.url, "GET", "/subjects", server.keys.a)).status, 200);
      raw.destroy();
      await bytesInFlight(server.url, (n) => n === 0);
      const after = await rest(server.url, "POST", "/subjects", server.keys.a, {});
      t.is(after.status, 200);
    } finally {
      raw.destroy();
      await server.stop();
    }
  });
}
