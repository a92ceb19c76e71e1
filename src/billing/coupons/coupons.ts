/**
 * Coupon use cases (DESIGN §15): create, read, list and archive coupons; apply one to a
 * subscription or a subject (a discount, redeem.ts), list and remove discounts. A discount's times
 * are its subscription's (or subject's) clock; a coupon's `valid` is read on real time.
 */
import { FailedPreconditionError, NotFoundError, Violations, invalid } from "../errors.js";
import { newId } from "../ids.js";
import { type PageResult, checkPage } from "../pagination.js";
import type { Lookups } from "../subscriptions/lookups.js";
import type { Caller } from "../tenancy.js";
import type { CouponStore } from "./ports.js";
import { type RedeemTarget, couponNotFound, redeemIn, refusal } from "./redeem.js";
import type { Coupon, Discount } from "./types.js";
import { type CreateCouponInput, checkCoupon } from "./validation.js";

/** A discount with its coupon as it is now (what the API returns). */
export interface DiscountView {
  discount: Discount;
  coupon: Coupon;
}

export interface ListDiscountsInput {
  subscriptionId?: string;
  subjectId?: string;
  limit?: number;
  offset?: number;
}

export class Coupons {
  constructor(
    private readonly store: CouponStore,
    private readonly lookups: Lookups,
  ) {}

  /** Real time (coupons belong to no clock). */
  now(): Date {
    return this.lookups.engine.now();
  }

  async create(caller: Caller, input: CreateCouponInput): Promise<Coupon> {
    const v = new Violations();
    const c = checkCoupon(input, v);
    v.throwIfAny();
    const coupon: Coupon = { id: newId("cpn"), environmentId: caller.environmentId, ...c, timesRedeemed: 0, archived: false, createdAt: this.now() };
    await this.store.transaction((tx) => tx.insertCoupon(coupon));
    return coupon;
  }

  async get(caller: Caller, id: string): Promise<Coupon> {
    const c = id === "" ? undefined : await this.store.get(caller.environmentId, id);
    if (!c) throw couponNotFound(id);
    return c;
  }

  async list(caller: Caller, input: { limit?: number; offset?: number; archived?: boolean }): Promise<PageResult<Coupon>> {
    const v = new Violations();
    const page = checkPage(input.limit, input.offset, v);
    v.throwIfAny();
    return this.store.list(caller.environmentId, input.archived, page);
  }

  async archive(caller: Caller, id: string): Promise<Coupon> {
    await this.get(caller, id);
    const c = await this.store.transaction((tx) => tx.archive(caller.environmentId, id));
    if (!c) throw couponNotFound(id);
    return c;
  }

  /** Refuses, before anything is written, a coupon that could not be applied to a new subscription in `currency` at `at`. */
  async check(caller: Caller, couponId: string, currency: string | null, at: Date): Promise<void> {
    if (couponId === "") invalid("coupon_id", "must not be empty");
    const c = await this.get(caller, couponId);
    const refused = refusal(c, { currency }, at);
    if (refused) throw refused;
  }

  async addToSubscription(caller: Caller, subscriptionId: string, couponId: string): Promise<DiscountView> {
    if (couponId === "") invalid("coupon_id", "is required");
    const sub = await this.lookups.subscription(caller, subscriptionId);
    if (sub.status === "cancelled") {
      throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${sub.id} is cancelled; a coupon cannot be applied to it`, { subscription_id: sub.id });
    }
    const card = await this.lookups.cardOf(caller, sub.rateCardId);
    const at = await this.lookups.nowFor({ environmentId: sub.environmentId, testClockId: sub.testClockId });
    const target: RedeemTarget = { environmentId: caller.environmentId, subjectId: sub.subjectId, subscriptionId: sub.id, currency: card.currency };
    return this.store.transaction((tx) => redeemIn(tx, tx, couponId, target, at));
  }

  async addToSubject(caller: Caller, subjectKey: string, couponId: string): Promise<DiscountView> {
    if (couponId === "") invalid("coupon_id", "is required");
    const subject = await this.lookups.subject(caller, subjectKey);
    const at = await this.lookups.nowFor(subject);
    const target: RedeemTarget = { environmentId: caller.environmentId, subjectId: subject.id, subscriptionId: null, currency: null };
    return this.store.transaction((tx) => redeemIn(tx, tx, couponId, target, at));
  }

  async listDiscounts(caller: Caller, input: ListDiscountsInput): Promise<PageResult<DiscountView>> {
    const v = new Violations();
    const page = checkPage(input.limit, input.offset, v);
    const bySub = input.subscriptionId !== undefined && input.subscriptionId !== "";
    const bySubject = input.subjectId !== undefined && input.subjectId !== "";
    if (bySub === bySubject) v.add("subscription_id", "exactly one of subscription_id and subject_id is required");
    v.throwIfAny();
    const filter = bySub
      ? { subscriptionId: (await this.lookups.subscription(caller, input.subscriptionId as string)).id }
      : { subjectId: (await this.lookups.subject(caller, input.subjectId as string)).id };
    const found = await this.store.listDiscounts(caller.environmentId, filter, page);
    return { hasMore: found.hasMore, items: await this.withCoupons(caller, found.items) };
  }

  /** Removes a discount: invoices finalized from then on are not discounted by it. */
  async remove(caller: Caller, id: string): Promise<DiscountView> {
    const before = id === "" ? undefined : await this.store.getDiscount(caller.environmentId, id);
    if (!before) throw new NotFoundError("DISCOUNT_NOT_FOUND", `discount ${JSON.stringify(id)} not found`, { discount_id: id });
    const subject = await this.lookups.stores.directory.subject(caller.environmentId, before.subjectId);
    const at = subject ? await this.lookups.nowFor(subject) : this.now();
    const removed = await this.store.transaction((tx) => tx.remove(caller.environmentId, id, at));
    if (!removed) throw new FailedPreconditionError("DISCOUNT_REMOVED", `discount ${id} was removed already`, { discount_id: id });
    return (await this.withCoupons(caller, [removed]))[0] as DiscountView;
  }

  private async withCoupons(caller: Caller, discounts: Discount[]): Promise<DiscountView[]> {
    const coupons = await this.store.coupons(caller.environmentId, [...new Set(discounts.map((d) => d.couponId))]);
    return discounts.map((discount) => {
      const coupon = coupons.get(discount.couponId);
      if (!coupon) throw new Error(`discount ${discount.id} names a missing coupon ${discount.couponId}`);
      return { discount, coupon };
    });
  }
}
