/**
 * The fences of a cancellation or change of rate card (changes.ts): what the locked row must
 * still be for the attempt computed from an earlier read to apply (races.ts retries it if not).
 */
import { FailedPreconditionError } from "../errors.js";
import { sameEntries } from "./proration.js";
import { lostRace } from "./races.js";
import type { Subscription } from "./types.js";

/**
 * The fence of a cancel or change at `at`: the locked row's cycle must not have ended unclosed
 * before it, or the final or change invoice would span the cycle boundary (billing usage the
 * cycle close bills again, and skipping the next cycle's fixed charges). On the API's path
 * (`inCurrentPeriod`) a cycle ending exactly at `at` must be closed first too: a lost race with
 * the close, retried. On a timeline's path a transition at the cycle's end comes first; a cycle
 * that ended before it unclosed (its close failed, the subscription is set aside) makes the
 * transition wait for the next run.
 */
export function checkCycleClosed(s: Subscription, at: Date, inCurrentPeriod: boolean): void {
  const end = s.periodEnd.getTime();
  if (inCurrentPeriod) {
    if (end <= at.getTime()) throw lostRace(s.id);
  } else if (end < at.getTime()) {
    const why = s.billingFailure ? ` (${s.billingFailure.message})` : "";
    throw new FailedPreconditionError("CYCLE_NOT_CLOSED", `subscription ${s.id}: its billing cycle that ended at ${s.periodEnd.toISOString()} is not closed yet${why}`, { subscription_id: s.id });
  }
}

/**
 * Whether the locked row `s` is still what `current` was read as: its card, its usage fence, its
 * cycle, the terms its usage is priced at, and the usage-terms adjustments and first-seen anchors
 * its window's lines carry (a multiplier raised and lowered back between the read and the lock
 * leaves the terms equal but the adjustment changed: a final invoice computed from the read would
 * net the old adjustment again).
 */
export function unmoved(s: Subscription, current: Subscription): boolean {
  return (
    s.rateCardId === current.rateCardId &&
    s.usageSince.getTime() === current.usageSince.getTime() &&
    s.cycleIndex === current.cycleIndex &&
    sameEntries(s.fixedRateQuantities, current.fixedRateQuantities) &&
    sameEntries(s.rateMultipliers, current.rateMultipliers) &&
    sameWindowState(s, current)
  );
}

/** Whether `s` and `current` carry the same usage-terms changes and first-seen anchors for their window (what its lines are priced with besides the terms). */
export function sameWindowState(s: Subscription, current: Subscription): boolean {
  return JSON.stringify(s.usageAdjustments ?? null) === JSON.stringify(current.usageAdjustments ?? null) && JSON.stringify(s.firstSeen ?? null) === JSON.stringify(current.firstSeen ?? null);
}
