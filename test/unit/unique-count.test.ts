/**
 * unique_count's pure parts (src/billing/metering/unique.ts): how a period is read (raw events
 * within a day, otherwise one level whose edge buckets bound it), the instants of a range, value
 * keys, and the marks an event makes.
 */
import test from "ava";
import type { PricingMetric } from "../../src/billing/catalog/types.js";
import { DAY, MAX_LEVEL, inclusiveMs, mergeMarks, planRead, valueKeyOf, valueMarksOf } from "../../src/billing/metering/unique.js";

const at = (iso: string) => Date.parse(iso);

test("a period within one UTC day reads the raw events; one spanning days a level whose buckets cover it", (t) => {
  t.deepEqual(planRead(at("2026-03-02T00:00:00Z"), at("2026-03-02T23:59:59.999Z")), { raw: true });
  const across = planRead(at("2026-03-02T23:59:59.999Z"), at("2026-03-03T00:00:00Z"));
  t.deepEqual(across, { level: 0, first: at("2026-03-02T00:00:00Z") / DAY, last: at("2026-03-03T00:00:00Z") / DAY, lo: at("2026-03-02T23:59:59.999Z"), hi: at("2026-03-03T00:00:00Z") });
  // Random ranges: the buckets chosen cover [lo, hi] and the first and last hold lo and hi.
  let seed = 3;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  for (let i = 0; i < 2000; i++) {
    const lo = at("2026-01-01T00:00:00Z") + Math.floor(rand() * 400 * DAY);
    const hi = lo + Math.floor(rand() * (rand() < 0.5 ? 3 : 300) * DAY);
    const plan = planRead(lo, hi);
    if ("raw" in plan) {
      t.is(Math.floor(lo / DAY), Math.floor(hi / DAY));
      continue;
    }
    const size = 2 ** plan.level * DAY;
    t.true(plan.level >= 0 && plan.level <= MAX_LEVEL);
    t.true(plan.first < plan.last);
    t.is(Math.floor(lo / size), plan.first);
    t.is(Math.floor(hi / size), plan.last);
    // Never many more days read than the period spans (a short period across a large boundary reads days).
    t.true((plan.last - plan.first + 1) * 2 ** plan.level <= 4 * (Math.floor(hi / DAY) - Math.floor(lo / DAY) + 1) + 2 ** MAX_LEVEL * 2, JSON.stringify(plan));
  }
  const month = planRead(at("2026-01-03T10:00:00Z"), at("2026-02-03T09:59:59.999Z"));
  t.false("raw" in month);
  if (!("raw" in month)) t.true(month.last - month.first + 1 <= 3, "a month reads two or three buckets");
});

test("a range's instants as an inclusive pair of milliseconds", (t) => {
  t.deepEqual(inclusiveMs({ start: 10, end: 20, inclusiveStart: true, inclusiveEnd: false }), { lo: 10, hi: 19 });
  t.deepEqual(inclusiveMs({ start: 10, end: 20, inclusiveStart: false, inclusiveEnd: true }), { lo: 11, hi: 20 });
  t.deepEqual(inclusiveMs({ start: 10, end: 10, inclusiveStart: true, inclusiveEnd: true }), { lo: 10, hi: 10 });
  t.is(inclusiveMs({ start: 10, end: 10, inclusiveStart: true, inclusiveEnd: false }), undefined);
  t.is(inclusiveMs({ start: 10, end: 11, inclusiveStart: false, inclusiveEnd: false }), undefined);
});

test("values are keyed by their text, a long one by its hash (never a short value's key)", (t) => {
  t.is(valueKeyOf("ann"), "ann");
  t.is(valueKeyOf(""), "");
  t.is(valueKeyOf("x".repeat(64)), "x".repeat(64));
  const long = valueKeyOf("x".repeat(65));
  t.regex(long, /^~[0-9a-f]{64}$/);
  t.not(valueKeyOf(`${"x".repeat(64)}y`), long);
});

test("an event marks its value at every level; without the field, none; marks of one row merge", (t) => {
  const metric: PricingMetric = {
    id: "pm_1",
    environmentId: "env_1",
    eventName: "visit",
    name: "",
    unit: "",
    dimensions: ["region"],
    aggregation: { type: "unique_count", valueField: "user" },
    createdAt: new Date(0),
    archivedAt: null,
  };
  const e = (user: string | undefined, iso: string) => ({ eventName: "visit", data: (user === undefined ? {} : { user }) as Record<string, string>, occurredAt: at(iso) });
  const marks = valueMarksOf([metric], "subj_1", e("ann", "2026-03-05T10:00:00Z"));
  t.is(marks.length, MAX_LEVEL + 1);
  t.deepEqual(
    marks.map((m) => [m.level, m.bucket]),
    Array.from({ length: MAX_LEVEL + 1 }, (_, k) => [k, Math.floor(Math.floor(at("2026-03-05T10:00:00Z") / DAY) / 2 ** k)]),
  );
  t.deepEqual(marks[0]?.dims, { region: "" });
  t.deepEqual(valueMarksOf([metric], "subj_1", e(undefined, "2026-03-05T10:00:00Z")), []);
  t.deepEqual(valueMarksOf([{ ...metric, aggregation: { type: "sum", valueField: "user" } }], "subj_1", e("1", "2026-03-05T10:00:00Z")), []);
  const merged = mergeMarks([...valueMarksOf([metric], "s", e("ann", "2026-03-05T10:00:00Z")), ...valueMarksOf([metric], "s", e("ann", "2026-03-05T08:00:00Z"))]);
  t.is(merged.length, MAX_LEVEL + 1);
  t.true(merged.every((m) => m.first === at("2026-03-05T08:00:00Z") && m.last === at("2026-03-05T10:00:00Z")));
});
