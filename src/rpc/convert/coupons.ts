/** Wire ⇄ domain for coupons and discounts (DESIGN §15), and the `coupon.redeemed` event's JSON. */
import { create, toJson } from "@bufbuild/protobuf";
import type { DiscountView } from "../../billing/coupons/coupons.js";
import { isValid } from "../../billing/coupons/redeem.js";
import type { Coupon } from "../../billing/coupons/types.js";
import type { CreateCouponInput } from "../../billing/coupons/validation.js";
import { type Coupon as CouponPb, CouponSchema, type Discount as DiscountPb, DiscountSchema } from "../../gen/billing/v1/coupon_pb.js";
import type { CreateCouponRequest } from "../../gen/billing/v1/coupon_service_pb.js";
import { restJson, stringifyRest } from "../json-out.js";
import { instantOf, ts } from "./common.js";

/** `now`: when `valid` is read (real time). */
export function couponToPb(c: Coupon, now: Date): CouponPb {
  return create(CouponSchema, {
    id: c.id,
    name: c.name,
    percentOff: c.percentOff ?? undefined,
    amountOff: c.amountOff ? { currencyCode: c.amountOff.currency, value: c.amountOff.value } : undefined,
    duration: c.duration,
    durationInMonths: c.durationInMonths ?? undefined,
    maxRedemptions: c.maxRedemptions ?? undefined,
    redeemBy: c.redeemBy ? ts(c.redeemBy) : undefined,
    appliesToRateCodes: c.appliesToRateCodes,
    timesRedeemed: c.timesRedeemed,
    valid: isValid(c, now),
    archived: c.archived,
    metadata: c.metadata,
    createdAt: ts(c.createdAt),
  });
}

export function discountToPb(v: DiscountView, now: Date): DiscountPb {
  const d = v.discount;
  return create(DiscountSchema, {
    id: d.id,
    couponId: d.couponId,
    coupon: couponToPb(v.coupon, now),
    subscriptionId: d.subscriptionId ?? undefined,
    subjectId: d.subjectId,
    start: ts(d.start),
    end: d.end ? ts(d.end) : undefined,
    status: d.status,
    invoicesDiscounted: d.invoicesDiscounted,
    removedAt: d.removedAt ? ts(d.removedAt) : undefined,
  });
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

/** A discount as `coupon.redeemed` carries it: the JSON of the REST Discount. */
export function discountEventJson(v: DiscountView): string {
  const json = toJson(DiscountSchema, discountToPb(v, new Date()), { useProtoFieldName: true, alwaysEmitImplicit: true });
  const out = restJson(DiscountSchema, json as never);
  return stringifyRest(out.json, out.rawNumbers);
}
