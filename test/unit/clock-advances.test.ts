/**
 * Scheduler.finishAdvances: which stalled test clock advances it takes over, runs and sets ready,
 * and what a lease is (wiring/background.ts). The clock store is an in-memory stand-in; runDue is
 * recorded, not run (its own tests are the API tests).
 */
import test from "ava";
import type { StoredTestClock, TestClockStore } from "../../src/billing/subscriptions/ports.js";
import { Scheduler } from "../../src/billing/subscriptions/scheduler.js";
import type { BillingEngine } from "../../src/billing/subscriptions/engine.js";
import { advanceLeaseMs } from "../../src/wiring/background.js";

const at = (iso: string) => new Date(iso);
const NOW = at("2026-06-01T12:00:00Z");

function clock(id: string, frozen: string, status: "ready" | "advancing", startedAt: string | null): StoredTestClock {
  return { id, environmentId: "env_1", name: id, frozenTime: at(frozen), createdAt: at("2026-01-01T00:00:00Z"), status, advanceStartedAt: startedAt ? at(startedAt) : null };
}

/** Clocks in memory, with the SQL store's conditions. */
function memoryClocks(list: StoredTestClock[]): TestClockStore & { rows: Map<string, StoredTestClock> } {
  const rows = new Map(list.map((c) => [c.id, c]));
  return {
    rows,
    insert: async () => {},
    get: async (_env, id) => rows.get(id),
    list: async () => ({ items: [...rows.values()], hasMore: false }) as never,
    advance: async () => false,
    finish: async (_env, id, t) => {
      const c = rows.get(id);
      if (!c || c.frozenTime.getTime() !== t.getTime()) return false;
      c.status = "ready";
      return true;
    },
    stalled: async (before, limit) =>
      [...rows.values()]
        .filter((c) => c.status === "advancing" && c.advanceStartedAt !== null && c.advanceStartedAt <= before)
        .slice(0, limit)
        .map((c) => ({ ...c })),
    takeOver: async (_env, id, t, startedAt, now) => {
      const c = rows.get(id);
      if (c?.status !== "advancing" || c.frozenTime.getTime() !== t.getTime() || c.advanceStartedAt?.getTime() !== startedAt.getTime()) return false;
      c.advanceStartedAt = now;
      return true;
    },
  };
}

/** A scheduler whose runDue records its runs (and fails for the clocks named). */
function scheduler(clocks: TestClockStore, failing: string[] = []) {
  const runs: [string, string][] = [];
  // No subscription is left due after a run (runClockDue's check).
  const engine = { stores: { clocks, subscriptions: { due: async () => [] }, timelines: { due: async () => [] } }, now: () => NOW } as unknown as BillingEngine;
  const s = new (class extends Scheduler {
    override async runDue(now: Date, clockId: string | null): Promise<number> {
      runs.push([String(clockId), now.toISOString()]);
      if (clockId && failing.includes(clockId)) throw new Error("database down");
      return 0;
    }
  })(engine, undefined as never, undefined as never);
  return { s, runs };
}

test("an advance stalled past its lease is run up to the clock's time and set ready; one within its lease and a ready clock are left", async (t) => {
  const clocks = memoryClocks([
    clock("clk_old", "2026-03-01T00:00:00Z", "advancing", "2026-06-01T11:58:00Z"),
    clock("clk_recent", "2026-04-01T00:00:00Z", "advancing", "2026-06-01T11:59:30Z"),
    clock("clk_ready", "2026-05-01T00:00:00Z", "ready", "2026-06-01T10:00:00Z"),
  ]);
  const { s, runs } = scheduler(clocks);
  const done = await s.finishAdvances(NOW, 60_000);
  t.deepEqual(done, { finished: ["clk_old"], failed: [] });
  t.deepEqual(runs, [["clk_old", "2026-03-01T00:00:00.000Z"]]);
  t.is(clocks.rows.get("clk_old")?.status, "ready");
  t.is(clocks.rows.get("clk_recent")?.status, "advancing");
});

test("a run that fails leaves the clock advancing with its lease renewed: not taken again until that lease runs out", async (t) => {
  const clocks = memoryClocks([clock("clk_1", "2026-03-01T00:00:00Z", "advancing", "2026-06-01T11:00:00Z")]);
  const { s, runs } = scheduler(clocks, ["clk_1"]);
  const done = await s.finishAdvances(NOW, 60_000);
  t.deepEqual(done.finished, []);
  t.deepEqual(
    done.failed.map((f) => f.clockId),
    ["clk_1"],
  );
  t.like(clocks.rows.get("clk_1"), { status: "advancing", advanceStartedAt: NOW });
  t.deepEqual(await s.finishAdvances(new Date(NOW.getTime() + 30_000), 60_000), { finished: [], failed: [] });
  t.is(runs.length, 1);
});

test("an advance taken over by another runner meanwhile is not run twice; a clock moved meanwhile is not set ready", async (t) => {
  const clocks = memoryClocks([clock("clk_taken", "2026-03-01T00:00:00Z", "advancing", "2026-06-01T11:00:00Z"), clock("clk_moved", "2026-03-01T00:00:00Z", "advancing", "2026-06-01T11:00:00Z")]);
  const stalled = clocks.stalled.bind(clocks);
  clocks.stalled = async (before, limit) => {
    const list = await stalled(before, limit);
    (clocks.rows.get("clk_taken") as StoredTestClock).advanceStartedAt = at("2026-06-01T11:59:59Z");
    return list;
  };
  const finish = clocks.finish.bind(clocks);
  clocks.finish = async (env, id, t0) => {
    if (id === "clk_moved") (clocks.rows.get(id) as StoredTestClock).frozenTime = at("2026-04-01T00:00:00Z");
    return finish(env, id, t0);
  };
  const { s, runs } = scheduler(clocks);
  t.deepEqual(await s.finishAdvances(NOW, 60_000), { finished: [], failed: [] });
  t.deepEqual(
    runs.map(([id]) => id),
    ["clk_moved"],
  );
  t.is(clocks.rows.get("clk_moved")?.status, "advancing", "the later advance owns the clock");
});

test("the advance lease: 60 s, or 12 scheduler intervals when shorter, at least a second", (t) => {
  t.is(advanceLeaseMs(5_000), 60_000);
  t.is(advanceLeaseMs(100), 1_200);
  t.is(advanceLeaseMs(10), 1_000);
  t.is(advanceLeaseMs(3_600_000), 60_000);
});

/**
 * Scheduler.runClockDue over a scripted run: each step is one runDue (how long it takes, how many
 * cycles it closed) and then the earliest subscription still due ("" for none).
 */
async function runClockDue(steps: { ms: number; closed: number; next: string }[], waitMs: number): Promise<{ done: boolean; runs: number }> {
  let i = 0;
  const sub = (id: string) => ({ id, periodEnd: at("2026-05-01T00:00:00Z") });
  const due = async () => (steps[Math.min(i, steps.length) - 1]?.next ? [sub(steps[i - 1]?.next as string)] : []);
  const engine = { stores: { clocks: memoryClocks([]), subscriptions: { due }, timelines: { due: async () => [] } }, now: () => NOW } as unknown as BillingEngine;
  const s = new (class extends Scheduler {
    override async runDue(): Promise<number> {
      const step = steps[Math.min(i, steps.length - 1)] as { ms: number; closed: number };
      i++;
      await new Promise((r) => setTimeout(r, step.ms));
      return step.closed;
    }
  })(engine, undefined as never, undefined as never);
  return { done: await s.runClockDue(NOW, "clk_1", undefined, waitMs), runs: i };
}

test("an advance's wait for held subscriptions counts from the last progress, not from its start", async (t) => {
  // A long close (300 ms, past the 200 ms wait) leaves one subscription held; it is let go and closed next run.
  t.deepEqual(
    await runClockDue(
      [
        { ms: 300, closed: 40, next: "sub_held" },
        { ms: 0, closed: 1, next: "" },
      ],
      200,
    ),
    { done: true, runs: 2 },
  );
  // Another runner (the scheduler's takeover) closes them meanwhile: this run closes none, yet the due ones move on.
  t.deepEqual(
    await runClockDue(
      [
        { ms: 300, closed: 0, next: "sub_a" },
        { ms: 300, closed: 0, next: "sub_b" },
        { ms: 0, closed: 0, next: "" },
      ],
      200,
    ),
    { done: true, runs: 3 },
  );
  // Held with no progress at all: given up after the wait, the clock left advancing for the scheduler.
  const held = await runClockDue([{ ms: 0, closed: 0, next: "sub_held" }], 200);
  t.false(held.done);
  t.true(held.runs >= 2);
});
