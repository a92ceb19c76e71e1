/**
 * The lines of an upgrade of rate card as a change invoices them (changes.ts switchPlan): the
 * sides' fixed charges per rate read from their cards, and the credit for the old card valued at
 * what the current period's invoices took for its fixed charges (change-lines.ts, the pure part).
 */
import type { RateCard } from "../catalog/types.js";
import { type Decimal, ZERO, displayMoney, formatDecimal } from "../money.js";
import { type ChangeSide, changeChargeOf, upgradeLines } from "./change-lines.js";
import type { BillingEngine } from "./engine.js";
import type { BillLine } from "./invoice-building.js";
import { cycleCharge, type TermsOf } from "./proration.js";
import type { Subscription } from "./types.js";
import { taxCreditedIn } from "./unused-credit.js";

/** One side of an upgrade: the card and the terms its fixed charges are priced at. */
export type PricedSide = [card: RateCard, terms: TermsOf];

/** `side` with its fixed charges per cycle in all and per rate, as the engine prices them (proration.ts cycleCharge over its fixed lines). */
async function perRate(engine: Pick<BillingEngine, "reads" | "builder">, [card, terms]: PricedSide): Promise<ChangeSide> {
  const fixed = (await engine.reads.rates(card, terms.fixedRateQuantities)).fixed;
  const rates = fixed.map((r) => ({ code: r.code, name: r.name, fixed: cycleCharge(engine.builder.fixedLinesOf([r], terms)) }));
  return { card, fixed: rates.reduce((a, r) => a.plus(r.fixed), ZERO), rates };
}

/**
 * The credit for `from` and the charge for `to` of `s`'s upgrade (prorated to `part`, or the whole
 * period): the credit valued at what `s`'s current period's invoices took (change-lines.ts).
 */
export async function pricedUpgradeLines(
  engine: Pick<BillingEngine, "reads" | "builder" | "stores">,
  s: Subscription,
  from: PricedSide,
  to: PricedSide,
  part: { left: number; span: number } | null,
): Promise<BillLine[]> {
  const billed = await engine.stores.invoices.billedWithin(s.id, s.environmentId, s.periodStart, s.periodEnd);
  const currency = from[0].currency ?? to[0].currency ?? "USD";
  const charge = changeChargeOf(s, from[0].id);
  const paid = { billed, money: (d: Decimal) => displayMoney(formatDecimal(d), currency), credited: taxCreditedIn(s), ...(charge ? { charge } : {}) };
  return upgradeLines(await perRate(engine, from), await perRate(engine, to), part, paid);
}
