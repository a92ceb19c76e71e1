/**
 * A usage rate's minimum and maximum per period (DESIGN §13), pure.
 * - The rate's total is the sum of its rounded lines for the window, multiplier applied.
 * - Below the minimum: a line of kind "minimum" for the difference, shown even with no usage.
 *   Above the maximum: a negative line of kind "maximum" taking off the excess. Each rounded
 *   once, half-up, to whole smallest units (no line when that rounds to 0).
 * - The multiplier does not scale them: they are commitments in money, not prices.
 * - A usage window shorter than its cycle (a cancellation, pause or rate-card change mid-cycle)
 *   prorates both by its share of the cycle it lies in: exact decimals of milliseconds,
 *   (to − from) / (cycle end − cycle start), at most 1.
 */
import { type Decimal, ZERO, dec, roundAmount } from "../money.js";
import { addMonths } from "./cycles.js";
import type { Line } from "./line.js";
import type { BillingInterval } from "../catalog/types.js";

export interface Cycle {
  start: Date;
  end: Date;
}

/**
 * The cycle a window lies in when no one recorded it (windows billed before cycles were kept
 * with them): one interval from the window's start, which is right for every window that starts
 * a cycle (a cycle close, cancellation or pause before any rate-card change) except that a
 * month-end anchor's clamped day may make it a few days short; a share never exceeds 1.
 */
export function assumedCycle(from: Date, interval: BillingInterval): Cycle {
  return { start: from, end: addMonths(from, interval === "yearly" ? 12 : 1) };
}

/** The share of `cycle` that [from, to) covers, 0 to 1. */
export function windowShare(from: Date, to: Date, cycle: Cycle): Decimal {
  const whole = cycle.end.getTime() - cycle.start.getTime();
  const part = to.getTime() - from.getTime();
  if (whole <= 0 || part >= whole) return dec(1);
  if (part <= 0) return ZERO;
  return dec(part).div(dec(whole));
}

/** The minimum or maximum line of a rate whose lines total `total` over a window of `share` of its cycle, if any. */
export function limitLine(name: string, total: Decimal, minimum: Decimal | null, maximum: Decimal | null, share: Decimal): { kind: "minimum" | "maximum"; line: Line } | null {
  const prorated = share.lt(1) ? ", prorated" : "";
  if (minimum !== null) {
    const min = minimum.times(share);
    const amount = roundAmount(min.minus(total));
    if (total.lt(min) && amount.gt(0)) {
      return { kind: "minimum", line: { description: `${name} (minimum per period${prorated})`, quantity: dec(1), unitAmount: amount, amount, cell: "minimum" } };
    }
  }
  if (maximum !== null) {
    const max = maximum.times(share);
    const amount = roundAmount(total.minus(max)).neg();
    if (total.gt(max) && amount.lt(0)) {
      return { kind: "maximum", line: { description: `${name} (maximum per period${prorated})`, quantity: dec(1), unitAmount: amount, amount, cell: "maximum" } };
    }
  }
  return null;
}
