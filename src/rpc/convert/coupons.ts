/** Wire ⇄ domain for coupons and discounts (DESIGN §15). */
import type { DiscountView } from "../../billing/coupons/coupons.js";
import { isValid } from "../../billing/coupons/redeem.js";
import type { Coupon } from "../../billing/coupons/types.js";
import type { CreateCouponInput } from "../../billing/coupons/validation.js";
import { type Coupon as CouponPb, CouponSchema, type Discount as DiscountPb, DiscountSchema } from "../../gen/billing/v1/coupon_pb.js";
import type { CreateCouponRequest } from "../../gen/billing/v1/coupon_service_pb.js";
import { amount, instantOf, toPb } from "./common.js";

/** `now`: when `valid` is read (real time). */
export function couponToPb(c: Coupon, now: Date): CouponPb {
  return toPb(CouponSchema, { ...c, amountOff: c.amountOff && amount(c.amountOff.currency, c.amountOff.value), valid: isValid(c, now) });
}

export function discountToPb(v: DiscountView, now: Date): DiscountPb {
  return toPb(DiscountSchema, { ...v.discount, coupon: couponToPb(v.coupon, now) });
}

export function createCouponInput(req: CreateCouponRequest): CreateCouponInput {
  return {
    name: req.name,
    percentOff: req.percentOff,
    amountOff: req.amountOff ? { currency: req.amountOff.currencyCode, value: req.amountOff.value } : undefined,
    duration: req.duration,
    durationInMonths: req.durationInMonths,
    maxRedemptions: req.maxRedemptions,
    redeemBy: instantOf(req.redeemBy),
    appliesToRateCodes: req.appliesToRateCodes,
    metadata: req.metadata,
  };
}
