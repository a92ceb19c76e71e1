/** Coupons and discounts (DESIGN §15). Amounts in smallest units of their currency, as decimal strings. */
import type { Metadata } from "../metadata.js";

export type CouponDuration = "once" | "repeating" | "forever";
export const COUPON_DURATIONS: readonly CouponDuration[] = ["once", "repeating", "forever"];

export interface Coupon {
  id: string;
  environmentId: string;
  name: string;
  /** Exactly one of percentOff and amountOff is set. */
  percentOff: string | null;
  amountOff: { currency: string; value: string } | null;
  duration: CouponDuration;
  durationInMonths: number | null;
  maxRedemptions: number | null;
  redeemBy: Date | null;
  appliesToRateCodes: string[];
  timesRedeemed: number;
  archived: boolean;
  metadata: Metadata;
  createdAt: Date;
}

export type DiscountStatus = "active" | "ended" | "removed";

export interface Discount {
  id: string;
  environmentId: string;
  couponId: string;
  /** null: the subject's discount, covering every subscription of the subject. */
  subscriptionId: string | null;
  subjectId: string;
  start: Date;
  /** "repeating": start + duration_in_months; null otherwise. */
  end: Date | null;
  status: DiscountStatus;
  invoicesDiscounted: number;
  removedAt: Date | null;
  /**
   * A "once" discount split by an upgrade whose change lines netted to a credit (change-credit.ts):
   * the invoice that kept the other lines, the only one it still discounts; and what the change
   * lines took of an amount off, which that invoice is offered less. Absent: neither.
   */
  heldFor?: string | null;
  onceTaken?: string | null;
}

/** A discount as an invoice's arithmetic takes it (booking.ts), in the order it is applied. */
export interface BookingDiscount {
  discountId: string;
  couponId: string;
  name: string;
  percentOff: string | null;
  /** In the invoice's currency (a coupon of another currency is not offered). */
  amountOff: string | null;
  appliesToRateCodes: readonly string[];
  /** The coupon's duration, when known: a proration credit passes only through discounts that are not "once" (updates.ts). */
  duration?: CouponDuration;
  /**
   * A "once" discount's once_taken as this read found it (null: none): what upgrades' change lines
   * took of it. An upgrade holding or spending it checks the row is still so under its lock (change-credit.ts).
   */
  onceTaken?: string | null;
}
