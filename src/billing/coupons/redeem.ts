/**
 * Redeeming a coupon (DESIGN §15): a discount of a subscription or a subject, written with its
 * `coupon.redeemed` event in the transaction that counts the redemption. Whether the coupon may be
 * redeemed is decided by the store's one conditional UPDATE (ports.ts); the reasons below only
 * explain a refusal.
 * - The discount starts at `at`, the subscription's (or subject's) clock; a "repeating" one ends
 *   duration_in_months calendar months later (cycles.ts addMonths: Jan 31 + 1 month = Feb 28).
 * - An amount coupon of another currency than the subscription's card is refused
 *   (CURRENCY_MISMATCH); a subject's discount takes any currency (only invoices in the coupon's
 *   currency are discounted).
 */
import { FailedPreconditionError, NotFoundError } from "../errors.js";
import type { EventWrites, NewEvent } from "../events/types.js";
import { newId } from "../ids.js";
import { addMonths } from "../invoicing/cycles.js";
import type { BillingTx } from "../subscriptions/ports.js";
import type { Subscription } from "../subscriptions/types.js";
import type { CouponWrites } from "./ports.js";
import type { Coupon, Discount } from "./types.js";

/** What a coupon is redeemed on: a subscription (with its card's currency) or a whole subject. */
export interface RedeemTarget {
  environmentId: string;
  subjectId: string;
  subscriptionId: string | null;
  /** The subscription's currency; null for a subject. */
  currency: string | null;
}

export const couponNotFound = (id: string): NotFoundError => new NotFoundError("COUPON_NOT_FOUND", `coupon ${JSON.stringify(id)} not found`, { coupon_id: id });

/** Whether the coupon may still be applied at `at` (the `valid` of the contract). */
export function isValid(c: Coupon, at: Date): boolean {
  return !c.archived && (c.redeemBy === null || c.redeemBy.getTime() >= at.getTime()) && (c.maxRedemptions === null || c.timesRedeemed < c.maxRedemptions);
}

/** Why `c` may not be applied to `target` at `at`; undefined when it may. */
export function refusal(c: Coupon, target: Pick<RedeemTarget, "currency">, at: Date): FailedPreconditionError | undefined {
  const meta = { coupon_id: c.id };
  if (c.archived) return new FailedPreconditionError("COUPON_ARCHIVED", `coupon ${c.id} is archived; it can no longer be applied`, meta);
  if (c.redeemBy !== null && c.redeemBy.getTime() < at.getTime()) {
    return new FailedPreconditionError("COUPON_EXPIRED", `coupon ${c.id} could be applied until ${c.redeemBy.toISOString()}`, meta);
  }
  if (c.maxRedemptions !== null && c.timesRedeemed >= c.maxRedemptions) {
    return new FailedPreconditionError("COUPON_MAX_REDEMPTIONS", `coupon ${c.id} was applied ${c.timesRedeemed} times, its max_redemptions`, meta);
  }
  if (c.amountOff !== null && target.currency !== null && c.amountOff.currency !== target.currency) {
    return new FailedPreconditionError("CURRENCY_MISMATCH", `coupon ${c.id} takes ${c.amountOff.currency} off; the subscription bills in ${target.currency}`, {
      ...meta,
      currency_code: target.currency,
    });
  }
  return undefined;
}

export const discountEvent = (discount: Discount, coupon: Coupon): NewEvent => ({
  type: "coupon.redeemed",
  environmentId: discount.environmentId,
  resource: { kind: "discount", discount, coupon },
});

/** Applies coupon `couponId` to `target` at `at` in the caller's transaction; see the file's comment. */
export async function redeemIn(tx: CouponWrites, events: EventWrites, couponId: string, target: RedeemTarget, at: Date): Promise<{ discount: Discount; coupon: Coupon }> {
  const before = await tx.getCoupon(target.environmentId, couponId);
  if (!before) throw couponNotFound(couponId);
  const refused = refusal(before, target, at);
  if (refused) throw refused;
  const coupon = await tx.redeem(target.environmentId, couponId, at);
  if (!coupon) {
    const now = (await tx.getCoupon(target.environmentId, couponId)) ?? before;
    throw refusal(now, target, at) ?? refusal({ ...now, timesRedeemed: now.maxRedemptions ?? now.timesRedeemed }, target, at) ?? couponNotFound(couponId);
  }
  const discount: Discount = {
    id: newId("di"),
    environmentId: target.environmentId,
    couponId,
    subscriptionId: target.subscriptionId,
    subjectId: target.subjectId,
    start: at,
    end: coupon.duration === "repeating" ? addMonths(at, coupon.durationInMonths ?? 1) : null,
    status: "active",
    invoicesDiscounted: 0,
    removedAt: null,
  };
  await tx.insertDiscount(discount);
  await events.emit([discountEvent(discount, coupon)]);
  return { discount, coupon };
}

/**
 * Applies `couponId` to a subscription being created, in the transaction that writes it and
 * before its first invoice, so that invoice is discounted. `lenient` (a checkout completing, the
 * coupon checked when it opened): a coupon that can no longer be applied is left out instead of
 * failing a subscription already paid for.
 */
export async function redeemOnNewSubscription(tx: BillingTx, sub: Subscription, couponId: string, currency: string | null, lenient = false): Promise<void> {
  if (!tx.coupons) throw new Error("this store keeps no coupons");
  const target: RedeemTarget = { environmentId: sub.environmentId, subjectId: sub.subjectId, subscriptionId: sub.id, currency };
  try {
    await redeemIn(tx.coupons, tx, couponId, target, sub.anchor);
  } catch (err) {
    if (!lenient || !(err instanceof FailedPreconditionError || err instanceof NotFoundError)) throw err;
  }
}
