/** Billing cycles (src/billing/invoicing/cycles.ts), table-driven: month ends, leap years, yearly cycles. */
import test from "ava";
import type { BillingInterval } from "../../src/billing/catalog/types.js";
import { addMonths, cycleBounds, cycleStart } from "../../src/billing/invoicing/cycles.js";

const iso = (d: Date) => d.toISOString();

const addMonthsCases: [string, number, string][] = [
  ["2026-01-15T10:30:00.000Z", 1, "2026-02-15T10:30:00.000Z"],
  ["2026-01-31T00:00:00.000Z", 1, "2026-02-28T00:00:00.000Z"],
  ["2028-01-31T00:00:00.000Z", 1, "2028-02-29T00:00:00.000Z"],
  ["2026-01-31T00:00:00.000Z", 2, "2026-03-31T00:00:00.000Z"],
  ["2026-01-31T00:00:00.000Z", 3, "2026-04-30T00:00:00.000Z"],
  ["2026-11-30T23:59:59.999Z", 2, "2027-01-30T23:59:59.999Z"],
  ["2026-12-31T12:00:00.000Z", 1, "2027-01-31T12:00:00.000Z"],
  ["2026-03-31T00:00:00.000Z", -1, "2026-02-28T00:00:00.000Z"],
  ["2026-01-15T00:00:00.000Z", -13, "2024-12-15T00:00:00.000Z"],
  ["2028-02-29T00:00:00.000Z", 12, "2029-02-28T00:00:00.000Z"],
  ["2028-02-29T00:00:00.000Z", 48, "2032-02-29T00:00:00.000Z"],
  ["2026-05-10T00:00:00.000Z", 0, "2026-05-10T00:00:00.000Z"],
];
for (const [anchor, months, want] of addMonthsCases) {
  test(`addMonths(${anchor}, ${months})`, (t) => {
    t.is(iso(addMonths(new Date(anchor), months)), want);
  });
}

const cycleCases: [string, number, BillingInterval, string, string][] = [
  ["2026-01-31T09:00:00.000Z", 0, "monthly", "2026-01-31T09:00:00.000Z", "2026-02-28T09:00:00.000Z"],
  // Each start is computed from the anchor, so February's clamp does not stick: Mar 31, not Mar 28.
  ["2026-01-31T09:00:00.000Z", 1, "monthly", "2026-02-28T09:00:00.000Z", "2026-03-31T09:00:00.000Z"],
  ["2026-01-31T09:00:00.000Z", 11, "monthly", "2026-12-31T09:00:00.000Z", "2027-01-31T09:00:00.000Z"],
  ["2028-02-29T00:00:00.000Z", 0, "yearly", "2028-02-29T00:00:00.000Z", "2029-02-28T00:00:00.000Z"],
  ["2028-02-29T00:00:00.000Z", 3, "yearly", "2031-02-28T00:00:00.000Z", "2032-02-29T00:00:00.000Z"],
  ["2026-07-01T00:00:00.000Z", 2, "yearly", "2028-07-01T00:00:00.000Z", "2029-07-01T00:00:00.000Z"],
];
for (const [anchor, index, interval, start, end] of cycleCases) {
  test(`cycleBounds(${anchor}, ${index}, ${interval})`, (t) => {
    const b = cycleBounds(new Date(anchor), index, interval);
    t.deepEqual([iso(b.start), iso(b.end)], [start, end]);
    t.is(iso(cycleStart(new Date(anchor), index, interval)), start);
  });
}

test("consecutive monthly cycles tile time: each ends where the next starts, and is 28 to 31 days long", (t) => {
  const anchor = new Date("2027-01-31T18:45:00.000Z");
  for (let i = 0; i < 60; i++) {
    const a = cycleBounds(anchor, i, "monthly");
    const b = cycleBounds(anchor, i + 1, "monthly");
    t.is(iso(a.end), iso(b.start));
    const days = (a.end.getTime() - a.start.getTime()) / 86_400_000;
    t.true(days >= 28 && days <= 31, `cycle ${i}: ${days} days`);
  }
});
