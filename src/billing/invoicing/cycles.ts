/**
 * Billing cycles (DESIGN §8): monthly or yearly from the anchor (effective_at), in UTC. Cycle n
 * starts n months (or years) after the anchor, on the anchor's day-of-month and time, clamped to
 * the month's last day — each computed from the anchor, so Jan 31 → Feb 28/29 → Mar 31.
 */
import type { BillingInterval } from "../catalog/types.js";

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

/** The anchor moved forward by `months` calendar months, day clamped to the month's end. */
export function addMonths(anchor: Date, months: number): Date {
  const y = anchor.getUTCFullYear();
  const m = anchor.getUTCMonth() + months;
  const year = y + Math.floor(m / 12);
  const month = ((m % 12) + 12) % 12;
  const day = Math.min(anchor.getUTCDate(), daysInMonth(year, month));
  return new Date(Date.UTC(year, month, day, anchor.getUTCHours(), anchor.getUTCMinutes(), anchor.getUTCSeconds(), anchor.getUTCMilliseconds()));
}

/** Start of cycle `index` (0 is the anchor itself). */
export function cycleStart(anchor: Date, index: number, interval: BillingInterval): Date {
  return addMonths(anchor, index * (interval === "yearly" ? 12 : 1));
}

/** [start, end) of cycle `index`. */
export function cycleBounds(anchor: Date, index: number, interval: BillingInterval): { start: Date; end: Date } {
  return { start: cycleStart(anchor, index, interval), end: cycleStart(anchor, index + 1, interval) };
}
