/** Metering rules, table-driven: periods and buckets, the hour split, aggregation, timestamps. */
import test from "ava";
import { type Agg, EMPTY, combine, valueOf } from "../../src/billing/metering/aggregate.js";
import { fingerprint } from "../../src/billing/metering/events.js";
import { HOUR, type Range, buckets, contains, floorTo, splitByHours } from "../../src/billing/metering/periods.js";
import { dec } from "../../src/billing/money.js";

const T = (s: string) => Date.parse(s);
const iso = (r: Range) => `${r.inclusiveStart ? "[" : "("}${new Date(r.start).toISOString()} ${new Date(r.end).toISOString()}${r.inclusiveEnd ? "]" : ")"}`;
const range = (start: string, end: string, inclusiveStart = true, inclusiveEnd = false): Range => ({ start: T(start), end: T(end), inclusiveStart, inclusiveEnd });

const containsCases: [Range, string, boolean][] = [
  [range("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"), "2026-01-01T00:00:00Z", true],
  [range("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"), "2026-01-02T00:00:00Z", false],
  [range("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", false, true), "2026-01-01T00:00:00Z", false],
  [range("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", false, true), "2026-01-02T00:00:00Z", true],
  [range("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"), "2026-01-01T23:59:59.999Z", true],
];
for (const [r, t, expected] of containsCases) {
  test(`contains ${iso(r)} ${t} = ${expected}`, (tt) => tt.is(contains(r, T(t)), expected));
}

test("weeks start on Monday, in UTC", (t) => {
  t.is(new Date(floorTo("week", T("2026-11-22T20:00:00Z"))).toISOString(), "2026-11-16T00:00:00.000Z"); // a Sunday
  t.is(new Date(floorTo("week", T("2026-11-16T00:00:00Z"))).toISOString(), "2026-11-16T00:00:00.000Z"); // a Monday
  t.is(new Date(floorTo("day", T("2026-11-22T20:00:00Z"))).toISOString(), "2026-11-22T00:00:00.000Z");
});

const bucketCases: [string, Range, "hour" | "day" | "week" | undefined, string[]][] = [
  ["no granularity: the whole period", range("2026-01-01T10:30:00Z", "2026-01-03T00:00:00Z"), undefined, ["[2026-01-01T10:30:00.000Z 2026-01-03T00:00:00.000Z)"]],
  [
    "days clipped to the period",
    range("2026-01-01T10:30:00Z", "2026-01-03T06:00:00Z"),
    "day",
    ["[2026-01-01T10:30:00.000Z 2026-01-02T00:00:00.000Z)", "[2026-01-02T00:00:00.000Z 2026-01-03T00:00:00.000Z)", "[2026-01-03T00:00:00.000Z 2026-01-03T06:00:00.000Z)"],
  ],
  [
    "an inclusive end on a boundary keeps a one-instant bucket",
    range("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", true, true),
    "day",
    ["[2026-01-01T00:00:00.000Z 2026-01-02T00:00:00.000Z)", "[2026-01-02T00:00:00.000Z 2026-01-02T00:00:00.000Z]"],
  ],
  [
    "an exclusive start is kept on the first bucket",
    range("2026-01-01T00:00:00Z", "2026-01-01T02:00:00Z", false, false),
    "hour",
    ["(2026-01-01T00:00:00.000Z 2026-01-01T01:00:00.000Z)", "[2026-01-01T01:00:00.000Z 2026-01-01T02:00:00.000Z)"],
  ],
  [
    "weeks from Monday",
    range("2026-11-18T00:00:00Z", "2026-11-30T12:00:00Z"),
    "week",
    ["[2026-11-18T00:00:00.000Z 2026-11-23T00:00:00.000Z)", "[2026-11-23T00:00:00.000Z 2026-11-30T00:00:00.000Z)", "[2026-11-30T00:00:00.000Z 2026-11-30T12:00:00.000Z)"],
  ],
];
for (const [title, r, g, expected] of bucketCases) {
  test(`buckets: ${title}`, (t) => t.deepEqual(buckets(r, g).map(iso), expected));
}

test("the hour split covers every instant exactly once", (t) => {
  const starts = ["2026-01-01T00:00:00Z", "2026-01-01T00:30:00Z", "2026-01-01T01:00:00Z"];
  const ends = ["2026-01-01T00:45:00Z", "2026-01-01T03:00:00Z", "2026-01-01T03:15:00Z", "2026-01-01T01:00:00Z"];
  for (const s of starts)
    for (const e of ends)
      for (const is of [true, false])
        for (const ie of [true, false]) {
          const r = range(s, e, is, ie);
          if (r.end < r.start) continue;
          const split = splitByHours(r);
          for (let ms = T("2025-12-31T23:00:00Z"); ms <= T("2026-01-01T04:00:00Z"); ms += 15 * 60_000) {
            const inFull = split.fullTo > split.fullFrom && ms >= split.fullFrom && ms < split.fullTo;
            const inEdges = split.edges.filter((edge) => contains(edge, ms)).length;
            t.is((inFull ? 1 : 0) + inEdges, contains(r, ms) ? 1 : 0, `${iso(r)} at ${new Date(ms).toISOString()}`);
          }
          t.is(split.fullFrom % HOUR, 0);
        }
});

const agg = (v: string, at: number, key: string): Agg => ({ sum: dec(v), count: dec(1), max: dec(v), last: { at, key, value: dec(v) } });

test("aggregates combine in any order to the same result", (t) => {
  const parts = [agg("1.5", 10, "a"), agg("0.000001", 30, "b"), agg("7", 20, "c"), agg("2", 30, "a")];
  const forward = parts.reduce(combine, EMPTY);
  const backward = [...parts].reverse().reduce(combine, EMPTY);
  for (const type of ["sum", "count", "max", "last"] as const) t.is(valueOf(type, forward), valueOf(type, backward));
  t.is(valueOf("sum", forward), "10.500001");
  t.is(valueOf("count", forward), "4");
  t.is(valueOf("max", forward), "7");
  t.is(valueOf("last", forward), "0.000001", "latest timestamp; on a tie the greater idempotency key");
  t.is(valueOf("sum", EMPTY), null);
});

test("the fingerprint ignores data key order and a defaulted timestamp", (t) => {
  const base = { index: 0, path: "", idempotencyKey: "k", subjectKey: "s", eventName: "e", occurredAt: 1, givenTimestamp: "" };
  const a = fingerprint("subj_1", { ...base, data: { a: "1", b: "2" } });
  t.is(a, fingerprint("subj_1", { ...base, data: { b: "2", a: "1" }, occurredAt: 999 }));
  t.not(a, fingerprint("subj_1", { ...base, data: { a: "1", b: "3" } }));
  t.not(a, fingerprint("subj_2", { ...base, data: { a: "1", b: "2" } }));
  t.not(a, fingerprint("subj_1", { ...base, data: { a: "1", b: "2" }, givenTimestamp: "2026-01-01T00:00:00.000Z" }));
});
