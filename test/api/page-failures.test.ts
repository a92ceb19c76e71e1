/**
 * A hosted page that fails (src/pages/shell.ts servePages), through a real HTTP server on a port:
 * a failure that trying again can fix (the database out of reach, a write that lost a conflict
 * such as a deadlock or a Galera certification, a server stopping) answers 503 with Retry-After
 * and is logged as a warning; anything else answers 500 and is logged as an error. Neither shows
 * the error's text.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import test from "ava";
import { AbortedError, UnavailableError } from "../../src/billing/errors.js";
import { createLogger } from "../../src/log.js";
import { servePages } from "../../src/pages/shell.js";

async function answerOf(failure: unknown): Promise<{ status: number; retryAfter: string | null; body: string; logged: string }> {
  let logged = "";
  const log = createLogger("info", (line) => {
    logged += line;
  });
  const pages = servePages("/p/", () => Promise.reject(failure), log);
  const server = http.createServer((req, res) => {
    if (!pages(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/p/x`);
    return { status: res.status, retryAfter: res.headers.get("retry-after"), body: await res.text(), logged };
  } finally {
    server.close();
  }
}

const deadlock = Object.assign(new Error("Deadlock found when trying to get lock; try restarting transaction"), { errno: 1213, code: "ER_LOCK_DEADLOCK" });

const cases: [string, unknown, number, string][] = [
  ["a lost write conflict (AbortedError)", new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one; try again"), 503, "warn"],
  ["a server stopping (UnavailableError)", new UnavailableError("SERVER_STOPPING", "the server is stopping"), 503, "warn"],
  ["anything else", new Error("a bug"), 500, "error"],
];

for (const [name, failure, status, level] of cases) {
  test(`a page failing with ${name} answers ${status}`, async (t) => {
    const a = await answerOf(failure);
    t.is(a.status, status);
    t.is(a.retryAfter, status === 503 ? "1" : null);
    t.regex(a.body, /Try again in a moment/);
    t.notRegex(a.body, /conflicted|stopping|a bug/);
    t.regex(a.logged, new RegExp(`"level":"${level}"`));
  });
}

test("a driver's deadlock that reaches a page untranslated answers 503 too", async (t) => {
  const a = await answerOf(deadlock);
  t.is(a.status, 503);
  t.is(a.retryAfter, "1");
});
