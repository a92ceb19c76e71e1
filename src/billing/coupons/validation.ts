/**
 * Input checks of a new coupon (DESIGN §15), each violation named by its field path: everything is
 * checked before anything is written. A percent is an exact decimal in (0, 100] with at most 4
 * decimal places; an amount is a positive whole number of the smallest unit of a known currency.
 */
import { checkCurrency, checkRateCodes, checkWholeAmount } from "../credits/validation.js";
import type { Violations } from "../errors.js";
import { type Metadata, checkMetadata } from "../metadata.js";
import { dec, formatDecimal, parseDecimal, storageProblem } from "../money.js";
import { checkInstant } from "../time.js";
import { COUPON_DURATIONS, type CouponDuration } from "./types.js";

export const NAME_MAX = 100;
export const MONTHS_MAX = 120;

export interface CreateCouponInput {
  name: string;
  percentOff?: string;
  amountOff?: { currency: string; value: string };
  duration: string;
  durationInMonths?: number;
  maxRedemptions?: number;
  redeemBy?: Date;
  appliesToRateCodes: string[];
  metadata: Metadata;
}

export interface CheckedCoupon {
  name: string;
  percentOff: string | null;
  amountOff: { currency: string; value: string } | null;
  duration: CouponDuration;
  durationInMonths: number | null;
  maxRedemptions: number | null;
  redeemBy: Date | null;
  appliesToRateCodes: string[];
  metadata: Metadata;
}

function checkPercent(text: string, v: Violations): string {
  const d = parseDecimal(text);
  if (!d) {
    v.add("percent_off", "must be a decimal number");
    return "0";
  }
  if (d.lte(0) || d.gt(100)) v.add("percent_off", "must be greater than 0 and at most 100");
  else if (d.decimalPlaces() > 4) v.add("percent_off", "must have at most 4 decimal places");
  return formatDecimal(d);
}

function checkDuration(input: CreateCouponInput, v: Violations): { duration: CouponDuration; months: number | null } {
  const duration = input.duration as CouponDuration;
  if (input.duration === "") v.add("duration", `is required: one of ${COUPON_DURATIONS.join(", ")}`);
  else if (!COUPON_DURATIONS.includes(duration)) v.add("duration", `must be one of ${COUPON_DURATIONS.join(", ")}`);
  const m = input.durationInMonths;
  if (duration === "repeating") {
    if (m === undefined) v.add("duration_in_months", 'is required for a "repeating" coupon');
    else if (!Number.isInteger(m) || m < 1 || m > MONTHS_MAX) v.add("duration_in_months", `must be an integer from 1 to ${MONTHS_MAX}`);
  } else if (m !== undefined) v.add("duration_in_months", 'is only for a "repeating" coupon');
  return { duration, months: duration === "repeating" ? (m ?? null) : null };
}

/** Checks a create request's fields. */
export function checkCoupon(input: CreateCouponInput, v: Violations): CheckedCoupon {
  const length = [...input.name].length;
  if (length === 0) v.add("name", "is required");
  else if (length > NAME_MAX) v.add("name", `must be at most ${NAME_MAX} characters`);
  let percentOff: string | null = null;
  let amountOff: { currency: string; value: string } | null = null;
  if (input.percentOff !== undefined && input.amountOff !== undefined) v.add("percent_off", "cannot be set together with amount_off");
  else if (input.percentOff === undefined && input.amountOff === undefined) v.add("percent_off", "exactly one of percent_off and amount_off is required");
  else if (input.percentOff !== undefined) percentOff = checkPercent(input.percentOff, v);
  else if (input.amountOff !== undefined) {
    const value = checkWholeAmount(input.amountOff.value, "amount_off.value", v, true);
    const tooLong = storageProblem(dec(value));
    if (tooLong) v.add("amount_off.value", tooLong);
    amountOff = { currency: checkCurrency(input.amountOff.currency, "amount_off.currency_code", v), value };
  }
  const { duration, months } = checkDuration(input, v);
  const max = input.maxRedemptions;
  if (max !== undefined && (!Number.isInteger(max) || max < 1)) v.add("max_redemptions", "must be at least 1");
  const redeemBy = checkInstant(input.redeemBy, v, "redeem_by") ?? null;
  checkRateCodes(input.appliesToRateCodes, v);
  checkMetadata(input.metadata, v.at("metadata"));
  return {
    name: input.name,
    percentOff,
    amountOff,
    duration,
    durationInMonths: months,
    maxRedemptions: max ?? null,
    redeemBy,
    appliesToRateCodes: input.appliesToRateCodes,
    metadata: input.metadata,
  };
}
