/**
 * The lines of an upgrade of rate card as a change invoices them (switchPlan, for changes.ts): the
 * sides' fixed charges per rate read from their cards, and the credit for the old card valued at
 * what the current period's invoices took for its fixed charges (change-lines.ts, the pure part),
 * with what that credit gives back of those invoices, recorded on them when the change is written
 * (given-back.ts).
 */
import type { RateCard } from "../catalog/types.js";
import { type Decimal, ZERO, displayMoney, formatDecimal } from "../money.js";
import { type ChangeSide, changeChargeOf, upgradeLines } from "./change-lines.js";
import type { BillingEngine } from "./engine.js";
import { changeGivenBack } from "./given-back.js";
import type { BillLine } from "./invoice-building.js";
import { chargedCardTerms, cycleCharge, type TermsOf } from "./proration.js";
import type { Invoice, Subscription } from "./types.js";
import { taxCreditedIn } from "./unused-credit.js";

/** One side of an upgrade: the card and the terms its fixed charges are priced at. */
export type PricedSide = [card: RateCard, terms: TermsOf];

/** What a change's credit for the old card gives back (`amounts`, per invoice ID) of the period's invoices `billed`, as they were read when it was valued. */
export interface ChangeGiven {
  billed: readonly Invoice[];
  amounts: Map<string, Decimal>;
}

/** A change of rate card's invoice lines, the fixed-price difference it charges (0: not an upgrade), and what its credit gives back. */
export interface SwitchPlan {
  lines: BillLine[];
  upgrade: Decimal;
  given: ChangeGiven;
}

type Engine = Pick<BillingEngine, "reads" | "builder" | "stores">;

/** `side` with its fixed charges per cycle in all and per rate, as the engine prices them (proration.ts cycleCharge over its fixed lines). */
async function perRate(engine: Pick<BillingEngine, "reads" | "builder">, [card, terms]: PricedSide): Promise<ChangeSide> {
  const fixed = (await engine.reads.rates(card, terms.fixedRateQuantities)).fixed;
  const rates = fixed.map((r) => ({ code: r.code, name: r.name, fixed: cycleCharge(engine.builder.fixedLinesOf([r], terms)) }));
  return { card, fixed: rates.reduce((a, r) => a.plus(r.fixed), ZERO), rates };
}

/**
 * The credit for `from` and the charge for `to` of `s`'s upgrade (prorated to `part`, or the whole
 * period): the credit valued at what `s`'s current period's invoices took (change-lines.ts), and
 * what it gives back of them (given-back.ts changeGivenBack).
 */
export async function pricedUpgradeLines(engine: Engine, s: Subscription, from: PricedSide, to: PricedSide, part: { left: number; span: number } | null): Promise<Omit<SwitchPlan, "upgrade">> {
  const billed = await engine.stores.invoices.billedWithin(s.id, s.environmentId, s.periodStart, s.periodEnd);
  const currency = from[0].currency ?? to[0].currency ?? "USD";
  const charge = changeChargeOf(s, from[0].id);
  const paid = { billed, money: (d: Decimal) => displayMoney(formatDecimal(d), currency), credited: taxCreditedIn(s), ...(charge ? { charge } : {}) };
  const lines = upgradeLines(await perRate(engine, from), await perRate(engine, to), part, paid);
  return { lines, given: { billed, amounts: changeGivenBack(lines, billed, s) } };
}

/** Per-cycle fixed total of a card at the given terms, unrounded. */
async function fixedTotal(engine: Pick<BillingEngine, "builder">, card: RateCard, terms: TermsOf): Promise<Decimal> {
  return cycleCharge(await engine.builder.fixedLines(card, terms));
}

/**
 * What moving `current` from `oldCard` to `newCard` (at `next`) at `at` invoices: the old card's
 * usage so far, and for an upgrade the old card's credit and the new card's charge (change-lines.ts;
 * the old charge is the one the period was billed at, on the card it was billed on,
 * chargedCardTerms, not the row's), prorated unless `behavior` is rate_difference.
 */
export async function switchPlan(engine: Engine, current: Subscription, oldCard: RateCard, newCard: RateCard, next: TermsOf, at: Date, behavior: string): Promise<SwitchPlan> {
  const paid = chargedCardTerms(current);
  const paidCard = paid.rateCardId === oldCard.id ? oldCard : await engine.reads.card(current.environmentId, paid.rateCardId);
  const diff = (await fixedTotal(engine, newCard, next)).minus(await fixedTotal(engine, paidCard, paid));
  const lines = await engine.builder.usageLines(oldCard, current, current.usageSince, at);
  let upgrade = ZERO;
  let given: ChangeGiven = { billed: [], amounts: new Map() };
  if (diff.gt(0)) {
    const span = current.periodEnd.getTime() - current.periodStart.getTime();
    const left = Math.max(0, current.periodEnd.getTime() - at.getTime());
    const prorate = behavior !== "rate_difference";
    upgrade = prorate ? diff.times(left).div(span) : diff;
    // The old card's credit and the new card's charge, each taxed by its own card (change-lines.ts).
    if (upgrade.gt(0)) {
      const priced = await pricedUpgradeLines(engine, current, [paidCard, paid], [newCard, next], prorate ? { left, span } : null);
      lines.push(...priced.lines);
      given = priced.given;
    }
  }
  return { lines, upgrade, given };
}
