/** Connect implementation of the coupon service (DESIGN §15): wire ⇄ domain only. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { Coupons } from "../../billing/coupons/coupons.js";
import type { CouponService } from "../../gen/billing/v1/coupon_service_pb.js";
import { pageOf } from "../convert/common.js";
import { callerOf } from "../context.js";
import { couponToPb, createCouponInput, discountToPb } from "../convert/coupons.js";

export function couponService(coupons: Coupons): ServiceImpl<typeof CouponService> {
  return {
    async createCoupon(req, ctx) {
      return { coupon: couponToPb(await coupons.create(callerOf(ctx), createCouponInput(req)), coupons.now()) };
    },
    async getCoupon(req, ctx) {
      return { coupon: couponToPb(await coupons.get(callerOf(ctx), req.couponId), coupons.now()) };
    },
    async listCoupons(req, ctx) {
      const page = await coupons.list(callerOf(ctx), req);
      const now = coupons.now();
      return pageOf(page, "coupons", (c) => couponToPb(c, now));
    },
    async archiveCoupon(req, ctx) {
      return { coupon: couponToPb(await coupons.archive(callerOf(ctx), req.couponId), coupons.now()) };
    },
    async addSubscriptionDiscount(req, ctx) {
      return { discount: discountToPb(await coupons.addToSubscription(callerOf(ctx), req.subscriptionId, req.couponId), coupons.now()) };
    },
    async addSubjectDiscount(req, ctx) {
      return { discount: discountToPb(await coupons.addToSubject(callerOf(ctx), req.subjectId, req.couponId), coupons.now()) };
    },
    async listDiscounts(req, ctx) {
      const page = await coupons.listDiscounts(callerOf(ctx), req);
      const now = coupons.now();
      return pageOf(page, "discounts", (v) => discountToPb(v, now));
    },
    async removeDiscount(req, ctx) {
      return { discount: discountToPb(await coupons.remove(callerOf(ctx), req.discountId), coupons.now()) };
    },
  };
}
