/**
 * Connection timeouts on the shared port (issue 12): sockets that send nothing, half an HTTP/2
 * preface, headers one line at a time, or go idle are closed by the server; real calls on the
 * same port keep working. The server runs with short timeouts; each wait for a close is bounded
 * by ten times the timeout so the tests hold on a loaded machine, and asserts the close, not how
 * long it took.
 */
import http2 from "node:http2";
import net from "node:net";
import test from "ava";
import { loadConfig } from "../../src/config.js";
import { HealthService } from "../../src/gen/billing/v1/health_service_pb.js";
import { UsageEventService } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { listen } from "../../src/edge/listener.js";
import { rest, rpcClient } from "../helpers/clients.js";
import { type TestServer, startTestServer } from "../helpers/server.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

const PREFACE_MS = 400;
const HEADERS_MS = 400;
const REQUEST_MS = 2_000;
const IDLE_MS = 800;
const PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

let server: TestServer;
const opened = new Set<net.Socket | http2.ClientHttp2Session>();
test.before(async () => {
  server = await startTestServer("sqlite", {
    HTTP_PREFACE_TIMEOUT_MS: String(PREFACE_MS),
    HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_MS),
    HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_MS),
    HTTP_IDLE_TIMEOUT_MS: String(IDLE_MS),
  });
});
test.after.always(async () => {
  for (const s of opened) s.destroy();
  await server?.stop();
});

function connect(port = server.app.port, allowHalfOpen = false): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: "127.0.0.1", allowHalfOpen }, () => resolve(s));
    opened.add(s);
    s.on("error", reject);
  });
}

interface Outcome {
  /** Whether the server closed the connection within the bound. */
  closed: boolean;
  /** What the server sent before closing. */
  received: string;
}

/** Resolves when the server ends or closes the socket, or (closed: false) after `boundMs`. */
function closedWithin(socket: net.Socket, boundMs: number): Promise<Outcome> {
  let received = "";
  socket.on("data", (c: Buffer) => (received += c.toString("latin1")));
  socket.on("error", () => {}); // a reset is a close too
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ closed: false, received }), boundMs);
    const done = () => {
      clearTimeout(timer);
      resolve({ closed: true, received });
    };
    socket.once("end", done);
    socket.once("close", done);
  });
}

/** Writes `parts` one by one, `everyMs` apart, until the socket closes. */
function dribble(socket: net.Socket, parts: string[], everyMs: number): void {
  let i = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || socket.writableEnded || i >= parts.length) return clearInterval(timer);
    socket.write(parts[i++]!);
  }, everyMs);
  socket.once("close", () => clearInterval(timer));
}

/** Open TCP sockets of this process, both ends (the client sockets here and the server's). */
const tcpSockets = () => process.getActiveResourcesInfo().filter((r) => r === "TCPSocketWrap").length;

// Serial: ava runs it before the concurrent tests, so nothing else opens sockets meanwhile.
test.serial("every socket the server closes is destroyed: no descriptor is left behind", async (t) => {
  const baseline = tcpSockets();
  // Half-open clients: they never close their end, so only the server's destroy frees its end.
  const sockets = await Promise.all(Array.from({ length: 24 }, () => connect(undefined, true)));
  sockets.forEach((s, i) => {
    if (i % 4 === 1) s.write(PREFACE.slice(0, 10));
    if (i % 4 === 2) dribble(s, ["GET /ping HTTP/1.1\r\n", ...Array.from({ length: 100 }, () => "X: y\r\n")], 100);
    if (i % 4 === 3) s.write("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"); // then idle keep-alive
  });
  const sessions = Array.from({ length: 4 }, () => {
    const session = http2.connect(`http://127.0.0.1:${server.app.port}`);
    opened.add(session);
    session.on("error", () => {});
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 10 * IDLE_MS);
      session.once("close", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  });
  const outcomes = await Promise.all(sockets.map((s) => closedWithin(s, 10 * IDLE_MS)));
  t.true(
    outcomes.every((o) => o.closed),
    "the server closed every stalled or idle socket",
  );
  t.true((await Promise.all(sessions)).every(Boolean), "and every idle h2c session");
  // Only our half-open ends are left: the server destroyed its ends rather than half-closing them.
  // (A client still writing when the server closed got a reset: its end is gone as well.)
  const ours = () => sockets.filter((s) => !s.destroyed).length;
  for (let i = 0; i < 100 && tcpSockets() > baseline + ours(); i++) await new Promise((r) => setTimeout(r, 100));
  t.is(tcpSockets(), baseline + ours());
  for (const s of sockets) s.destroy();
  for (let i = 0; i < 100 && tcpSockets() > baseline; i++) await new Promise((r) => setTimeout(r, 100));
  t.is(tcpSockets(), baseline);
});

test("a socket that sends nothing is closed", async (t) => {
  const s = await connect();
  const r = await closedWithin(s, 10 * PREFACE_MS);
  t.true(r.closed);
  t.is(r.received, "");
});

test("a socket that sends half the HTTP/2 preface is closed", async (t) => {
  const s = await connect();
  s.write(PREFACE.slice(0, 12));
  const r = await closedWithin(s, 10 * PREFACE_MS);
  t.true(r.closed);
});

test("a socket that sends the preface a byte at a time, slower than the deadline, is closed", async (t) => {
  const s = await connect();
  // 24 bytes 100 ms apart: each byte well inside the deadline, the whole preface not.
  dribble(s, [...PREFACE], 100);
  const r = await closedWithin(s, 10 * PREFACE_MS);
  t.true(r.closed);
});

test("HTTP/1.1 headers sent a line at a time, slower than the header timeout, get 408 and a close", async (t) => {
  const s = await connect();
  s.write("GET /ping HTTP/1.1\r\nHost: x\r\n");
  // A line every 100 ms (far inside the idle timeout) that never ends the header block.
  dribble(
    s,
    Array.from({ length: 200 }, (_, i) => `X-Slow-${i}: y\r\n`),
    100,
  );
  const r = await closedWithin(s, 10 * HEADERS_MS + 1_000);
  t.true(r.closed);
  t.true(r.received === "" || r.received.startsWith("HTTP/1.1 408"), r.received);
});

test("an HTTP/1.1 body sent slower than the request timeout gets 408 and a close", async (t) => {
  const s = await connect();
  // With a valid key, so the body is read (a request without one may be refused before it is).
  s.write(`POST /subjects HTTP/1.1\r\nHost: x\r\nX-API-Key: ${server.keys.a}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`);
  dribble(
    s,
    Array.from({ length: 1000 }, () => " "),
    100,
  );
  const r = await closedWithin(s, 10 * REQUEST_MS);
  t.true(r.closed);
  t.true(r.received === "" || r.received.startsWith("HTTP/1.1 408"), r.received);
});

test("an idle HTTP/1.1 keep-alive connection is closed after its request", async (t) => {
  const s = await connect();
  const r = closedWithin(s, 10 * IDLE_MS);
  s.write("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  const { closed, received } = await r;
  t.true(closed);
  t.regex(received, /^HTTP\/1\.1 200 /, "the request itself was answered");
  t.regex(received, /\{"ok":true\}/);
});

test("an idle h2c session is closed (GOAWAY, then the connection)", async (t) => {
  const session = http2.connect(`http://127.0.0.1:${server.app.port}`);
  opened.add(session);
  session.on("error", () => {});
  let goaway = false;
  session.on("goaway", () => (goaway = true));
  const closed = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 10 * IDLE_MS);
    session.once("close", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  // One call first: the session is in use, then idle.
  const status = await new Promise<number>((resolve, reject) => {
    const req = session.request({ ":path": "/ping" });
    req.on("response", (h) => resolve(Number(h[":status"])));
    req.on("error", reject);
    req.resume();
    req.end();
  });
  t.is(status, 200);
  t.true(await closed, "the server closed the idle session");
  t.true(goaway, "with a GOAWAY");
});

test("a client stream that keeps sending outlives the idle timeout", async (t) => {
  const c = rpcClient(UsageEventService, server.url, "grpc", server.keys.a);
  const n = 12;
  async function* events() {
    for (let i = 0; i < n; i++) {
      // 12 × IDLE_MS / 4: three idle timeouts in all, never one without bytes.
      await new Promise((r) => setTimeout(r, IDLE_MS / 4));
      yield { idempotencyKey: `slow-${i}`, subjectId: "nobody", eventName: "api", data: { n: "1" }, timestamp: timestampFromDate(new Date("2026-03-02T00:00:00Z")) };
    }
  }
  const res = await c.streamUsageEvents(events());
  t.is(res.received, n);
});

test("real calls succeed while stalled sockets are held, and after they are closed", async (t) => {
  const stalled = await Promise.all(Array.from({ length: 30 }, () => connect()));
  stalled.forEach((s, i) => {
    if (i % 3 === 1) s.write(PREFACE.slice(0, 10));
    if (i % 3 === 2) s.write("GET /ping HTTP/1.1\r\n");
  });
  const outcomes = stalled.map((s) => closedWithin(s, 10 * Math.max(PREFACE_MS, HEADERS_MS) + 1_000));
  const calls = async () => {
    const r = await rest(server.url, "GET", "/healthz");
    t.is(r.status, 200);
    t.deepEqual(await rpcClient(HealthService, server.url, "grpc").ping({}), await rpcClient(HealthService, server.url, "connect").ping({}));
  };
  await calls();
  t.true(
    (await Promise.all(outcomes)).every((o) => o.closed),
    "every stalled socket was closed",
  );
  await calls();
});

test("over the connection cap, a new connection is closed at once; the cap frees as connections close", async (t) => {
  const config = loadConfig({ HTTP_MAX_CONNECTIONS: "2", HTTP_PREFACE_TIMEOUT_MS: "60000" });
  const l = await listen((_req, res) => res.end("ok"), 0, config.connections, "127.0.0.1");
  t.teardown(() => l.close(0));
  const a = await connect(l.port);
  const b = await connect(l.port);
  // The cap is counted at accept: give the server a moment to have accepted both.
  await new Promise((r) => setTimeout(r, 100));
  const c = await connect(l.port);
  t.true((await closedWithin(c, 5_000)).closed, "the third connection is refused");
  a.destroy();
  b.destroy();
  // The server sees the two closes a little later: until then a new connection may be refused.
  let r: Outcome = { closed: false, received: "" };
  for (let i = 0; i < 50 && !r.received; i++) {
    const d = await connect(l.port);
    const answered = closedWithin(d, 5_000);
    d.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    r = await answered;
    if (!r.received) await new Promise((res) => setTimeout(res, 100));
  }
  t.true(r.closed);
  t.regex(r.received, /^HTTP\/1\.1 200 [\s\S]*ok$/);
});

test("a request whose handler works longer than the idle timeout keeps its connection, on HTTP/1.1 and HTTP/2", async (t) => {
  // A test clock advanced over two centuries of monthly cycles on the embedded store takes
  // seconds, well past IDLE_MS, with no byte moving on the connection meanwhile.
  const { Scenario } = await import("../helpers/scenario.js");
  const { TestClockService } = await import("../../src/gen/billing/v1/test_clock_service_pb.js");
  const { timestampFromDate } = await import("@bufbuild/protobuf/wkt");
  for (const protocol of ["rest", "grpc"] as const) {
    const s = await Scenario.start(server, "2000-01-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null);
    const to = "2199-01-01T00:00:00Z";
    if (protocol === "rest") {
      const r = await rest(server.url, "POST", `/test-clocks/${s.clockId}/advance`, s.key, { frozen_time: to });
      t.is(r.status, 200, JSON.stringify(r.body));
    } else {
      const client = rpcClient(TestClockService, server.url, "grpc", s.key);
      const r = await client.advanceTestClock({ testClockId: s.clockId, frozenTime: timestampFromDate(new Date(to)) });
      t.is(r.testClock?.id, s.clockId);
    }
    const [sub] = await s.subscriptions();
    t.is(sub?.current_period.start, to, protocol);
  }
});
