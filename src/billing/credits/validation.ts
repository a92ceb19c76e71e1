/**
 * Input checks of the credit use cases (DESIGN §14), each violation named by its field path
 * (DESIGN §4): everything is checked before anything is written.
 *
 * Amounts of grants are whole numbers of the currency's smallest unit (> 0, at most 20 digits):
 * invoice lines and totals are whole units, so every application is one too and a grant's rest
 * is always spendable. Thresholds and top-up amounts are ≥ 0 (a top-up amount > 0), whole units
 * too.
 */
import { isCurrency } from "../currencies.js";
import type { Violations } from "../errors.js";
import { checkMetadata } from "../metadata.js";
import type { Metadata } from "../metadata.js";
import { type Decimal, amountProblem, formatDecimal, parseDecimal } from "../money.js";
import { RANGE_PROBLEM, inRange } from "../time.js";
import type { CallbackUrls } from "../subscriptions/checkout.js";
import { GRANT_CATEGORIES, GRANT_STATUSES, type GrantCategory, type GrantStatus } from "./types.js";

/** An amount as the wire gives it: `{currency_code, value}`. */
export interface AmountInput {
  currency: string;
  value: string;
}

export interface CreateGrantInput {
  /** The subject's ID or external ID. */
  subjectId: string;
  amount?: AmountInput;
  /** "" means the default (promotional). */
  category: string;
  priority?: number;
  effectiveAt?: Date;
  expiresAt?: Date;
  appliesToRateCodes: string[];
  metadata: Metadata;
  callbacks?: CallbackUrls;
}

export interface CheckedGrant {
  currency: string;
  amount: string;
  category: GrantCategory;
  priority: number;
  effectiveAt: Date | undefined;
  expiresAt: Date | null;
  appliesToRateCodes: string[];
  metadata: Metadata;
}

export const DEFAULT_PRIORITY = 50;

/** An ISO 4217 code, upper-cased; a violation at `field` otherwise. */
export function checkCurrency(code: string, field: string, v: Violations): string {
  const c = code.toUpperCase();
  if (code === "") v.add(field, "is required");
  else if (!isCurrency(c)) v.add(field, `${JSON.stringify(code)} is not an ISO 4217 currency code`);
  return c;
}

/** A whole number of smallest units, ≥ 0 (> 0 when `positive`), within the amount limits. */
export function checkWholeAmount(text: string, field: string, v: Violations, positive: boolean): string {
  const d: Decimal | undefined = text === "" ? undefined : parseDecimal(text);
  if (!d) {
    v.add(field, text === "" ? "is required" : "must be a decimal number");
    return "0";
  }
  const problem = amountProblem(d);
  if (problem) v.add(field, problem);
  else if (positive ? d.lte(0) : d.lt(0)) v.add(field, positive ? "must be greater than 0" : "must be at least 0");
  else if (!d.isInteger()) v.add(field, "must be a whole number of the currency's smallest unit");
  return formatDecimal(d);
}

export function checkPriority(p: number | undefined, field: string, v: Violations): number {
  if (p === undefined) return DEFAULT_PRIORITY;
  if (!Number.isInteger(p) || p < 1 || p > 100) v.add(field, "must be an integer from 1 to 100");
  return p;
}

function checkInstant(d: Date | undefined, field: string, v: Violations): void {
  if (d !== undefined && !inRange(d.getTime())) v.add(field, RANGE_PROBLEM);
}

/** Checks a create request's fields (the subject and the checkout are the use case's). */
export function checkGrant(input: CreateGrantInput, v: Violations): CheckedGrant {
  let currency = "";
  let amount = "0";
  if (!input.amount) v.add("amount", "is required");
  else {
    currency = checkCurrency(input.amount.currency, "amount.currency_code", v);
    amount = checkWholeAmount(input.amount.value, "amount.value", v, true);
  }
  const category = (input.category === "" ? "promotional" : input.category) as GrantCategory;
  if (!GRANT_CATEGORIES.includes(category)) v.add("category", `must be one of ${GRANT_CATEGORIES.join(", ")}`);
  const priority = checkPriority(input.priority, "priority", v);
  checkInstant(input.effectiveAt, "effective_at", v);
  checkInstant(input.expiresAt, "expires_at", v);
  checkRateCodes(input.appliesToRateCodes, v);
  checkMetadata(input.metadata, v.at("metadata"));
  return {
    currency,
    amount,
    category,
    priority,
    effectiveAt: input.effectiveAt,
    expiresAt: input.expiresAt ?? null,
    appliesToRateCodes: input.appliesToRateCodes,
    metadata: input.metadata,
  };
}

/** A list's status filter ("" : any). */
export function checkStatus(status: string, v: Violations): GrantStatus | undefined {
  if (status === "") return undefined;
  if (!(GRANT_STATUSES as readonly string[]).includes(status)) v.add("status", `must be one of ${GRANT_STATUSES.join(", ")}`);
  return status as GrantStatus;
}

/** A list of rate codes a grant or a coupon is limited to (`applies_to_rate_codes`): none empty, none twice. */
export function checkRateCodes(codes: readonly string[], v: Violations): void {
  const seen = new Set<string>();
  for (const [i, code] of codes.entries()) {
    if (code === "") v.add(`applies_to_rate_codes[${i}]`, "must not be empty");
    else if (seen.has(code)) v.add(`applies_to_rate_codes[${i}]`, `duplicate rate code ${JSON.stringify(code)}`);
    seen.add(code);
  }
}
