/**
 * Tables of coupons and discounts (DESIGN §15). `times_redeemed` only ever goes up by one
 * conditional UPDATE (coupon-store.ts), which never takes it past max_redemptions. A discount's
 * subscription_id is NULL for a subject's discount (covering every subscription of the subject).
 */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, decimalColumn, idColumn, intColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface CouponRow {
  seq?: string;
  id: string;
  environment_id: string;
  name: string;
  percent_off: string | null;
  amount_currency: string | null;
  amount_off: string | null;
  duration: string;
  duration_in_months: number | null;
  max_redemptions: number | null;
  redeem_by: Date | null;
  applies_to_rate_codes: string[];
  times_redeemed: number;
  metadata: Record<string, string>;
  created_at: Date;
  archived_at: Date | null;
}

export interface DiscountRow {
  seq?: string;
  id: string;
  environment_id: string;
  coupon_id: string;
  subscription_id: string | null;
  subject_id: string;
  starts_at: Date;
  ends_at: Date | null;
  status: string;
  invoices_discounted: number;
  removed_at: Date | null;
  /** A "once" discount split by an upgrade: the invoice it is held for (migration 1795000000040). */
  held_for_invoice_id: string | null;
  /** What the upgrade's change lines took of a "once" amount off held for an invoice. */
  once_taken: string | null;
}

const nullableInt = { type: "int", nullable: true, default: null } as const;

export function couponsEntities(dialect: Dialect, exact: ExactText) {
  const Coupon = new EntitySchema<CouponRow>({
    name: "Coupon",
    tableName: "coupons",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      name: textColumn(100, false),
      percent_off: decimalColumn(dialect, true),
      amount_currency: textColumn(3),
      amount_off: decimalColumn(dialect, true),
      duration: textColumn(16, false),
      duration_in_months: { ...nullableInt },
      max_redemptions: { ...nullableInt },
      redeem_by: timeColumn(true),
      applies_to_rate_codes: jsonColumn(dialect),
      times_redeemed: intColumn(),
      metadata: jsonColumn(dialect),
      created_at: timeColumn(),
      archived_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_coupons_id", columns: ["id"] }],
    indices: [{ name: "ix_coupons_env_seq", columns: ["environment_id", "seq"] }],
    checks: dialect === "sqlite" ? [{ name: "ck_coupons_redemptions", expression: "max_redemptions IS NULL OR times_redeemed <= max_redemptions" }] : [],
  });

  const Discount = new EntitySchema<DiscountRow>({
    name: "Discount",
    tableName: "discounts",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      coupon_id: idColumn(),
      subscription_id: textColumn(32),
      subject_id: idColumn(),
      starts_at: timeColumn(),
      ends_at: timeColumn(true),
      status: textColumn(16, false),
      invoices_discounted: intColumn(),
      removed_at: timeColumn(true),
      held_for_invoice_id: textColumn(32),
      once_taken: decimalColumn(dialect, true),
    }),
    uniques: [{ name: "uq_discounts_id", columns: ["id"] }],
    indices: [
      { name: "ix_discounts_subscription", columns: ["subscription_id", "status"] },
      { name: "ix_discounts_subject", columns: ["subject_id", "status"] },
    ],
  });

  return { Coupon, Discount };
}
