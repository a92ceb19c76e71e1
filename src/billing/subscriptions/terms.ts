/**
 * A subscription's terms (fixed-rate quantities and rate multipliers) checked against its rate
 * card and the card's catalog add-ons, and the rule that nothing accepted may fail later for its
 * size (DESIGN §6).
 */
import { type ChargedRates, chargedRates, offeredAddOns } from "../catalog/addons.js";
import { isFreePrice, largestUnitAmount } from "../catalog/prices.js";
import type { RateCard } from "../catalog/types.js";
import type { Violations } from "../errors.js";
import { type Line, total } from "../invoicing/lines.js";
import { ZERO, amountProblem, formatDecimal, parseDecimal, storageProblem, unitAmountProblem } from "../money.js";
import type { Caller } from "../tenancy.js";
import { multiplierOf } from "./invoice-building.js";
import type { Lookups } from "./lookups.js";
import type { Subscription, TimelineItem } from "./types.js";

function checkDecimals(map: Record<string, string>, v: Violations): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, raw] of Object.entries(map)) {
    const d = parseDecimal(raw);
    if (!d) v.add(k, "must be a decimal number");
    else if (d.isNegative() && !d.isZero()) v.add(k, "must be at least 0");
    else if (storageProblem(d)) v.add(k, storageProblem(d) as string);
    else out[k] = formatDecimal(d);
  }
  return out;
}

export class Terms {
  constructor(private readonly lookups: Lookups) {}

  private get engine() {
    return this.lookups.engine;
  }

  /** Checks quantities and multipliers against the card (and its catalog add-ons). */
  async checkTerms(card: RateCard, quantitiesIn: Record<string, string>, multipliersIn: Record<string, string>, v: Violations) {
    const quantities = checkDecimals(quantitiesIn, v.at("fixed_rate_quantities"));
    const multipliers = checkDecimals(multipliersIn, v.at("rate_price_multipliers"));
    const catalogRates = card.rateCatalogId ? await this.engine.reads.catalogs.ratesFor(card.environmentId, card.rateCatalogId, card.billingInterval) : [];
    const addOns = offeredAddOns(card, catalogRates);
    const fixedCodes = new Set(card.fixedRates.map((r) => r.code));
    const addOnCodes = new Set(addOns.map((r) => r.rate.code));
    const allCodes = new Set([...fixedCodes, ...card.usageRates.map((r) => r.code), ...addOnCodes]);
    const missing = card.fixedRates.filter((r) => !(r.code in quantitiesIn)).map((r) => r.code);
    if (missing.length > 0) v.add("fixed_rate_quantities", `every fixed rate needs a quantity; missing: ${missing.join(", ")}`);
    for (const code of Object.keys(quantitiesIn)) {
      if (!fixedCodes.has(code) && !addOnCodes.has(code)) v.at("fixed_rate_quantities").add(code, "is not a fixed rate of the rate card or of its catalog");
    }
    for (const code of Object.keys(multipliersIn)) {
      if (!allCodes.has(code)) v.at("rate_price_multipliers").add(code, "is not a rate code of the rate card");
    }
    // The rates charged at these terms, from the catalog rates looked up above (once).
    const rates = chargedRates(card, catalogRates, quantities);
    if (v.empty) {
      this.checkBillable(rates, { fixedRateQuantities: quantities, rateMultipliers: multipliers }, (kind, code, message) =>
        kind === "total" ? v.add("fixed_rate_quantities", message) : v.at(kind === "fixed" ? "fixed_rate_quantities" : "rate_price_multipliers").add(code, message),
      );
    }
    return { quantities, multipliers, rates };
  }

  /**
   * Whether a card's charged `rates` at `terms` can always be invoiced (DESIGN §6: nothing
   * accepted may fail later for its size): each fixed charge and a cycle's fixed total below
   * 10^53 smallest units, and each usage rate's price × multiplier below 10^20 per unit.
   * For a tiered price the bound is its largest unit or flat amount (a flat amount is charged
   * once, as a line of quantity 1); for a percentage price percent/100 (per smallest unit of the
   * sum) or its fee per event (largestUnitAmount). Either way every usage line is below 10^53
   * (usage totals stay below 10^33). Minimums and maximums are input amounts (below 10^20), not
   * scaled by the multiplier, so they need no check here. Reports each problem found.
   */
  checkBillable(rates: ChargedRates, terms: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">, report: (kind: "fixed" | "usage" | "total", code: string, message: string) => void): void {
    const lines: Line[] = [];
    let ok = true;
    for (const rate of rates.fixed) {
      for (const l of this.engine.builder.fixedLinesOf([rate], terms)) {
        const problem = amountProblem(l.amount);
        if (problem) {
          report("fixed", rate.code, `its charge (quantity × price × multiplier) ${problem}`);
          ok = false;
        }
        lines.push(l);
      }
    }
    const problem = ok ? amountProblem(total(lines)) : undefined;
    if (problem) report("total", "", `the fixed charges of one cycle ${problem}`);
    for (const rate of rates.usage) {
      const prices = rate.type === "simple" ? [rate.price] : rate.cells.map((c) => c.price);
      const m = multiplierOf(terms, rate.code);
      const largest = prices.reduce((acc, p) => (largestUnitAmount(p).gt(acc) ? largestUnitAmount(p) : acc), ZERO);
      const unitProblem = unitAmountProblem(largest.times(m));
      if (unitProblem) report("usage", rate.code, unitProblem);
    }
  }

  /** Whether any of these timeline items has a fixed charge (needs a payment). */
  async anyPaidItem(caller: Caller, items: TimelineItem[]): Promise<boolean> {
    for (const item of items) {
      const card = await this.lookups.cardOf(caller, item.rateCardId);
      const { fixed } = await this.engine.reads.rates(card, item.fixedRateQuantities);
      if (fixed.some((r) => !isFreePrice(r.price))) return true;
    }
    return false;
  }
}
