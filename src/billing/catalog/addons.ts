/**
 * How a rate card with `rate_catalog_id` offers and bills the catalog's rates.
 *
 * The spec says "rates from the catalog with quantity greater than 1 are included". We read it as:
 * the catalog's rates of the card's billing interval are optional add-ons of the card. A
 * subscription takes an add-on by giving its code a quantity of at least 1 in
 * `fixed_rate_quantities`; a quantity of 0, or no quantity, leaves it out. A fixed add-on is then
 * charged quantity × price (× multiplier) in advance like the card's own fixed rates; a
 * usage-based add-on is billed from usage in arrears like the card's own usage rates. A rate of
 * the card itself wins over a catalog rate with the same code. Catalog rates of the other
 * interval are never included.
 */
import { parseDecimal } from "../money.js";
import type { CatalogRate, FixedRate, RateCard, UsageRate } from "./types.js";

export interface ChargedRates {
  fixed: FixedRate[];
  usage: UsageRate[];
}

/** The catalog add-ons a card offers: catalog rates of its interval whose code the card does not use. */
export function offeredAddOns(card: RateCard, catalogRates: readonly CatalogRate[]): CatalogRate[] {
  const own = new Set([...card.fixedRates.map((r) => r.code), ...card.usageRates.map((r) => r.code)]);
  return catalogRates.filter((r) => r.catalogId === card.rateCatalogId && r.interval === card.billingInterval && !own.has(r.rate.code));
}

/** The rates a subscription to `card` is charged for, given its fixed-rate quantities. */
export function chargedRates(card: RateCard, catalogRates: readonly CatalogRate[], quantities: Readonly<Record<string, string>>): ChargedRates {
  const fixed = [...card.fixedRates];
  const usage = [...card.usageRates];
  for (const addOn of offeredAddOns(card, catalogRates)) {
    const q = quantities[addOn.rate.code];
    const d = q === undefined ? undefined : parseDecimal(q);
    if (!d || d.lt(1)) continue;
    if (addOn.type === "fixed") fixed.push(addOn.rate);
    else usage.push(addOn.rate);
  }
  return { fixed, usage };
}
