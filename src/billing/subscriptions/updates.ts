/**
 * Mid-cycle changes of an active subscription's terms (DESIGN §13, `PATCH /subscriptions/{id}`):
 * fixed-rate quantities (seats), rate multipliers and metadata. Codes and keys left out keep
 * theirs; a metadata value of "" removes the key; a request that changes nothing writes nothing.
 * - `create_prorations` (default): each fixed rate whose cycle charge changes is prorated for the
 *   part of the current period left (proration.ts), netted per call: a positive net is one
 *   invoice charged now (finalized at once, settled like a rate-card upgrade; without a card on
 *   file it stays open, as a cycle's invoice does), taking carried credits first; a negative net
 *   goes to the subject's balance as credit for the next invoices. A decrease's credit for unused
 *   time is valued first at what the period's invoices took for its rate net of their discounts
 *   (unused-credit.ts), and the net is decided on the lines so valued, an increase counted as an
 *   invoice would book it now: a net charge is invoiced (the increases, discounted by booking; the
 *   valued credits granted first, which the invoice spends), a net credit is granted. Each line
 *   counts with its exclusive tax: an increase's as booked now (change-credit.ts taxedLines), a
 *   credit's as booked on what it gives back (unused-credit.ts paidTax), so a credit to the
 *   balance is what the customer paid for the time given back (2 → 1 seats at 1,000, half the
 *   period left, 20% exclusive paid: 500 + 100 = 600; paid exempt: 500, whatever the buyer's tax
 *   status at the change); an inclusive tax is inside the amount. The tax so given back is kept
 *   for the period (unused-credit.ts TaxCreditedTerms) and a later decrease gives back at
 *   most the rest of what was paid.
 * - `none`: the new terms price the next cycle's charges; nothing is invoiced now. The period
 *   keeps the terms it was billed at (Subscription.chargedTerms), from which a later prorated
 *   change, a pause's unused time or a change of rate card is computed.
 * After a change of rate card that charged nothing (the period paid on the card it was charged
 * on, chargedTerms' rateCardId), a prorated change is priced from what was paid there, as a change
 * of rate card is (pastPaid): no more per period than was paid charges nothing and the period
 * stays paid there; more charges the paid card's credit and the new terms' charge for the rest.
 * Usage rates are billed in arrears, at the close, over the whole period at the row's terms then.
 * A change of a usage rate's terms (its multiplier, or a usage add-on taken or dropped) settles
 * the usage before it with either behaviour where the close would bill it at other terms
 * (usage-term-changes.ts): a usage add-on dropped, or a multiplier lowered, invoiced at once (a
 * lowering also kept, with what it billed, so usage before it sent later is priced at its terms);
 * a multiplier raised or a usage add-on taken, old − new kept on the subscription for its window
 * (usageAdjustments), an adjustment line of the invoice that bills the window, which books its
 * discounts and taxes as that invoice books the rate's usage.
 * The change applies under the row lock with a fence (races.ts): the row must still be in the
 * cycle, on the card and at the terms the proration was computed from.
 */
import type { RateCard } from "../catalog/types.js";
import { FailedPreconditionError, Violations } from "../errors.js";
import { subscriptionEvent } from "../events/types.js";
import { randomBase62 } from "../ids.js";
import { fixedLine } from "../invoicing/lines.js";
import { checkMetadata } from "../metadata.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal } from "../money.js";
import type { Caller } from "../tenancy.js";
import { type BillLine, multiplierOf } from "./invoice-building.js";
import { checkCommitment, pendingCommitment } from "./commitments.js";
import { rateCodeOf } from "./line-cards.js";
import { discountsOnLines, grantProrationCredits } from "./credit-application.js";
import type { Lookups } from "./lookups.js";
import type { BillingTx } from "./ports.js";
import { noPaymentProvider } from "./payments.js";
import {
  type RateChange,
  type TermsOf,
  chargedAfterUnbilled,
  chargedCardTerms,
  chargedKeeping,
  chargedTerms,
  cycleCharge,
  netOfChange,
  prorationLines,
  paidOnOtherCard,
  remainingPart,
  sameCharged,
  sameEntries,
  sameTerms,
  withCredits,
} from "./proration.js";
import { lostRace, retryingRaces } from "./races.js";
import { sameWindowState } from "./change-fences.js";
import type { Terms } from "./terms.js";
import { type Invoice, type Subscription, shownCommitment } from "./types.js";
import { type TaxCreditedTerms, paidTax, sumOf, taxCreditedIn, valuedCredits } from "./unused-credit.js";
import { usageTermSettlement } from "./usage-term-changes.js";
import { changeCredit, taxedLines } from "./change-credit.js";
import { type ChangeGiven, type SwitchPlan, pricedUpgradeLines } from "./upgrade-lines.js";
import { chargeAfterTermsChange, changeChargeOf, movedTime } from "./change-lines.js";
import { openReductions, recordGivenBack } from "./given-back.js";
import { type UpdateInput, type UpdateResult, checkMergedMetadata, checkProrationBehavior, checkUpdatable, mergedMetadata } from "./update-input.js";

export type { UpdateInput, UpdateResult } from "./update-input.js";

/**
 * `charged` (the period's charged terms after a change to `next`) keeping the exclusive tax seat
 * decreases gave back in `s`'s period (`credited`, per rate code; unused-credit.ts paidTax), on the
 * row's terms where `charged` is null (they are the row's); as it is when none was given back.
 */
function withTaxCredited(charged: Subscription["chargedTerms"], next: TermsOf, s: Subscription, credited: Record<string, string>): Subscription["chargedTerms"] {
  if (Object.values(credited).every((v) => dec(v).isZero())) return charged;
  const terms = charged ?? { fixedRateQuantities: { ...next.fixedRateQuantities }, rateMultipliers: { ...next.rateMultipliers } };
  const kept: TaxCreditedTerms = { ...terms, taxCredited: { periodStart: s.periodStart.toISOString(), amounts: credited } };
  return kept;
}

/**
 * The fence of an update: whether the locked row `s` is no longer what `current` was read as —
 * the cycle, card and terms the proration was computed from, the window's kept usage-terms
 * changes and anchors (a lowering settles the changes at once), or its cycle ended (closed first).
 */
function moved(s: Subscription, current: Subscription, now: Date): boolean {
  return (
    s.rateCardId !== current.rateCardId ||
    s.cycleIndex !== current.cycleIndex ||
    s.cycleEpoch !== current.cycleEpoch ||
    s.usageSince.getTime() !== current.usageSince.getTime() ||
    !sameEntries(s.fixedRateQuantities, current.fixedRateQuantities) ||
    !sameEntries(s.rateMultipliers, current.rateMultipliers) ||
    !sameTerms(chargedTerms(s), chargedTerms(current)) ||
    !sameCharged(s, current) ||
    !sameWindowState(s, current) ||
    s.periodEnd.getTime() <= now.getTime()
  );
}

export class TermUpdates {
  constructor(
    private readonly lookups: Lookups,
    private readonly terms: Terms,
    /** Closes the cycles of a subscription that ended by `at` (SubscriptionChanges.caughtUp); the fresh row. */
    private readonly caughtUp: (s: Subscription, at: Date) => Promise<Subscription>,
  ) {}

  private get engine() {
    return this.lookups.engine;
  }

  async update(caller: Caller, id: string, input: UpdateInput): Promise<UpdateResult> {
    const v = new Violations();
    const behavior = checkProrationBehavior(input.prorationBehavior, v);
    checkMetadata(input.metadata, v.at("metadata"));
    v.throwIfAny();
    const found = await this.lookups.subscription(caller, id);
    const subject = await this.lookups.subject(caller, found.subjectId);
    const done = await retryingRaces(async (n): Promise<UpdateResult> => {
      const now = await this.lookups.nowFor(subject);
      const current = checkUpdatable(await this.caughtUp(n === 1 ? found : await this.lookups.subscription(caller, id), now));
      const card = await this.engine.reads.card(current.environmentId, current.rateCardId);
      const checked = await this.terms.checkTerms(card, { ...current.fixedRateQuantities, ...input.fixedRateQuantities }, { ...current.rateMultipliers, ...input.rateMultipliers }, v);
      checkMergedMetadata(mergedMetadata(current.metadata, input.metadata), v);
      const commitment = checkCommitment(input.minimumCommitment, card, v);
      v.throwIfAny();
      const next: TermsOf = { fixedRateQuantities: checked.quantities, rateMultipliers: checked.multipliers };
      const termsChange = !sameEntries(next.fixedRateQuantities, current.fixedRateQuantities) || !sameEntries(next.rateMultipliers, current.rateMultipliers);
      const commitmentChange = commitment.given && commitment.value !== shownCommitment(current);
      if (!termsChange && !commitmentChange && sameEntries(mergedMetadata(current.metadata, input.metadata), current.metadata)) return { subscription: current, prorationInvoice: undefined };
      // The period paid on another card (a change of rate card that charged nothing): priced from what was paid there.
      const paidOn = paidOnOtherCard(current);
      const { lines, billed, given } = await this.changeLines(card, current, next, now, behavior !== "none" && termsChange);
      // The usage before a change of usage terms, settled at the terms it was used under (either behaviour).
      const usage = termsChange ? await usageTermSettlement(this.engine.builder, this.engine.reads, card, current, next, now) : { lines: [], adjustments: [] };
      const increases = lines.filter((l) => l.amount.gt(0));
      const payments = increases.length === 0 || Boolean(await this.lookups.paymentsFor(caller));
      const money = (d: Decimal) => displayMoney(formatDecimal(d), card.currency ?? "USD");
      const valued = paidOn ? lines : valuedCredits(lines, billed, money);
      // The card's time an upgrade's charge paid (ChangeChargeTerms), which a prorated change moves: the old terms' list for the rest of the period.
      const left = behavior === "none" || !termsChange || paidOn ? undefined : await this.paidTimeLeft(card, current, now);
      // Decreases credited nothing (nothing of the rate paid in the period yet): the period stays charged at the old terms for them.
      const uncredited = new Set(lines.flatMap((l, i) => (l.amount.isNegative() && valued[i] === null ? [rateCodeOf(l) ?? ""] : [])));
      return this.engine.stores.transaction(async (tx) => {
        const s = await tx.lockSubscription(current.environmentId, current.id);
        if (s?.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${id} is ${s?.status ?? "gone"}; only an active subscription can be updated`);
        if (moved(s, current, now)) throw lostRace(id);
        const metadata = mergedMetadata(s.metadata, input.metadata);
        checkMergedMetadata(metadata, v);
        v.throwIfAny();
        // Credits carried from before and this change's own credits go to the subject's balance
        // (DESIGN §13), before the invoice (if any) is written, which then spends them like any
        // credit. Without a credit store: carried as before, onto this invoice first.
        const decision = paidOn
          ? { charged: lines.length > 0, own: [], taxCredited: {}, givenBack: given?.amounts ?? new Map(), reductions: new Map(), bookedNow: [] }
          : await this.decided(tx, s, card, valued, increases, billed, now, money);
        const { charged, taxCredited } = decision;
        // What the credit gives back of each invoice it was drawn on, on its amount credited (a credit note's cap too).
        await recordGivenBack(tx, billed, decision.givenBack, decision.reductions, { clock: now, real: this.engine.now() }, () => lostRace(id));
        if (charged && !payments) throw noPaymentProvider("this change increases the fixed charges, which needs a payment");
        const built = charged ? this.engine.builder.newInvoice(current, card, `proration:${now.getTime()}:${randomBase62(8)}`, paidOn ? lines : increases, now, current.periodEnd, now) : undefined;
        // Past what was paid on another card: its credit and the new terms' charge on one invoice; a net credit once taxed goes to the balance (change-credit.ts).
        const change = paidOn && built ? await changeCredit(tx, built, now) : { invoice: built, credits: decision.own };
        const invoice = change.invoice?.lines.length ? change.invoice : undefined;
        const own = change.credits;
        const toCarry = await grantProrationCredits(tx, s, card.currency ?? "USD", [...(s.prorationCredits ?? []), ...own], now);
        const usageInvoice = usage.lines.length > 0 ? this.engine.builder.newInvoice(s, card, `usage-terms:${now.getTime()}:${randomBase62(8)}`, usage.lines, s.usageSince, now, now) : undefined;
        const settled = usageInvoice ? await withCredits(tx, usageInvoice, toCarry, now) : { invoice: undefined, carried: toCarry };
        if (settled.invoice && !(await this.engine.builder.writeInvoice(tx, settled.invoice))) throw lostRace(id);
        const credited = invoice ? await withCredits(tx, invoice, settled.carried, now) : { invoice: undefined, carried: settled.carried };
        const written = credited.invoice ? await this.engine.builder.writeInvoice(tx, credited.invoice) : undefined;
        if (credited.invoice && !written) throw lostRace(id);
        const updated: Subscription = {
          ...s,
          ...next,
          // A prorated change bills the period at the new terms, but for a decrease credited nothing (chargedKeeping);
          // `none` (or no change of terms) leaves it at those it was billed at; on another card after a change of rate card charging nothing,
          // so does a change that costs no more than was paid there (pastPaid). An upgrade's charge for the card stays, moved (change-lines.ts).
          chargedTerms: withTaxCredited(
            chargeAfterTermsChange(
              !termsChange || (paidOn && (behavior === "none" || !charged)) ? (s.chargedTerms ?? null) : behavior === "none" ? chargedAfterUnbilled(s, next) : chargedKeeping(s, next, uncredited),
              s,
              next,
              left ? movedTime(left, lines, valued, written, decision.bookedNow) : undefined,
            ),
            next,
            s,
            taxCredited,
          ),
          metadata,
          prorationCredits: credited.carried,
          // From the next period on (the period under way keeps the commitment it started with).
          commitment: commitment.given ? pendingCommitment(s, commitment.value, card) : (s.commitment ?? null),
          // The window's kept changes of usage terms (raised, taken, or lowered with what it billed): priced by the invoice billing the window (usage-term-changes.ts).
          usageAdjustments: !termsChange ? (s.usageAdjustments ?? null) : usage.adjustments.length > 0 ? usage.adjustments : null,
        };
        await tx.updateSubscription(updated);
        await tx.emit([subscriptionEvent("subscription.updated", updated)]);
        return { subscription: updated, prorationInvoice: credited.invoice, usageInvoice: settled.invoice };
      });
    });
    if (done.usageInvoice) await this.engine.settlement.settle(done.usageInvoice, subject.paymentMethodId);
    if (!done.prorationInvoice) return done;
    await this.engine.settlement.settle(done.prorationInvoice, subject.paymentMethodId);
    // The invoice as settling left it (paid, or open after a declined charge or without a card on file).
    return { ...done, prorationInvoice: (await this.engine.stores.invoices.get(caller.environmentId, done.prorationInvoice.id)) ?? done.prorationInvoice };
  }

  /**
   * The lines of moving `current` to `next` at `at` (none unless `prorated`: create_prorations and
   * a change of terms), and the period's invoices they are valued on (the fence keeps the period
   * and terms): on another card (paidOnOtherCard) priced from what was paid there, with what its
   * credit gives back of them (pastPaid); else the prorations, read only for a decrease to value.
   */
  private async changeLines(card: RateCard, current: Subscription, next: TermsOf, at: Date, prorated: boolean): Promise<{ lines: BillLine[]; billed: readonly Invoice[]; given?: ChangeGiven }> {
    if (!prorated) return { lines: [], billed: [] };
    if (paidOnOtherCard(current)) {
      const past = await this.pastPaid(card, current, next, at);
      return { lines: past.lines, billed: past.given.billed, given: past.given };
    }
    const lines = await this.prorations(card, current, next, at);
    const decreases = lines.some((l) => l.amount.isNegative());
    return { lines, billed: decreases ? await this.engine.stores.invoices.billedWithin(current.id, current.environmentId, current.periodStart, current.periodEnd) : [] };
  }

  /**
   * The decision on a change's `valued` lines (unused-credit.ts), each as the buyer would pay it
   * now: an increase as an invoice would book it (its discounts, asBookedNow), a credit as valued,
   * and each plus its exclusive tax (change-credit.ts taxedLines), so a credit to the balance is
   * what the customer paid for the time given back (20% exclusive: 500.00 unused is 600.00).
   * `charged`: the net is a charge, the increases are invoiced and `own` are the credits, granted
   * first; else `own` is the change's net credit, if any.
   */
  private async decided(
    tx: BillingTx,
    s: Subscription,
    card: RateCard,
    valued: readonly (BillLine | null)[],
    increases: readonly BillLine[],
    billed: readonly Invoice[],
    at: Date,
    money: (d: Decimal) => string,
  ) {
    const increasesNow = increases.length > 0 ? await this.asBookedNow(tx, s, card, increases, at) : [];
    const preview = (lines: BillLine[]) => this.engine.builder.newInvoice(s, card, "proration-preview", lines, at, s.periodEnd, at, { finalizesAt: s.periodEnd });
    const taxedIncreases = await taxedLines(tx, preview, increasesNow, at, money);
    // A credit gives back the tax booked on what it gives back (not the buyer's tax details now).
    const paid = paidTax(valued, billed, taxCreditedIn(s));
    // What a credit draws of an open invoice lowers its amount due, not the balance (given-back.ts).
    const open = openReductions(tx, billed, paid.draws);
    const decided = valued.flatMap((l, i): BillLine[] => {
      if (l === null) return [];
      if (l.amount.gt(0)) return [taxedIncreases[increases.indexOf(l)] ?? l];
      const tax = paid.taxes[i] ?? ZERO;
      const taxed = tax.isZero() ? l : { ...l, amount: l.amount.minus(tax), description: `${l.description}, incl. tax: ${money(tax)}` };
      const off = open.perCredit[i] ?? ZERO;
      if (off.isZero()) return [taxed];
      const rest = taxed.amount.plus(off);
      return rest.isNegative() ? [{ ...taxed, amount: rest, description: `${taxed.description}, less ${money(off)} off the amount due of the open invoice it was charged on` }] : [];
    });
    const charged = sumOf(decided).gt(0);
    const credits = decided.filter((l) => l.amount.isNegative()).map((l) => ({ description: l.description, amount: formatDecimal(l.amount) }));
    return { charged, own: charged ? credits : netOfChange(decided).credits, taxCredited: paid.credited, givenBack: paid.givenBack, reductions: open.perInvoice, bookedNow: increasesNow };
  }

  /**
   * A change's increase `lines` as an invoice of them would be booked now: each less what the
   * subscription's discounts that apply now (not "once" ones: no invoice spends them here) take of
   * it (credit-application.ts discountsOnLines); what decides whether the change nets to a charge.
   */
  private async asBookedNow(tx: BillingTx, s: Subscription, card: RateCard, lines: readonly BillLine[], at: Date): Promise<BillLine[]> {
    const preview = this.engine.builder.newInvoice(s, card, "proration-preview", [...lines], at, s.periodEnd, at, { finalizesAt: s.periodEnd });
    const off = await discountsOnLines(tx, preview, at);
    return lines.map((l, i) => {
      const taken = off[i];
      return taken && !taken.amount.isZero() ? { ...l, amount: l.amount.minus(taken.amount) } : l;
    });
  }

  /**
   * The list price of `current`'s card at the terms its period was charged at for the part left at
   * `at`, when an upgrade's charge paid that time (ChangeChargeTerms: what a change of terms moves,
   * change-lines.ts chargeAfterTermsChange); undefined otherwise.
   */
  private async paidTimeLeft(card: RateCard, current: Subscription, at: Date): Promise<Decimal | undefined> {
    if (!changeChargeOf(current, current.rateCardId)) return undefined;
    const list = cycleCharge(await this.engine.builder.fixedLines(card, chargedTerms(current)));
    return list.times(remainingPart(current.periodStart, current.periodEnd, at).fraction);
  }

  /**
   * The lines of moving `current`, whose period was paid on another card (paidOnOtherCard), to
   * `next` at `at`, as a change of rate card prices them (changes.ts switchPlan): from what was
   * paid, on the card it was paid on (chargedCardTerms). New terms costing no more per period
   * than was paid charge nothing (the period stays paid there); else the paid card's credit and
   * the row's card's charge for the part of the period left (upgrade-lines.ts), which sum to the
   * prorated difference. Pro at 10,000 paid, then Basic (2,000 a seat): Basic × 3 (6,000)
   * charges nothing; Basic × 6 (12,000) charges the 2,000 more for the rest of the period. With
   * what the paid card's credit gives back of the period's invoices (upgrade-lines.ts).
   */
  private async pastPaid(card: RateCard, current: Subscription, next: TermsOf, at: Date): Promise<Omit<SwitchPlan, "upgrade">> {
    const paid = chargedCardTerms(current);
    const paidCard = await this.engine.reads.card(current.environmentId, paid.rateCardId);
    const fixed = async (c: RateCard, t: TermsOf) => cycleCharge(await this.engine.builder.fixedLines(c, t));
    if (!(await fixed(card, next)).gt(await fixed(paidCard, paid))) return { lines: [], given: { billed: [], amounts: new Map() } };
    const { left, span } = remainingPart(current.periodStart, current.periodEnd, at);
    return pricedUpgradeLines(this.engine, current, [paidCard, paid], [card, next], { left, span });
  }

  /**
   * The proration lines of moving `current` to `next` at `at`: per fixed rate charged at either
   * terms (a card's own, or a catalog add-on taken or dropped), priced by the engine's fixed
   * lines at the terms the period was billed at (chargedTerms) and the new terms, for the part of
   * the current period left.
   */
  private async prorations(card: RateCard, current: Subscription, next: TermsOf, at: Date): Promise<BillLine[]> {
    const paid = chargedTerms(current);
    const before = (await this.engine.reads.rates(card, paid.fixedRateQuantities)).fixed;
    const after = (await this.engine.reads.rates(card, next.fixedRateQuantities)).fixed;
    const rates = new Map([...before, ...after].map((r) => [r.code, r]));
    const changes: RateChange[] = [];
    for (const r of rates.values()) {
      const charge = (t: TermsOf, charged: boolean) => (charged ? cycleCharge(fixedLine(r.name, r.price, dec(t.fixedRateQuantities[r.code] ?? "0"), multiplierOf(t, r.code))) : dec(0));
      changes.push({
        code: r.code,
        name: r.name,
        oldQuantity: paid.fixedRateQuantities[r.code] ?? "0",
        newQuantity: next.fixedRateQuantities[r.code] ?? "0",
        oldMultiplier: paid.rateMultipliers[r.code] ?? "1",
        newMultiplier: next.rateMultipliers[r.code] ?? "1",
        oldCharge: charge(
          paid,
          before.some((b) => b.code === r.code),
        ),
        newCharge: charge(
          next,
          after.some((a) => a.code === r.code),
        ),
      });
    }
    return prorationLines(changes, remainingPart(current.periodStart, current.periodEnd, at));
  }
}
