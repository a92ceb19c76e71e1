/**
 * Request bodies and readings for the golden cases of DESIGN §13 (tiered and percentage prices,
 * minimum and maximum per period, unique counts, mid-cycle changes, currencies), on top of
 * Scenario's public pieces: amounts in any currency, tiers, PATCH, invoices as lines with their
 * kinds, and the usage-equals-billing rule.
 */
import type { Scenario } from "./scenario.js";
import type { Json } from "./subjects-api.js";

/** An Amount in `currency` (smallest units). */
export const money = (value: string | number, currency = "USD") => ({ currency_code: currency, value });

/** A flat price in `currency`. */
export const flat = (value: string | number, currency = "USD") => ({ price_type: "flat", amount: money(value, currency) });

/** One tier: up to and including `upTo` (null: no bound), `unit` per unit, `flatFee` once when touched. */
export const tier = (upTo: string | number | null, unit: string | number, flatFee?: string | number, currency = "USD") => ({
  up_to: upTo,
  unit_amount: money(unit, currency),
  ...(flatFee === undefined ? {} : { flat_amount: money(flatFee, currency) }),
});

export const graduated = (...tiers: Json[]) => ({ price_type: "tiered", tiers_mode: "graduated", tiers });
export const volume = (...tiers: Json[]) => ({ price_type: "tiered", tiers_mode: "volume", tiers });

/** A percentage price, with a fee per counted event when `fee` is given. */
export const percentage = (percent: string, fee?: string | number) => ({
  price_type: "percentage",
  percent,
  ...(fee === undefined ? {} : { fixed_amount_per_event: money(fee) }),
});

/** A fixed rate with any price. */
export const fixedRate = (price: Json, code = "seats", name = "Seats") => ({ code, name, price });

/** A simple usage rate with any price and, optionally, a minimum and a maximum per period (USD). */
export const usageRate = (metric: string, price: Json, opts: { included?: number; code?: string; name?: string; min?: number; max?: number } = {}) => ({
  usage_based_rate_type: "simple",
  code: opts.code ?? "api",
  name: opts.name ?? "API calls",
  pricing_metric_id: metric,
  included_units: opts.included ?? 0,
  price,
  ...(opts.min === undefined ? {} : { minimum_amount: money(opts.min) }),
  ...(opts.max === undefined ? {} : { maximum_amount: money(opts.max) }),
});

/** `PATCH /subscriptions/{id}` (UpdateSubscription): its answer, or the error it gave. */
export async function patch(s: Scenario, id: string, body: Json): Promise<Json> {
  return s.call("PATCH", `/subscriptions/${id}`, body);
}

/**
 * A line as [rate, kind, quantity, unit price, amount]: rate is the first of `names` its
 * description contains (a loose match on the rate's name), else the description itself; with
 * EXACT, always the whole description (once it is pinned).
 */
export type PricedLine = [string, string, string, string, string];

export const EXACT = "exact";

export function lineOf(l: Json, names: readonly string[] | typeof EXACT): PricedLine {
  const desc = String(l.description);
  const rate = names === EXACT ? desc : (names.find((n) => desc.includes(n)) ?? desc);
  return [rate, l.kind, String(l.quantity), l.price_in_unit_amount.value, l.amount.value];
}

/** The subject's invoices as [status, total, lines], oldest first, with lines read by `lineOf`. */
export async function priced(s: Scenario, names: readonly string[] | typeof EXACT = ["Seats", "API calls"]): Promise<[string, string, PricedLine[]][]> {
  return (await s.invoices()).map((i) => [i.status, i.total_amount.value, (i.line_items as Json[]).map((l) => lineOf(l, names))]);
}

/** The subject's invoices as [amount due, the amount of each credit applied], oldest first (DESIGN §14). */
export async function due(s: Scenario): Promise<[string, string[]][]> {
  return (await s.invoices()).map((i) => [i.amount_due.value, (i.credits_applied as Json[]).map((c) => c.amount.value)]);
}

/** Every line description of the subject's invoices, oldest first. */
export async function descriptions(s: Scenario): Promise<string[][]> {
  return (await s.invoices()).map((i) => (i.line_items as Json[]).map((l) => String(l.description)));
}

/** The metric's value for the subject over [start, end) (one bucket), "0" when no events. */
export async function summaryValue(s: Scenario, metric: string, start: string, end: string): Promise<string> {
  const summary = await s.call("POST", `/pricing-metrics/${metric}/summary`, { subject_id: s.subjectId, period: { start, end } });
  return String(summary[0]?.value ?? "0");
}

/** The metric's values for the subject by day over [start, end), days without events left out. */
export async function dailyValues(s: Scenario, metric: string, start: string, end: string): Promise<string[]> {
  const summary = await s.call("POST", `/pricing-metrics/${metric}/summary`, { subject_id: s.subjectId, period: { start, end }, period_granularity: "day" });
  return (summary as Json[]).filter((x) => x.value !== null).map((x) => String(x.value));
}

const SCALE = 10n ** 12n;

/** Exact decimal text to units of 10⁻¹², for sums in tests without JS numbers. */
function scaled(text: string): bigint {
  const neg = text.startsWith("-");
  const [int = "0", frac = ""] = (neg ? text.slice(1) : text).split(".");
  const v = BigInt(int) * SCALE + BigInt((frac + "0".repeat(12)).slice(0, 12));
  return neg ? -v : v;
}

function unscaled(v: bigint): string {
  const neg = v < 0n;
  const a = neg ? -v : v;
  const frac = (a % SCALE).toString().padStart(12, "0").replace(/0+$/, "");
  return `${neg ? "-" : ""}${a / SCALE}${frac ? `.${frac}` : ""}`;
}

/** Exact sum of decimal texts. */
export function sumText(values: readonly string[]): string {
  return unscaled(values.reduce((acc, v) => acc + scaled(v), 0n));
}

/** min(a, b) of decimal texts. */
export function minText(a: string, b: string): string {
  return scaled(a) <= scaled(b) ? a : b;
}

/**
 * The usage-equals-billing rule for one usage window [start, end): the quantities of the lines
 * `pick` chooses (of kind "usage", on the invoice whose usage window it is), plus the included
 * units the period consumed (min(included, used)), against the metric's summary for the window.
 * Returns [shown, billed]; a case asserts they are equal.
 */
export async function usageAndBilled(s: Scenario, metric: string, start: string, end: string, pick: (line: Json) => boolean, included = "0"): Promise<[string, string]> {
  const shown = await summaryValue(s, metric, start, end);
  const quantities: string[] = [];
  for (const inv of await s.invoices()) {
    if (inv.usage_period_start !== start || inv.usage_period_end !== end) continue;
    for (const l of inv.line_items as Json[]) if (l.kind === "usage" && pick(l)) quantities.push(String(l.quantity));
  }
  return [shown, sumText([...quantities, minText(included, shown)])];
}

/** The hosted page of an invoice, fetched from the test server by its path. */
export async function hostedPage(s: Scenario, invoice: Json): Promise<string> {
  return (await fetch(`${s.server.url}${new URL(invoice.hosted_url).pathname}`)).text();
}
