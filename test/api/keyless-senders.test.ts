/**
 * Callers without a key or session cannot take the API down (DESIGN §10, README "Request bounds
 * and admission control"): forms POSTed to the dashboard's sign-in and to hosted pages are read
 * whole, within FORM_BODY_TIMEOUT_MS and their own count, before the request takes one of the
 * API's admission slots. Hundreds of slow senders (HTTP/2 streams and HTTP/1.1 sockets, one byte
 * a second, many more than MAX_REQUESTS_IN_FLIGHT) leave a keyed API call answered, and are cut
 * (408, or 503 past MAX_FORM_BODIES_IN_FLIGHT) before their bodies are done. Failed sign-ins are
 * throttled per client address and per server (429 with Retry-After).
 */
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import test from "ava";
import { SIGN_IN_GLOBAL, SIGN_IN_PER_ADDRESS } from "../../src/pages/dashboard/sign-in-throttle.js";
import { rest } from "../helpers/clients.js";
import { useServer } from "../helpers/server.js";

// Where the bodies are read does not depend on the store.
const server = useServer("sqlite", { MAX_REQUESTS_IN_FLIGHT: "16", FORM_BODY_TIMEOUT_MS: "5000" });

/** A slow sender's declared body: at a byte a second it would take this many seconds to finish. */
const BODY = 1_000;
const FORM = { "content-type": "application/x-www-form-urlencoded", "content-length": String(BODY) };
const SIGN_IN = "/dashboard/sign-in";
const HOSTED_FORM = "/hosted/checkout/0123456789abcdefABCDEF/cancel";

interface Slow {
  /** The answer's status (0: the stream was reset or the socket closed without one). */
  status?: number;
  sent: number;
  done: boolean;
  send(): void;
  stop(): void;
}

function slowStream(session: http2.ClientHttp2Session, path: string): Slow {
  const stream = session.request({ ":method": "POST", ":path": path, ...FORM }, { endStream: false });
  const s: Slow = {
    sent: 0,
    done: false,
    send() {
      if (s.done || stream.destroyed || s.sent >= BODY) return;
      stream.write("a");
      s.sent++;
    },
    stop: () => stream.destroy(),
  };
  stream.on("response", (h) => {
    s.status = Number(h[":status"]);
  });
  stream.on("error", () => {});
  stream.on("close", () => {
    s.status ??= 0;
    s.done = true;
  });
  stream.resume();
  return s;
}

function slowSocket(port: number, path: string): Slow {
  const socket = net.connect(port, "127.0.0.1");
  socket.write(
    `POST ${path} HTTP/1.1\r\nhost: localhost\r\n${Object.entries(FORM)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("")}\r\n`,
  );
  let head = "";
  const s: Slow = {
    sent: 0,
    done: false,
    send() {
      if (s.done || s.sent >= BODY) return;
      socket.write("a");
      s.sent++;
    },
    stop: () => socket.destroy(),
  };
  socket.on("data", (c: Buffer) => {
    head += c.toString("latin1");
    const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
    if (m) s.status ??= Number(m[1]);
  });
  socket.on("error", () => {});
  socket.on("close", () => {
    s.status ??= 0;
    s.done = true;
  });
  return s;
}

test.serial("300 slow HTTP/2 streams and 256 slow HTTP/1.1 sockets without a key hold no API slot; each is cut before its body is done", async (t) => {
  const port = server.app.port;
  const sessions = Array.from({ length: 4 }, () => http2.connect(server.url));
  for (const s of sessions) s.on("error", () => {});
  const slow: Slow[] = [];
  for (const [i, session] of sessions.entries()) for (let j = 0; j < 75; j++) slow.push(slowStream(session, (i + j) % 2 === 0 ? SIGN_IN : HOSTED_FORM));
  for (let i = 0; i < 256; i++) slow.push(slowSocket(port, i % 2 === 0 ? SIGN_IN : HOSTED_FORM));
  // One byte a second from each, until it is cut (or for at most 60 s: without the bound the test
  // fails rather than hangs).
  for (const s of slow) s.send();
  const drip = setInterval(() => {
    for (const s of slow) s.send();
  }, 1_000);
  const giveUp = setTimeout(() => {
    for (const s of slow) s.stop();
  }, 60_000);
  try {
    // Probes with a valid key while the slow senders are still sending: each is answered 200, and
    // each time more senders are still open than the server has admission slots.
    await new Promise((r) => setTimeout(r, 500));
    const probes: [number, number][] = [];
    for (let i = 0; i < 6; i++) {
      const open = slow.filter((s) => !s.done && s.status === undefined).length;
      const res = await rest(server.url, "GET", "/subjects?limit=1", server.keys.a);
      probes.push([res.status, open]);
      await new Promise((r) => setTimeout(r, 250));
    }
    t.deepEqual(
      probes.map(([status]) => status),
      probes.map(() => 200),
      `probes answered (status, slow senders still open): ${JSON.stringify(probes)}`,
    );
    t.true(
      probes.every(([, open]) => open > 16),
      `more slow senders than admission slots were open at each probe: ${JSON.stringify(probes)}`,
    );
    // Every slow sender is cut: 408 at the deadline, or 503 at once past MAX_FORM_BODIES_IN_FLIGHT
    // (256), before it sent its whole body.
    while (slow.some((s) => !s.done && s.status === undefined)) await new Promise((r) => setTimeout(r, 200));
    const statuses = new Map<number, number>();
    for (const s of slow) statuses.set(s.status ?? -1, (statuses.get(s.status ?? -1) ?? 0) + 1);
    t.deepEqual(
      [...statuses.keys()].filter((k) => k !== 408 && k !== 503),
      [],
      `answers: ${JSON.stringify([...statuses])}`,
    );
    t.true((statuses.get(408) ?? 0) > 16, `cut at the deadline: ${JSON.stringify([...statuses])}`);
    t.true(
      slow.every((s) => s.sent < BODY),
      "no slow sender finished its body",
    );
    t.is((await rest(server.url, "GET", "/subjects?limit=1", server.keys.a)).status, 200);
  } finally {
    clearInterval(drip);
    clearTimeout(giveUp);
    for (const s of slow) s.stop();
    for (const s of sessions) s.destroy();
  }
});

/** A sign-in form: its CSRF token and cookie (one GET), then POSTs of keys from `localAddress`. */
async function signInForm(localAddress?: string) {
  const form = await fetch(`${server.url}${SIGN_IN}`);
  const cookie = (form.headers.getSetCookie()[0] ?? "").split(";")[0] as string;
  const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? "";
  return (apiKey: string) =>
    new Promise<{ status: number; retryAfter: string | undefined }>((resolve, reject) => {
      const body = new URLSearchParams({ csrf, api_key: apiKey }).toString();
      const req = http.request(
        `${server.url}${SIGN_IN}`,
        { method: "POST", localAddress, headers: { cookie, "content-type": "application/x-www-form-urlencoded", "content-length": Buffer.byteLength(body) } },
        (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] }));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
}

test.serial("failed sign-ins are throttled per client address (429, Retry-After, no key looked at); a correct key works once it lifts", async (t) => {
  const post = await signInForm("127.0.0.1");
  for (let i = 0; i < SIGN_IN_PER_ADDRESS.burst; i++) t.is((await post(`sk_test_wrong${i}`)).status, 401);
  const refused = await post("sk_test_wrongagain");
  t.is(refused.status, 429);
  const wait = Number(refused.retryAfter);
  t.true(Number.isInteger(wait) && wait >= 1, `Retry-After: ${refused.retryAfter}`);
  t.is((await post(server.keys.a)).status, 429, "while throttled even the right key is not looked at");
  // Another address is not held by this one's bucket.
  t.is((await (await signInForm("127.0.0.2"))("sk_test_other")).status, 401);
  await new Promise((r) => setTimeout(r, wait * 1000 + 100));
  t.is((await post(server.keys.a)).status, 303, "the right key signs in once the throttle lifts");
});

test.serial("failed sign-ins are throttled for the whole server too: an address under its own bound is refused once the server's bucket is empty", async (t) => {
  // Each address may fail SIGN_IN_PER_ADDRESS.burst times; enough addresses empty the server's
  // bucket, and then an address that has failed fewer times than its own bound is refused.
  let refused: { address: string; failedBefore: number; retryAfter: string | undefined } | undefined;
  for (let a = 10; !refused && a < 250; a++) {
    const address = `127.0.1.${a}`;
    const post = await signInForm(address);
    for (let i = 0; i < SIGN_IN_PER_ADDRESS.burst; i++) {
      const r = await post(`sk_test_guess${a}x${i}`);
      if (r.status === 429) {
        refused = { address, failedBefore: i, retryAfter: r.retryAfter };
        break;
      }
      t.is(r.status, 401);
    }
  }
  t.truthy(refused, "the server's bucket ran out");
  t.true((refused?.failedBefore ?? Number.POSITIVE_INFINITY) < SIGN_IN_PER_ADDRESS.burst, JSON.stringify(refused));
  t.truthy(refused?.retryAfter);
  t.true(SIGN_IN_GLOBAL.burst > SIGN_IN_PER_ADDRESS.burst);
});
