/**
 * The unique_count meter (src/billing/metering/unique-meter.ts) on MariaDB and SQLite: a period's
 * distinct values kept and brought up to date with only the events stored since, checked after
 * every step against a distinct count over the events written (by hand) and against a fresh
 * meter (a full count): late events, the period's edges to the millisecond, one value twice
 * between reads, two subjects, groupings, an event committed below the kept sequence number, an
 * environment too far ahead, sets too large to keep.
 */
import test from "ava";
import type { PricingMetric } from "../../src/billing/catalog/types.js";
import { contributionsOf, mergeContributions } from "../../src/billing/metering/events.js";
import type { Range } from "../../src/billing/metering/periods.js";
import { mergeMarks, valueMarksOf } from "../../src/billing/metering/unique.js";
import { type MeterPath, UNIQUE_METER_LIMITS, UniqueMeter, type UniqueMeterLimits } from "../../src/billing/metering/unique-meter.js";
import { SummaryService } from "../../src/billing/metering/usage.js";
import { dbTimeOfMs } from "../../src/db/raw.js";
import { markStatements } from "../../src/db/stores/unique-sql.js";
import { rollupStatements } from "../../src/db/stores/usage-sql.js";
import { SqlUsageStore } from "../../src/db/stores/usage-store.js";
import { STORES, withMigratedDatabase } from "../helpers/db.js";

const ENV = "env_meter";
const metric: PricingMetric = {
  id: "pm_meter",
  environmentId: ENV,
  eventName: "visit",
  name: "",
  unit: "",
  dimensions: ["region"],
  aggregation: { type: "unique_count", valueField: "user" },
  createdAt: new Date(0),
  archivedAt: null,
};
const at = (iso: string) => Date.parse(iso);
const JAN: Range = { start: at("2026-01-15T00:00:00Z"), end: at("2026-02-15T00:00:00Z"), inclusiveStart: true, inclusiveEnd: false };
/** A period starting and ending mid-minute (its first minute's totals less the events before it). */
const MID: Range = { start: at("2026-01-15T00:00:30.500Z"), end: at("2026-02-14T12:00:00.250Z"), inclusiveStart: true, inclusiveEnd: false };
/** A period within one UTC day (read from the raw events). */
const DAY_RANGE: Range = { start: at("2026-01-20T06:00:00Z"), end: at("2026-01-20T18:00:00Z"), inclusiveStart: true, inclusiveEnd: false };

/** One event: [subject, instant, user (or none), region]; `seq` forces its sequence number. */
type Ev = { subject: string; at: string; user?: string; region?: string; seq?: number };

interface Step {
  note: string;
  events: Ev[];
  /** How the kept meter answers the first read after the step (of subject s1, JAN, all). */
  path?: "kept" | "added" | "counted";
}

let keys = 0;

async function world(store: (typeof STORES)[number], fn: (w: { write: (list: Ev[]) => Promise<void>; written: Ev[]; meter: (limits?: UniqueMeterLimits) => UniqueMeter }) => Promise<void>) {
  await withMigratedDatabase(store, async (db) => {
    const usage = new SqlUsageStore(db.sql, db.entities);
    const summaries = new SummaryService(usage, undefined as never, undefined as never);
    const written: Ev[] = [];
    const write = async (list: Ev[]) => {
      for (const e of list) {
        const data: Record<string, string> = { region: e.region ?? "eu", ...(e.user === undefined ? {} : { user: e.user }) };
        const occurredAt = at(e.at);
        const key = `k${keys++}`;
        const ev = { eventName: "visit", data, occurredAt, idempotencyKey: key };
        const columns = "id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at";
        const values = [`ue_${key}`, ENV, key, "f".repeat(64), e.subject, "visit", dbTimeOfMs(occurredAt), JSON.stringify(data), dbTimeOfMs(Date.now())];
        if (e.seq === undefined) await db.dataSource.query(`INSERT INTO usage_events (${columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, values);
        else await db.dataSource.query(`INSERT INTO usage_events (seq, ${columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [e.seq, ...values]);
        for (const [sql, params] of rollupStatements(db.dialect, mergeContributions(contributionsOf([metric], e.subject, ev)))) await db.dataSource.query(sql, [...params]);
        for (const [sql, params] of markStatements(db.dialect, mergeMarks(valueMarksOf([metric], e.subject, ev)))) await db.dataSource.query(sql, [...params]);
        written.push(e);
      }
    };
    await fn({ write, written, meter: (limits = UNIQUE_METER_LIMITS) => new UniqueMeter(usage, (m, s, r) => summaries.eventsWithValue(m, s, r), limits) });
  });
}

/** The distinct users per region (or over all) of `subject`'s written events in `r`, by hand. */
function expected(written: readonly Ev[], subject: string, r: Range, byRegion: boolean): [string, number][] {
  const sets = new Map<string, Set<string>>();
  for (const e of written) {
    const t = at(e.at);
    if (e.subject !== subject || e.user === undefined || t < r.start || t >= r.end) continue;
    const key = byRegion ? (e.region ?? "eu") : "";
    sets.set(key, (sets.get(key) ?? new Set()).add(e.user));
  }
  return [...sets.entries()].map(([k, s]) => [k, s.size] as [string, number]).sort();
}

async function read(meter: UniqueMeter, subject: string, r: Range, byRegion: boolean): Promise<[string, number][]> {
  const groups = await meter.measure(metric, subject, r, byRegion ? ["region"] : []);
  return groups.map((g) => [g.coordinates.region ?? "", g.count] as [string, number]).sort();
}

const STEPS: Step[] = [
  { note: "no events", events: [], path: "counted" },
  {
    note: "first events, a value twice, one without the field, one before the period",
    events: [
      { subject: "s1", at: "2026-01-20T00:00:00Z", user: "ann" },
      { subject: "s1", at: "2026-01-20T12:00:00Z", user: "ann" },
      { subject: "s1", at: "2026-01-21T00:00:00Z", user: "bob", region: "us" },
      { subject: "s1", at: "2026-01-22T00:00:00Z" },
      { subject: "s1", at: "2026-01-14T23:59:59.999Z", user: "early" },
    ],
    path: "added",
  },
  { note: "nothing new: the kept values", events: [], path: "kept" },
  {
    note: "the period's edges: its first millisecond counts, its end does not",
    events: [
      { subject: "s1", at: "2026-01-15T00:00:00Z", user: "first" },
      { subject: "s1", at: "2026-02-14T23:59:59.999Z", user: "last" },
      { subject: "s1", at: "2026-02-15T00:00:00Z", user: "after" },
    ],
    path: "added",
  },
  {
    note: "the same new value twice between reads, and a seen one",
    events: [
      { subject: "s1", at: "2026-02-01T00:00:00Z", user: "cat", region: "us" },
      { subject: "s1", at: "2026-02-02T00:00:00Z", user: "cat", region: "us" },
      { subject: "s1", at: "2026-02-03T00:00:00Z", user: "ann", region: "us" },
    ],
    path: "added",
  },
  {
    note: "late events (occurred days ago, stored now): a seen value, a new one",
    events: [
      { subject: "s1", at: "2026-01-16T03:00:00Z", user: "bob" },
      { subject: "s1", at: "2026-01-16T04:00:00Z", user: "dan" },
    ],
    path: "added",
  },
  {
    note: "another subject's events change nothing here",
    events: [
      { subject: "s2", at: "2026-01-20T00:00:00Z", user: "ann" },
      { subject: "s2", at: "2026-01-25T00:00:00Z", user: "zed" },
    ],
    path: "kept",
  },
  {
    note: "only outside the period: nothing new",
    events: [
      { subject: "s1", at: "2026-01-01T00:00:00Z", user: "old" },
      { subject: "s1", at: "2026-03-01T00:00:00Z", user: "new" },
      { subject: "s1", at: "2026-01-14T23:59:59.999Z" },
    ],
    path: "kept",
  },
  {
    note: "an event committed below the kept sequence number: found by the count, counted again",
    events: [{ subject: "s1", at: "2026-01-30T00:00:00Z", user: "straggler", seq: 1 }],
    path: "counted",
  },
  { note: "then added to as before", events: [{ subject: "s1", at: "2026-01-31T00:00:00Z", user: "eve" }], path: "added" },
  {
    note: "the mid-minute period's edges: its first minute before and after its start, its last millisecond and its end",
    events: [
      { subject: "s1", at: "2026-01-15T00:00:30.499Z", user: "fay" },
      { subject: "s1", at: "2026-01-15T00:00:30.499Z" },
      { subject: "s1", at: "2026-01-15T00:00:30.500Z", user: "gil" },
      { subject: "s1", at: "2026-01-15T00:00:59.999Z" },
      { subject: "s1", at: "2026-02-14T12:00:00.249Z", user: "hal" },
      { subject: "s1", at: "2026-02-14T12:00:00.250Z", user: "ivy" },
      { subject: "s2", at: "2026-01-20T07:00:00Z", user: "ann", region: "us" },
      { subject: "s2", at: "2026-01-20T18:00:00Z", user: "jon" },
    ],
    path: "added",
  },
];

for (const store of STORES) {
  test(`${store}: the kept values brought up to date equal a full count after every step, for two subjects and groupings`, async (t) => {
    await world(store, async ({ write, written, meter }) => {
      // seq 1 stays free for the straggler.
      await write([{ subject: "s3", at: "2026-01-01T00:00:00Z", user: "x", seq: 2 }]);
      const kept = meter();
      for (const step of STEPS) {
        await write(step.events);
        t.deepEqual(await read(kept, "s1", JAN, false), expected(written, "s1", JAN, false), step.note);
        if (step.path) t.is(kept.lastPath, step.path, `${step.note}: answered by ${step.path}`);
        for (const subject of ["s1", "s2"]) {
          for (const r of [JAN, MID, DAY_RANGE]) {
            for (const byRegion of [false, true]) {
              const want = expected(written, subject, r, byRegion);
              const label = `${step.note}: ${subject} ${r === JAN ? "JAN" : r === MID ? "mid-minute" : "within a day"} ${byRegion ? "by region" : "all"}`;
              t.deepEqual(await read(kept, subject, r, byRegion), want, label);
              t.deepEqual(await read(meter(), subject, r, byRegion), want, `${label} (full count)`);
            }
          }
        }
      }
    });
  });

  test(`${store}: an environment too far ahead, or a set too large to keep, is counted again, still exact`, async (t) => {
    await world(store, async ({ write, written, meter }) => {
      const small = meter({ periods: 10, setValues: 3, totalValues: 5, behind: 4 });
      const check = async (note: string, path?: MeterPath) => {
        t.deepEqual(await read(small, "s1", JAN, false), expected(written, "s1", JAN, false), note);
        if (path) t.is(small.lastPath, path, note);
      };
      await write([
        { subject: "s1", at: "2026-01-20T00:00:00Z", user: "ann" },
        { subject: "s1", at: "2026-01-21T00:00:00Z", user: "bob" },
      ]);
      await check("two values: kept", "counted");
      await write([{ subject: "s1", at: "2026-01-22T00:00:00Z", user: "cat" }]);
      await check("a third: added", "added");
      await write(["a", "b", "c", "d", "e"].map((u) => ({ subject: "s2", at: "2026-01-22T00:00:00Z", user: u })));
      await check("five events elsewhere in the environment: more than `behind`, counted again", "counted");
      await write([{ subject: "s1", at: "2026-01-23T00:00:00Z", user: "dan" }]);
      await check("a fourth value: more than a set keeps; its count kept instead", "added");
      await check("unchanged: the kept count", "kept");
      await write([{ subject: "s1", at: "2026-01-24T00:00:00Z", user: "ann" }]);
      await check("a seen value: counted again (count only)", "counted");
      await write(["a", "b", "c"].map((u) => ({ subject: "s3", at: "2026-01-25T00:00:00Z", user: u })));
      t.deepEqual(await read(small, "s3", JAN, false), expected(written, "s3", JAN, false), "another period's three values: kept");
      t.deepEqual(await read(small, "s2", JAN, false), expected(written, "s2", JAN, false), "five values: more than a set keeps");
      await check("the first period again", "kept");
    });
  });

  test(`${store}: reads of one period at once take turns and agree with a full count`, async (t) => {
    await world(store, async ({ write, written, meter }) => {
      const kept = meter();
      await write([{ subject: "s1", at: "2026-01-20T00:00:00Z", user: "ann" }]);
      await read(kept, "s1", JAN, false);
      await write([
        { subject: "s1", at: "2026-01-21T00:00:00Z", user: "bob" },
        { subject: "s1", at: "2026-01-22T00:00:00Z", user: "cat" },
      ]);
      const answers = await Promise.all([1, 2, 3, 4].map(() => read(kept, "s1", JAN, false)));
      for (const a of answers) t.deepEqual(a, expected(written, "s1", JAN, false));
      t.is(kept.lastPath, "kept");
    });
  });
}
