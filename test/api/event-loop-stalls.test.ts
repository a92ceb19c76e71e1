/**
 * No single request holds the server's event loop (issue 12, DESIGN §10): while the server works
 * through a long request, an event-loop monitor in the process the server runs in (longestStall:
 * a gap between a 10 ms timer's runs, counted only as far as the process used CPU in it) must
 * never see the loop held for 100 ms or more. The cases are the
 * ones that froze the whole server on the embedded store, where every query runs synchronously:
 * - a test clock advanced over decades of monthly cycles;
 * - a timeline started at the earliest instant the API accepts (2000-01-01), on real time, so
 *   that the scheduler closes a quarter-century of cycles while the client polls;
 * - 32 clients at once posting 1,000-event batches (~1 MB each), each retried after its
 *   Retry-After until acknowledged, and every event stored exactly once.
 * This is a correctness bound, not a speed figure: a loop held for 100 ms means every other
 * client (health checks included) waited that long. Each case is tried up to three times (see
 * withinBound): a busy machine can pause the whole process once; code that holds the loop holds
 * it every time.
 */
import http from "node:http";
import { PerformanceObserver, performance } from "node:perf_hooks";
import test, { type ExecutionContext } from "ava";
import { rest } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

const BOUND_MS = 100;

/**
 * Runs `work` under an event-loop monitor: a timer every TICK_MS measures each gap between its
 * runs in wall time and in this process's CPU time. The loop was *held* for what both saw: a gap
 * of 180 ms in which the process ran for 40 ms is the machine (another test file, MariaDB, the
 * kernel) pausing the process, not code holding the loop; code that holds the loop for 180 ms
 * burns those 180 ms of CPU. Returns the longest hold in ms; the longest wall-clock delay and the
 * longest garbage-collection pause are kept for the failure message.
 */
const TICK_MS = 10;
async function longestStall(work: () => Promise<void>): Promise<number> {
  let gc = 0;
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gc = Math.max(gc, e.duration);
  });
  observer.observe({ entryTypes: ["gc"] });
  let held = 0;
  let wallMax = 0;
  let lastWall = performance.now();
  let lastCpu = process.cpuUsage();
  const timer = setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage(lastCpu);
    const wall = now - lastWall - TICK_MS;
    wallMax = Math.max(wallMax, wall);
    held = Math.max(held, Math.min(wall, (cpu.user + cpu.system) / 1000 - TICK_MS));
    lastWall = now;
    lastCpu = process.cpuUsage();
  }, TICK_MS);
  try {
    await work();
  } finally {
    clearInterval(timer);
    observer.disconnect();
  }
  lastGcMs = gc;
  lastWallMs = wallMax;
  return held;
}
/** The longest garbage-collection pause and wall-clock delay of the last longestStall, in ms (for the failure message). */
let lastGcMs = 0;
let lastWallMs = 0;

/**
 * Runs `attempt` (a whole case: its own server, its own data, its own correctness checks; it
 * returns the longest delay) until the delay is under the bound, at most ATTEMPTS times. Code that
 * holds the loop does so every time; one attempt over the bound can also be the machine (another
 * test file on the other core, MariaDB), which pauses this process without any code holding it.
 */
const ATTEMPTS = 3;
async function withinBound(t: ExecutionContext, attempt: () => Promise<number>): Promise<void> {
  const seen: string[] = [];
  let stall = Number.POSITIVE_INFINITY;
  for (let i = 0; i < ATTEMPTS && !(stall < BOUND_MS); i++) {
    stall = await attempt();
    seen.push(`${stall.toFixed(1)} ms held (longest wall-clock delay ${lastWallMs.toFixed(1)} ms, GC pause ${lastGcMs.toFixed(1)} ms)`);
  }
  t.log(`longest event-loop hold, per attempt: ${seen.join("; ")}`);
  t.true(stall < BOUND_MS, `the event loop was held for at least ${BOUND_MS} ms in every attempt: ${seen.join("; ")}`);
}

const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };
const seats = { fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] };

for (const store of STORES) {
  // MariaDB's queries are asynchronous, so fewer cycles show the same there (and take far longer).
  const years = store === "sqlite" ? 60 : 10;

  test.serial(`${store}: a test clock advanced over ${years} years of monthly cycles never holds the event loop ${BOUND_MS} ms`, async (t) => {
    await withinBound(t, async () => {
      const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
      try {
        const s = await Scenario.start(server, "2000-01-01T00:00:00Z");
        const card = await s.card(seats);
        await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null);
        const until = `${2000 + years}-01-01T00:00:00Z`;
        const stall = await longestStall(() => s.advance(until));
        const [sub] = await s.subscriptions();
        t.is(sub?.current_period.start, until, "every cycle up to the new time was closed");
        return stall;
      } finally {
        await server.stop();
      }
    });
  });

  test.serial(`${store}: a timeline started in 2000 on real time is caught up by the scheduler without holding the event loop ${BOUND_MS} ms`, async (t) => {
    await withinBound(t, async () => {
      const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "100" });
      try {
        const s = new Scenario(server);
        s.key = await server.freshKey("test");
        s.subjectId = (await s.call("POST", "/subjects", { name: "Since 2000" })).id;
        const card = await s.card(seats);
        const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
        await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
          items: [{ period: { start: "2000-01-01T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } }],
        });
        let started: string | undefined;
        let caughtUp = false;
        const stall = await longestStall(async () => {
          const r = await s.call("POST", `/subscription-timelines/${tl.id}/start`, { ...callbacks, effective_at: "2000-01-01T00:00:00Z" });
          started = r.result.result_type;
          // The scheduler closes every cycle since 2000, a step at a time, while requests go on.
          for (let i = 0; i < 1200 && !caughtUp; i++) {
            const [sub] = await s.subscriptions();
            caughtUp = sub !== undefined && new Date(sub.current_period.end).getTime() > Date.now();
            if (!caughtUp) await new Promise((r) => setTimeout(r, 100));
          }
        });
        t.is(started, "success");
        t.true(caughtUp, "the subscription's current period ends after now");
        t.is((await s.invoices()).length, 100, "a full page of the quarter-century of monthly invoices");
        return stall;
      } finally {
        await server.stop();
      }
    });
  });

  // On the embedded store each statement runs synchronously: the ingest transaction lets the loop
  // turn between its 100-row INSERTs (sql.ts), and the COMMIT's fsync and the WAL checkpoints run
  // off the loop (src/db/sqlite-offloop.ts); before that a COMMIT alone held it 20-110 ms.
  test.serial(`${store}: 32 clients posting 1,000-event batches at once never hold the event loop ${BOUND_MS} ms; each event stored once`, async (t) => {
    await withinBound(t, async () => {
      const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
      try {
        const s = new Scenario(server);
        s.key = await server.freshKey("test");
        s.subjectId = (await s.call("POST", "/subjects", { name: "Heavy user", external_id: "heavy" })).id;
        await s.metric({ aggregation_type: "sum", value_field: "n" });
        const pad = "p".repeat(1000);
        // Encoded beforehand, and sent with a plain HTTP client: the clients share the server's
        // process (and its event loop), so they must cost it as little as possible.
        const bodies = Array.from({ length: 32 }, (_, b) =>
          Buffer.from(
            JSON.stringify({
              events: Array.from({ length: 1000 }, (_, i) => ({
                idempotency_key: `b${b}-${i}`,
                subject_id: "heavy",
                event_name: "usage",
                timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
                data: { n: "1", pad },
              })),
            }),
          ),
        );
        const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
        t.teardown(() => agent.destroy());
        const target = new URL(server.url);
        const post = (body: Buffer) =>
          new Promise<{ status: number; retryAfter: string | undefined; text: string }>((resolve, reject) => {
            const req = http.request(
              {
                host: target.hostname,
                port: target.port,
                path: "/usage-events/batch",
                method: "POST",
                agent,
                headers: { "content-type": "application/json", "x-api-key": s.key, "content-length": body.length },
              },
              (res) => {
                const parts: Buffer[] = [];
                res.on("data", (c: Buffer) => parts.push(c));
                res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] as string | undefined, text: Buffer.concat(parts).toString() }));
              },
            );
            req.on("error", reject);
            req.end(body);
          });
        const refusals: string[] = [];
        const send = async (body: Buffer): Promise<number> => {
          for (;;) {
            const r = await post(body);
            if (r.status === 200) return (JSON.parse(r.text) as { accepted: number }).accepted;
            refusals.push(`${r.status} ${r.retryAfter}`);
            if (r.status !== 503 || r.retryAfter === undefined) throw new Error(`batch answered ${r.status}: ${r.text}`);
            await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 100));
          }
        };
        let accepted = 0;
        const stall = await longestStall(async () => {
          accepted = (await Promise.all(bodies.map(send))).reduce((a, b) => a + b, 0);
        });
        t.is(accepted, 32_000);
        t.true(
          refusals.every((r) => r === "503 1"),
          `refusals: ${[...new Set(refusals)].join(", ")}`,
        );
        const summary = await rest(server.url, "GET", `/subjects/${s.subjectId}`, s.key);
        t.is(summary.status, 200);
        const stored = await withDatabase(server.db.url, async (db) => (await db.dataSource.query("SELECT COUNT(*) AS n, COUNT(DISTINCT idempotency_key) AS k FROM usage_events"))[0]);
        t.deepEqual([Number(stored.n), Number(stored.k)], [32_000, 32_000]);
        return stall;
      } finally {
        await server.stop();
      }
    });
  });
}
