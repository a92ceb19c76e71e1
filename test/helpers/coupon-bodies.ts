/** Coupon scenarios over the public API (DESIGN §15): plans with fixed rates, coupons, and what invoices show. */
import { reasonOf } from "./clients.js";
import { CARD_OK, type Scenario } from "./scenario.js";
import type { Json } from "./subjects-api.js";

export const JAN = "2026-01-15T00:00:00Z";
export const FEB = "2026-02-15T00:00:00Z";
export const MAR = "2026-03-15T00:00:00Z";
export const APR = "2026-04-15T00:00:00Z";

export const usd = (value: string | number) => ({ currency_code: "USD", value: String(value) });

/** A monthly plan of fixed rates billed in advance, USD cents: base 1000 (and addon 500 with `addon`). */
export function plan(s: Scenario, addon = false): Promise<string> {
  const fixed_rates = [{ code: "base", name: "Base", price: { price_type: "flat", amount: usd(1000) } }];
  if (addon) fixed_rates.push({ code: "addon", name: "Add-on", price: { price_type: "flat", amount: usd(500) } });
  return s.card({ fixed_rates });
}

export async function coupon(s: Scenario, body: Json): Promise<Json> {
  return s.call("POST", "/coupons", { name: "Promo", duration: "once", ...body });
}

/** Subscribes to `card` (a hosted checkout paid with the test card when no card is on file); its ID. */
export async function subscribe(s: Scenario, card: string, extra: Json = {}, addon = false): Promise<string> {
  const r = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: addon ? { base: 1, addon: 1 } : { base: 1 }, ...extra }, CARD_OK);
  if (!r.subscription) throw new Error(`not subscribed: ${JSON.stringify(r)}`);
  return r.subscription.id;
}

/** The subject's invoices as [total, total_discount, [coupon name, amount][]], oldest first. */
export async function discounted(s: Scenario): Promise<[string, string, [string, string][]][]> {
  return (await s.invoices()).map((i) => [i.total_amount.value, i.total_discount.value, i.discounts.map((d: Json) => [d.name, d.amount.value])]);
}

/** A refused call: [HTTP status, ErrorInfo reason]. */
export async function refused(s: Scenario, method: string, path: string, body?: unknown): Promise<[number, string | undefined]> {
  const r = await s.raw(method, path, body);
  return [r.status, reasonOf(r.body as Json)];
}
