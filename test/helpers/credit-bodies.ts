/**
 * Request bodies and readings for the golden cases of DESIGN §14 (credit grants, the credit
 * ledger, credit settings, credits applied to invoices, minimum commitments), on top of
 * Scenario's public pieces. Grants are named by a `name` metadata key so that a case reads
 * credits_applied as [name, amount] rather than as generated ids.
 */
import { money, sumText } from "./price-bodies.js";
import type { Scenario } from "./scenario.js";
import type { Json } from "./subjects-api.js";

export const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };

/** A grant body: `name` goes into metadata; the rest (category, priority, dates, codes) as given. */
export function grantBody(name: string, value: string | number, opts: Json = {}, currency = "USD"): Json {
  const { metadata, ...rest } = opts;
  return { amount: money(value, currency), metadata: { name, ...metadata }, ...rest };
}

/** `POST /credit-grants` for the scenario's subject: the whole answer (credit_grant, checkout_url). */
export function createGrant(s: Scenario, name: string, value: string | number, opts: Json = {}, currency = "USD"): Promise<Json> {
  return s.call("POST", "/credit-grants", { subject_id: s.subjectId, ...grantBody(name, value, opts, currency) });
}

/** A promotional grant; its id. */
export async function promo(s: Scenario, name: string, value: string | number, opts: Json = {}, currency = "USD"): Promise<string> {
  return (await createGrant(s, name, value, { category: "promotional", ...opts }, currency)).credit_grant.id;
}

/** A paid grant (bought through the service, with checkout callbacks in case no card is on file). */
export function paid(s: Scenario, name: string, value: string | number, opts: Json = {}, currency = "USD"): Promise<Json> {
  return createGrant(s, name, value, { category: "paid", checkout_callback_urls: CALLBACKS, ...opts }, currency);
}

/** The subject's grants, in creation order. */
export async function grants(s: Scenario, status = ""): Promise<Json[]> {
  const q = status ? `&status=${status}` : "";
  return (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&limit=100${q}`)).credit_grants;
}

/** A grant's `name` metadata; a grant the service made itself (an automatic top-up) by its category. */
export function grantName(g: Json): string {
  return String(g.metadata?.name ?? g.category);
}

/** Each grant as [name, status, amount, remaining]. */
export async function grantStates(s: Scenario): Promise<[string, string, string, string][]> {
  return (await grants(s)).map((g) => [grantName(g), g.status, g.amount.value, g.remaining_amount.value]);
}

/** A grant by id, as [name, status, amount, remaining]. */
export async function grantState(s: Scenario, id: string): Promise<[string, string, string, string]> {
  const g = await s.call("GET", `/credit-grants/${id}`);
  return [grantName(g), g.status, g.amount.value, g.remaining_amount.value];
}

/** The subject's ledger, oldest first, as [entry_type, signed amount] (one currency, or all). */
export async function ledger(s: Scenario, currency = ""): Promise<[string, string][]> {
  const q = currency ? `&currency_code=${currency}` : "";
  const r = await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100${q}`);
  return (r.entries as Json[]).map((e) => [e.entry_type, e.amount.value]);
}

/**
 * An invoice as [status, total, credits_applied as [grant name, amount], amount_due], with the
 * grant names of the subject's grants (ids of grants not found are kept as they are).
 */
export type CreditedInvoice = [string, string, [string, string][], string];

export async function credited(s: Scenario): Promise<CreditedInvoice[]> {
  const names = new Map((await grants(s)).map((g) => [g.id as string, grantName(g)]));
  return (await billed(s)).map((i) => [
    i.status,
    i.total_amount.value,
    ((i.credits_applied ?? []) as Json[]).map((c) => [names.get(c.credit_grant_id) ?? c.credit_grant_id, c.amount.value] as [string, string]),
    i.amount_due.value,
  ]);
}

/** The subject's invoices with at least one line (an empty zero invoice is internal), oldest first. */
export async function billed(s: Scenario): Promise<Json[]> {
  return (await s.invoices()).filter((i) => (i.line_items as Json[]).length > 0);
}

/** The kinds and amounts of an invoice's lines, [kind, amount][]. */
export function kinds(invoice: Json): [string, string][] {
  return (invoice.line_items as Json[]).map((l) => [l.kind, l.amount.value]);
}

/** Billing state's credit fields for one currency: [credit_balance, available_credit] ("0" when absent). */
export async function creditState(s: Scenario, currency = "USD"): Promise<[string, string]> {
  const state = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
  const pick = (list: Json[] | undefined) => String((list ?? []).find((a) => a.currency_code === currency)?.value ?? "0");
  return [pick(state.credit_balance), pick(state.available_credit)];
}

/**
 * Subscribes the subject to `rateCard` through a hosted checkout paid with `cardNumber`, which
 * puts that card on file (a checkout subscribes even to a free plan). Returns the redirect status.
 */
export async function checkoutWithCard(s: Scenario, rateCard: string, cardNumber: string): Promise<number> {
  const session = await s.call("POST", "/checkout", { checkout_callback_urls: CALLBACKS, rate_card_id: rateCard, subject_id: s.subjectId });
  return (await s.payCheckout(session.url, cardNumber)).status;
}

/** PUT the subject's credit settings for a currency. */
export function settings(s: Scenario, body: Json, currency = "USD"): Promise<Json> {
  return s.call("PUT", `/subjects/${s.subjectId}/credit-settings`, { currency_code: currency, ...body });
}

/** The environment's events of these types, oldest first, by type. */
export async function eventTypes(s: Scenario, types: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  let after = "";
  for (;;) {
    const r = await s.call("GET", `/events?limit=100${after ? `&after=${after}` : ""}`);
    const events = r.events as Json[];
    for (const e of events) if (types.includes(e.type)) out.push(e.type);
    if (!r.has_more || events.length === 0) return out;
    after = events.at(-1)?.id;
  }
}

/** Polls `read` until `done` holds of its value (or about 5 s pass); returns the last value. */
export async function eventually<T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  let v = await read();
  for (let i = 0; i < 50 && !done(v); i++) {
    await new Promise((r) => setTimeout(r, 100));
    v = await read();
  }
  return v;
}

/** Sums of the ledger's amounts by entry type, and the whole balance. */
export function ledgerSums(entries: readonly [string, string][]): Record<string, string> {
  const byType: Record<string, string[]> = {};
  for (const [type, value] of entries) (byType[type] ??= []).push(value);
  const sums = Object.entries(byType).map(([type, values]) => [type, sumText(values)]);
  return Object.fromEntries([...sums, ["balance", sumText(entries.map(([, v]) => v))]]);
}
