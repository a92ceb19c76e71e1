/** Readiness's checks on their own (src/ops/health.ts): database, migrations, a stuck scheduler. */
import test from "ava";
import { progressLogger } from "../../src/wiring/progress.js";
import { createLogger } from "../../src/log.js";
import { MIN_STUCK_MS, Readiness, STUCK_INTERVALS, SchedulerWatch } from "../../src/ops/health.js";

const quiet = createLogger("error", () => {});

test("a scheduler with no sign of life for STUCK_INTERVALS intervals (at least MIN_STUCK_MS) is stuck; a sign of life clears it", (t) => {
  let now = 0;
  const watch = new SchedulerWatch(10_000, () => now);
  now = STUCK_INTERVALS * 10_000;
  t.is(watch.stuckFor(), undefined);
  now += 1;
  t.is(watch.stuckFor(), STUCK_INTERVALS * 10_000 + 1);
  watch.alive();
  t.is(watch.stuckFor(), undefined);
  // A short interval still allows MIN_STUCK_MS (a catch-up's batches are signs of life too).
  const fast = new SchedulerWatch(100, () => now);
  now += MIN_STUCK_MS;
  t.is(fast.stuckFor(), undefined);
  now += 1;
  t.is(fast.stuckFor(), MIN_STUCK_MS + 1);
});

test("ready only when the database answers, the migrations are applied and the scheduler is not stuck", async (t) => {
  let database = true;
  let applied = false;
  let asked = 0;
  let now = 0;
  const scheduler = new SchedulerWatch(1_000, () => now);
  const r = new Readiness({
    database: async () => database,
    migrationsApplied: async () => {
      asked++;
      return applied;
    },
    scheduler,
    timeoutMs: 50,
    log: quiet,
  });
  t.deepEqual(await r.check(), { ready: false, checks: { database: "ok", migrations: "pending", scheduler: "ok" } });
  applied = true;
  t.deepEqual(await r.check(), { ready: true, checks: { database: "ok", migrations: "ok", scheduler: "ok" } });
  t.deepEqual(await r.check(), { ready: true, checks: { database: "ok", migrations: "ok", scheduler: "ok" } });
  t.is(asked, 2, "once applied, the migrations are not asked about again");
  database = false;
  t.deepEqual((await r.check()).checks.database, "unavailable");
  database = true;
  now = MIN_STUCK_MS + 1;
  t.deepEqual(await r.check(), { ready: false, checks: { database: "ok", migrations: "ok", scheduler: "stuck" } });
  scheduler.alive();
  t.true(await r.ready());
});

test("a migrations check that does not answer in time is unknown (not ready), never a hang; no scheduler is 'off'", async (t) => {
  const r = new Readiness({ database: async () => true, migrationsApplied: () => new Promise(() => {}), scheduler: undefined, timeoutMs: 30, log: quiet });
  t.deepEqual(await r.check(), { ready: false, checks: { database: "ok", migrations: "unknown", scheduler: "off" } });
  const down = new Readiness({ database: async () => false, migrationsApplied: async () => true, scheduler: undefined, timeoutMs: 30, log: quiet });
  t.deepEqual(await down.check(), { ready: false, checks: { database: "unavailable", migrations: "unknown", scheduler: "off" } });
});

test("progress lines of a long scheduler run (done so far and rate, at most every 5 s, and its end); a short run logs nothing; real-time progress is a sign of life", (t) => {
  const lines: Record<string, unknown>[] = [];
  let alive = 0;
  const report = progressLogger(
    createLogger("info", (l) => lines.push(JSON.parse(l))),
    () => alive++,
  );
  const startedAt = Date.now() - 6_000;
  report({ clockId: "clk_1", closed: 120, startedAt, done: false });
  report({ clockId: "clk_1", closed: 130, startedAt, done: false });
  report({ clockId: "clk_1", closed: 200, startedAt, done: true });
  t.deepEqual(
    lines.map((l) => [l.msg, l.clock, l.closed]),
    [
      ["scheduler run in progress", "clk_1", 120],
      ["scheduler run finished", "clk_1", 200],
    ],
  );
  t.true((lines[0]?.per_s as number) > 15 && (lines[0]?.per_s as number) < 25);
  t.is(alive, 0, "a test clock's run says nothing of the real-time scheduler");
  report({ clockId: null, closed: 3, startedAt: Date.now(), done: false });
  report({ clockId: null, closed: 3, startedAt: Date.now(), done: true });
  t.is(lines.length, 2, "a short run logs nothing");
  t.is(alive, 2);
});
