/**
 * Coupons (DESIGN §15) over their store: the coupon use cases, and the subscription use cases told
 * of them (a coupon_id on create is checked before anything is written).
 */
import { Coupons } from "../billing/coupons/coupons.js";
import type { EventEncoder } from "../billing/events/types.js";
import type { Lookups } from "../billing/subscriptions/lookups.js";
import type { Subscriptions } from "../billing/subscriptions/subscribe.js";
import type { Database } from "../db/datasource.js";
import { SqlCouponStore } from "../db/stores/coupon-store.js";

export function wireCoupons(db: Database, encode: EventEncoder, lookups: Lookups, subscriptions: Subscriptions): Coupons {
  const coupons = new Coupons(new SqlCouponStore(db.sql, db.entities, encode), lookups);
  subscriptions.coupons = coupons;
  return coupons;
}
