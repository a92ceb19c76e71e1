/**
 * Storage ports of coupons (DESIGN §15). Reads outside a transaction (CouponStore), and the writes
 * a transaction makes (CouponWrites): the coupon use cases open their own transaction; a new
 * subscription's coupon is redeemed inside the billing transaction that creates it
 * (BillingTx.coupons), so its first invoice is discounted.
 *
 * Redemption is one conditional statement: `times_redeemed` goes up only while the coupon is not
 * archived, not past redeem_by and below max_redemptions, so two concurrent redemptions of the
 * last one cannot both succeed, whatever runs at the same time.
 */
import type { EventWrites } from "../events/types.js";
import type { Page, PageResult } from "../pagination.js";
import type { Coupon, Discount } from "./types.js";

export interface DiscountFilter {
  subscriptionId?: string;
  /** With a subject: its own discounts and its subscriptions'. */
  subjectId?: string;
}

/** Coupon writes inside a transaction. */
export interface CouponWrites {
  insertCoupon(c: Coupon): Promise<void>;
  /** The coupon, archived; undefined when there is none. */
  archive(environmentId: string, id: string): Promise<Coupon | undefined>;
  /**
   * Counts one redemption at `at` if the coupon may still be redeemed then (one conditional
   * UPDATE): the coupon after it, or undefined (nothing written) when it may not.
   */
  redeem(environmentId: string, couponId: string, at: Date): Promise<Coupon | undefined>;
  getCoupon(environmentId: string, id: string): Promise<Coupon | undefined>;
  insertDiscount(d: Discount): Promise<void>;
  /** The discount, locked until the transaction ends. */
  lockDiscount(environmentId: string, id: string): Promise<Discount | undefined>;
  /** Marks an active or ended discount removed at `at`; undefined when it was removed already. */
  remove(environmentId: string, id: string, at: Date): Promise<Discount | undefined>;
}

export type CouponTx = CouponWrites & EventWrites;

export interface CouponStore {
  get(environmentId: string, id: string): Promise<Coupon | undefined>;
  /** Coupons in creation order; archived: only archived (true) or only not archived (false). */
  list(environmentId: string, archived: boolean | undefined, page: Page): Promise<PageResult<Coupon>>;
  getDiscount(environmentId: string, id: string): Promise<Discount | undefined>;
  /** Discounts oldest first. */
  listDiscounts(environmentId: string, filter: DiscountFilter, page: Page): Promise<PageResult<Discount>>;
  /** Coupons by ID (those that exist). */
  coupons(environmentId: string, ids: string[]): Promise<Map<string, Coupon>>;
  /** `fn` in one transaction; a deadlock or lock wait timeout is an AbortedError (retryable). */
  transaction<T>(fn: (tx: CouponTx) => Promise<T>): Promise<T>;
}
