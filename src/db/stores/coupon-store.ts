/** Storage of coupons and discounts (DESIGN §15). */
import type { EntityManager } from "typeorm";
import type { BookingDiscount } from "../../billing/coupons/types.js";
import type { Invoice } from "../../billing/subscriptions/types.js";

/** The discounts that apply to `inv` finalized at `at`, in the order they apply. */
export async function discountsFor(_em: EntityManager, _inv: Invoice, _at: Date): Promise<BookingDiscount[]> {
  return [];
}

/** Records that these discounts discounted `invoiceId`. */
export async function recordDiscounted(_em: EntityManager, _discountIds: string[], _invoiceId: string, _at: Date): Promise<void> {}
