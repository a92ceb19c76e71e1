/**
 * Request bodies and readings for the golden cases of DESIGN §15 (invoices finance can book):
 * tax rates, coupons and discounts, buyers' billing details, credit notes, and an invoice read
 * as its booked fields (lines with their discounts and taxes, subtotal, total_discount,
 * total_tax, total_amount, discounts, tax_amounts, notes, credits_applied, amount_due,
 * amount_credited, number), on top of Scenario's public pieces. Discounts and taxes are read by
 * their names (the coupon's name, the rate's display name) rather than by generated ids.
 */
import { billed } from "./credit-bodies.js";
import { flat, money, usageRate } from "./price-bodies.js";
import type { Scenario } from "./scenario.js";
import type { Json } from "./subjects-api.js";

/** `POST /tax-rates`; its id. */
export async function taxRate(s: Scenario, displayName: string, percentage: string, opts: Json = {}): Promise<string> {
  return (await s.call("POST", "/tax-rates", { display_name: displayName, percentage, ...opts })).id;
}

/** A percent coupon's body. */
export const percentOff = (percent: string, duration = "forever", months?: number) => ({ percent_off: percent, duration, ...(months === undefined ? {} : { duration_in_months: months }) });

/** An amount coupon's body (smallest units of `currency`). */
export const amountOff = (value: string | number, duration = "forever", months?: number, currency = "USD") => ({
  amount_off: money(value, currency),
  duration,
  ...(months === undefined ? {} : { duration_in_months: months }),
});

/** `POST /coupons`; its id. */
export async function coupon(s: Scenario, name: string, body: Json): Promise<string> {
  return (await s.call("POST", "/coupons", { name, ...body })).id;
}

/** `POST /subscriptions/{id}/discounts`: the discount. */
export function discount(s: Scenario, subscriptionId: string, couponId: string): Promise<Json> {
  return s.call("POST", `/subscriptions/${subscriptionId}/discounts`, { coupon_id: couponId });
}

/** Replaces the subject's billing details (`PUT /subjects/{id}`). */
export function buyer(s: Scenario, details: Json, subjectId = s.subjectId): Promise<Json> {
  return s.call("PUT", `/subjects/${subjectId}`, { billing_details: { tax_exempt: "none", ...details } });
}

/** A German business buyer (country DE, with a VAT ID). */
export const GERMAN_BUYER = { legal_name: "Kunde GmbH", address: { line1: "Hauptstr. 1", city: "Berlin", postal_code: "10115", country: "DE" }, tax_ids: [{ type: "eu_vat", value: "DE123456789" }] };

let seq = 0;
const run = Math.random().toString(36).slice(2, 8);

/** `n` units of the `event` metric for the subject at `at` (idempotency keys unique in the run). */
export async function use(s: Scenario, at: string, n: string, event = "usage", subjectId = s.subjectId): Promise<void> {
  const events = [{ idempotency_key: `bk-${run}-${seq++}`, subject_id: subjectId, event_name: event, timestamp: at, data: { n } }];
  const r = await s.call("POST", "/usage-events/batch", { events });
  if (r.rejected > 0) throw new Error(`events rejected: ${JSON.stringify(r.results)}`);
}

/** The API plan: "API calls" (code api) at `price` per unit of "usage", in `currency`, with these default tax rates. */
export async function apiPlan(s: Scenario, opts: { price?: string | number; currency?: string; taxes?: string[] } = {}): Promise<string> {
  const m = await s.metric();
  return s.card({ usage_based_rates: [usageRate(m, flat(opts.price ?? 10, opts.currency ?? "USD"))], default_tax_rate_ids: opts.taxes ?? [] });
}

/** Two rates: "API calls" (api, 10 per unit of "usage") and "Storage" (storage, 5 per unit of "store"). */
export async function twoRatePlan(s: Scenario, taxes: string[] = []): Promise<string> {
  const calls = await s.metric();
  const stored = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "store");
  return s.card({ usage_based_rates: [usageRate(calls, flat(10)), usageRate(stored, flat(5), { code: "storage", name: "Storage" })], default_tax_rate_ids: taxes });
}

/** Subscribes the subject (a free plan: no checkout); the subscription's id. */
export async function subscribe(s: Scenario, card: string, body: Json = {}): Promise<string> {
  return (await s.subscribe({ rate_card_id: card, ...body })).subscription.id;
}

/** A line: [rate name, amount, discount_amounts as [name, amount], tax_amounts as [display name, taxable, amount]]. */
export type BookedLine = [string, string, [string, string][], [string, string, string][]];

/** An invoice's booked fields, amounts as their values (the currency is checked once, in `currency`). */
export interface Booked {
  number: string;
  status: string;
  currency: string;
  lines: BookedLine[];
  subtotal: string;
  total_discount: string;
  total_tax: string;
  total: string;
  discounts: [string, string][];
  /** [display name, percentage, inclusive, taxable, amount] */
  tax_amounts: [string, string, boolean, string, string][];
  notes: string[];
  credits: string[];
  due: string;
  credited: string;
}

const NAMES = ["API calls", "Storage"];

/** Every amount of the invoice in one currency: its currency, else "mixed". */
function currencyOf(i: Json): string {
  const amounts: Json[] = [i.total_amount, i.subtotal, i.total_discount, i.total_tax, i.amount_due, i.amount_credited];
  for (const l of i.line_items as Json[]) amounts.push(l.amount, ...(l.discount_amounts ?? []).map((d: Json) => d.amount), ...(l.tax_amounts ?? []).flatMap((t: Json) => [t.amount, t.taxable_amount]));
  const codes = new Set(amounts.map((a) => a?.currency_code));
  return codes.size === 1 ? String([...codes][0]) : `mixed ${[...codes].join(",")}`;
}

export function bookedOf(i: Json): Booked {
  const desc = (l: Json) => NAMES.find((n) => String(l.description).includes(n)) ?? String(l.description);
  return {
    number: i.number,
    status: i.status,
    currency: currencyOf(i),
    lines: (i.line_items as Json[]).map((l) => [
      desc(l),
      l.amount.value,
      ((l.discount_amounts ?? []) as Json[]).map((d) => [d.name, d.amount.value] as [string, string]),
      ((l.tax_amounts ?? []) as Json[]).map((t) => [t.display_name, t.taxable_amount.value, t.amount.value] as [string, string, string]),
    ]),
    subtotal: i.subtotal.value,
    total_discount: i.total_discount.value,
    total_tax: i.total_tax.value,
    total: i.total_amount.value,
    discounts: ((i.discounts ?? []) as Json[]).map((d) => [d.name, d.amount.value]),
    tax_amounts: ((i.tax_amounts ?? []) as Json[]).map((t) => [t.display_name, String(t.percentage), t.inclusive, t.taxable_amount.value, t.amount.value]),
    notes: i.notes ?? [],
    credits: ((i.credits_applied ?? []) as Json[]).map((c) => c.amount.value),
    due: i.amount_due.value,
    credited: i.amount_credited.value,
  };
}

/** The subject's invoices with lines (an empty one is internal), oldest first, booked. */
export async function booked(s: Scenario): Promise<Booked[]> {
  return (await billed(s)).map(bookedOf);
}

/**
 * An expected invoice: what is not given is its plain value (no discount, no tax, no note, no
 * credit, nothing credited, amount_due = total, USD, status open).
 */
export function want(w: Pick<Booked, "number" | "lines" | "subtotal" | "total"> & Partial<Booked>): Booked {
  return {
    status: "open",
    currency: "USD",
    total_discount: "0",
    total_tax: "0",
    discounts: [],
    tax_amounts: [],
    notes: [],
    credits: [],
    due: w.total,
    credited: "0",
    ...w,
  };
}

/** A line with no discount and no tax. */
export const plain = (name: string, amount: string): BookedLine => [name, amount, [], []];

/** `POST /credit-notes` against `invoiceId` (reason "other" unless given); the credit note. */
export function creditNote(s: Scenario, invoiceId: string, outcome: string, body: Json = {}): Promise<Json> {
  return s.call("POST", "/credit-notes", { invoice_id: invoiceId, reason: "other", outcome, ...body });
}

/** A credit note as [number, outcome, subtotal, total_tax, total, lines as [index, amount, tax]]. */
export function noteOf(n: Json): [string, string, string, string, string, [number | null, string, string][]] {
  return [
    n.number,
    n.outcome,
    n.subtotal.value,
    n.total_tax.value,
    n.total.value,
    (n.lines as Json[]).map((l) => [l.invoice_line_index ?? null, l.amount.value, l.tax_amount.value] as [number | null, string, string]),
  ];
}

/** The subject's invoices with lines, as the JSON the API gave. */
export { billed };
