/**
 * Proration (DESIGN §13), pure: the part of a period left at an instant, what a change of a
 * fixed rate's cycle charge costs for that part, and how carried credits go onto an invoice.
 * - The fraction is remaining ms / period ms, exact (a period's length is its own: 28 to 31 days
 *   for a month, 365 or 366 for a year).
 * - A rate's cycle charge is the sum of its fixed lines' quantity × unit amount before rounding
 *   (the engine's fixed-line pricing: flat, package, tiered alike); a change's line is
 *   (new − old) × fraction, rounded once half-up.
 * - The old charge is the one the period was billed at (chargedTerms), not the row's terms: a
 *   change without proration moves the row's terms but not what the period was charged.
 * - A credit (a negative amount) goes onto an invoice only as far as the invoice can take it:
 *   never below zero, and on a draft never below the lines its finalization keeps as written
 *   (usage lines are recomputed then). What is left is carried to the next invoice with the
 *   exclusive tax it carries (ProrationCredit.tax: for a paused cycle's unused time, the tax paid
 *   for that time, unused-credit.ts paidTax), never worked out again from the invoice it is
 *   carried from: as a line on a later invoice it gives back the taxes paid per rate
 *   (ProrationCredit.taxAmounts, the line's paidTax), whatever that invoice's rates or the buyer's
 *   tax status; granted to the balance it is granted with that tax (credit-application.ts
 *   grantProrationCredits). One carried before its taxes per rate were kept is taxed where it lands.
 */
import type { Line } from "../invoicing/lines.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal, roundAmount } from "../money.js";
import { discountedSubtotal } from "./booking.js";
import { splitTaxes } from "./paid-taxes.js";
import { type BillLine, storedLine } from "./invoice-building.js";
import type { BillingTx } from "./ports.js";
import type { Invoice, InvoiceLine, InvoiceLineKind, ProrationCredit, Subscription } from "./types.js";

const DAY_MS = 86_400_000;

/** Days as a line says them: whole, or to two decimals. */
function days(ms: number): string {
  return formatDecimal(dec(ms).div(DAY_MS).toDecimalPlaces(2));
}

/** The part of [start, end) left at `at`: remaining and period ms, the exact fraction, and how a line says it. */
export function remainingPart(start: Date, end: Date, at: Date): { left: number; span: number; fraction: Decimal; label: string } {
  const span = end.getTime() - start.getTime();
  const left = Math.min(span, Math.max(0, end.getTime() - at.getTime()));
  const fraction = span > 0 ? dec(left).div(span) : ZERO;
  return { left, span, fraction, label: `remaining ${days(left)} of ${days(span)} days` };
}

/** A fixed rate's charge for one cycle before rounding: the sum of its lines' quantity × unit amount. */
export function cycleCharge(lines: readonly Line[]): Decimal {
  return lines.reduce((acc, l) => acc.plus(l.quantity.times(l.unitAmount)), ZERO);
}

/** One fixed rate before and after a change: its name, terms and cycle charges. */
export interface RateChange {
  /** The rate's code: its proration line is keyed `<code>|`, so a coupon or credit grant limited to the rate covers it. */
  code?: string;
  name: string;
  oldQuantity: string;
  newQuantity: string;
  oldMultiplier: string;
  newMultiplier: string;
  oldCharge: Decimal;
  newCharge: Decimal;
}

/** A proration line of `amount` (whole smallest units), quantity 1. */
export function prorationLine(description: string, amount: Decimal, code?: string): BillLine {
  return { description, quantity: dec(1), unitAmount: amount, amount: roundAmount(amount), kind: "proration", key: code === undefined ? null : `${code}|`, windowInvoiceId: null };
}

/** What a change of one rate says: "Seats: 3 → 5", with the multiplier when it changed. */
function describeChange(c: RateChange): string {
  const parts: string[] = [];
  if (c.oldQuantity !== c.newQuantity || c.oldMultiplier === c.newMultiplier) parts.push(`${c.oldQuantity} → ${c.newQuantity}`);
  if (c.oldMultiplier !== c.newMultiplier) parts.push(`multiplier ${c.oldMultiplier} → ${c.newMultiplier}`);
  return `${c.name}: ${parts.join(", ")}`;
}

/**
 * The proration lines of a change for the part of the period left: one per rate whose cycle
 * charge changed, (new − old) × fraction rounded once; a line that rounds to 0 is left out.
 */
export function prorationLines(changes: readonly RateChange[], part: { fraction: Decimal; label: string }): BillLine[] {
  const out: BillLine[] = [];
  for (const c of changes) {
    const diff = c.newCharge.minus(c.oldCharge);
    if (diff.isZero()) continue;
    const l = prorationLine(`${describeChange(c)} (${part.label})`, diff.times(part.fraction), c.code);
    if (!l.amount.isZero()) out.push(l);
  }
  return out;
}

/**
 * A change's net outcome (netted per call): a positive net is charged now on one invoice with
 * all its lines; a negative one becomes credits carried to the next invoices — each decrease's
 * own line when there is no increase, else one credit of the net naming every change.
 */
export function netOfChange(lines: readonly BillLine[]): { charge: BillLine[]; credits: ProrationCredit[] } {
  const net = lines.reduce((acc, l) => acc.plus(l.amount), ZERO);
  if (net.gt(0)) return { charge: [...lines], credits: [] };
  if (net.isZero()) return { charge: [], credits: [] };
  if (lines.every((l) => l.amount.isNegative())) return { charge: [], credits: lines.map((l) => ({ description: l.description, amount: formatDecimal(l.amount) })) };
  const description = `Net of ${lines.map((l) => l.description).join("; ")}`;
  return { charge: [], credits: [{ description: description.length > 1000 ? `${description.slice(0, 997)}...` : description, amount: formatDecimal(net) }] };
}

/** Line kinds a draft's finalization recomputes (the usage of its window): a credit must not count on them. */
const RECOMPUTED: ReadonlySet<InvoiceLineKind> = new Set(["usage", "minimum", "maximum", "commitment_true_up"]);

/**
 * How much credit an invoice of `lines` can take: its total, and on a draft (`draft`) at most
 * the total of the lines its finalization keeps as written (a correction of an earlier period's
 * true-up, tied to that period's window, is kept as written); never below 0.
 */
export function creditRoom(lines: readonly (Pick<InvoiceLine, "amount" | "kind"> & { windowInvoiceId?: string | null })[], draft: boolean): Decimal {
  let all = ZERO;
  let kept = ZERO;
  for (const l of lines) {
    all = all.plus(dec(l.amount));
    if (!RECOMPUTED.has(l.kind) || (l.windowInvoiceId ?? null) !== null) kept = kept.plus(dec(l.amount));
  }
  const room = draft && kept.lt(all) ? kept : all;
  return room.gt(0) ? room : ZERO;
}

/**
 * Whether `l` is a credit carried onto its invoice (takeCredits: a proration line of no key), for
 * time of another period (a paused cycle's unused time on the resume's invoice) or from before:
 * what the invoice's period took for fixed charges leaves it out (unused-credit.ts fixedTaken).
 */
export function isCarriedCredit(l: Pick<InvoiceLine, "kind" | "amount"> & { key?: string | null }): boolean {
  return l.kind === "proration" && (l.key ?? null) === null && dec(l.amount).isNegative();
}

/** `line` giving back `taxes` as paid (InvoiceLine.paidTax), when known. */
const paid = (line: BillLine, taxes: ProrationCredit["taxAmounts"]): BillLine => (taxes ? { ...line, paidTax: taxes } : line);

/**
 * Puts carried `credits` (oldest first) onto an invoice with `room` to take them: each whole
 * while it fits, the first that does not fit in part ("part of …"), the rest carried as they
 * were, with their tax. The part left of a split one keeps its description and the share of its
 * tax the rest is of it, round(tax × rest / amount) half up (1,774 with −177 of which 250 lands:
 * 1,524 with −152, −152.06 rounded), never more than it had; one without a tax (carried before
 * the tax was recorded) stays without. The part landing as a line gives back the taxes paid for
 * it, per rate (paid-taxes.ts splitTaxes: −177 of −677 carried, −500 on the line); without them
 * (carried before they were kept) it is taxed where it lands.
 */
export function takeCredits(credits: readonly ProrationCredit[], room: Decimal, currency: string): { lines: BillLine[]; carried: ProrationCredit[] } {
  const lines: BillLine[] = [];
  const carried: ProrationCredit[] = [];
  const money = (d: Decimal) => displayMoney(formatDecimal(d), currency);
  let left = room;
  for (const c of credits) {
    const want = dec(c.amount).neg();
    if (want.lte(0)) continue;
    const whole = c.whole === undefined ? want : dec(c.whole).neg();
    if (left.gte(want)) {
      lines.push(paid(prorationLine(whole.eq(want) ? c.description : `${c.description} (the last ${money(want)} of ${money(whole)})`, want.neg()), c.taxAmounts));
      left = left.minus(want);
    } else if (left.gt(0)) {
      const rest = want.minus(left);
      const restTax = c.tax === undefined ? undefined : roundAmount(dec(c.tax).times(rest).div(want));
      const split = c.taxAmounts && restTax ? splitTaxes(c.taxAmounts, want, rest, restTax.neg()) : undefined;
      lines.push(paid(prorationLine(`${c.description} (${money(left)} of ${money(whole)}; the rest on the next invoice)`, left.neg()), split?.landed));
      const tax = restTax === undefined ? {} : { tax: formatDecimal(restTax), ...(split ? { taxAmounts: split.rest } : {}) };
      carried.push({ description: c.description, amount: formatDecimal(rest.neg()), whole: formatDecimal(whole.neg()), ...tax });
      left = ZERO;
    } else {
      carried.push(c);
    }
  }
  return { lines, carried };
}

/**
 * `inv` with as much of the carried `credits` as it can take (see creditRoom, takeCredits) as
 * its last lines, its total their sum; and the credits left for the next invoice. It takes no
 * more than its lines come to after the discounts booking will take of them at `at` (booking.ts
 * discountedSubtotal; a credit is never discounted), so an invoice never totals less than
 * nothing: 10,000 of charges under a 50% coupon take 5,000 of a 6,000 credit, not 6,000 (which
 * would total −1,000). Without booking (the in-memory fake), its lines before discounts. The
 * credits it carries keep the tax they came with (takeCredits), whatever this invoice's tax.
 */
export async function withCredits(tx: Pick<BillingTx, "booking">, inv: Invoice, credits: readonly ProrationCredit[] | undefined, at: Date): Promise<{ invoice: Invoice; carried: ProrationCredit[] }> {
  if (!credits?.length) return { invoice: inv, carried: [] };
  const room = creditRoom(inv.lines, inv.status === "draft");
  const discounted = room.gt(0) ? await discountedSubtotal(tx, inv, at) : undefined;
  const { lines, carried } = takeCredits(credits, discounted?.lt(room) ? (discounted.gt(0) ? discounted : ZERO) : room, inv.currency);
  if (lines.length === 0) return { invoice: inv, carried };
  const stored = lines.map(storedLine);
  const sum = stored.reduce((acc, l) => acc.plus(dec(l.amount)), dec(inv.total));
  return { invoice: { ...inv, lines: [...inv.lines, ...stored], total: formatDecimal(sum) }, carried };
}

/** A subscription's terms: what its fixed charges are priced at. */
export type TermsOf = Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">;

/**
 * The terms `s`'s current period's fixed charges were billed at (Subscription.chargedTerms): what
 * a proration or an unused-time credit takes as paid; the row's terms unless a change without
 * proration left them for the next cycle.
 */
export function chargedTerms(s: Subscription): TermsOf {
  // Terms of another card (a change of rate card that charged nothing) are not the row's card's: per rate, the row's terms.
  if (s.chargedTerms?.rateCardId !== undefined && s.chargedTerms.rateCardId !== s.rateCardId) return { fixedRateQuantities: s.fixedRateQuantities, rateMultipliers: s.rateMultipliers };
  return s.chargedTerms ?? { fixedRateQuantities: s.fixedRateQuantities, rateMultipliers: s.rateMultipliers };
}

/** The card `s`'s current period was paid on when it is not the row's (a change of rate card that charged nothing); else null. */
export function paidOnOtherCard(s: Pick<Subscription, "chargedTerms" | "rateCardId">): string | null {
  const id = s.chargedTerms?.rateCardId;
  return id !== undefined && id !== s.rateCardId ? id : null;
}

/** The card and terms `s`'s current period's fixed charges were billed at: what a change of rate card takes as paid. */
export function chargedCardTerms(s: Subscription): TermsOf & { rateCardId: string } {
  const t = s.chargedTerms ?? s;
  return { rateCardId: s.chargedTerms?.rateCardId ?? s.rateCardId, fixedRateQuantities: t.fixedRateQuantities, rateMultipliers: t.rateMultipliers };
}

/**
 * `s`'s chargedTerms after a change of rate card to `cardId` at `next`: null when it charged for
 * the rest of the period (`charged`, an upgrade) or the period was billed at those; otherwise the
 * period keeps the card and terms it was billed at, so a later upgrade in it is computed from
 * them, not from the card it was downgraded to (Pro → Basic → Pro charges nothing).
 */
export function chargedAfterSwitch(s: Subscription, cardId: string, next: TermsOf, charged: boolean, charge?: { charged: string; discounted: string }): Subscription["chargedTerms"] {
  const paid = chargedCardTerms(s);
  const terms = { fixedRateQuantities: { ...paid.fixedRateQuantities }, rateMultipliers: { ...paid.rateMultipliers } };
  const after = charged || (paid.rateCardId === cardId && sameTerms(paid, next)) ? null : paid.rateCardId === cardId ? terms : { ...terms, rateCardId: paid.rateCardId };
  if (!charge) {
    // A change that charged nothing keeps the period's paid card, and what an earlier change charged for it (B → A → C: B's time paid 0 stays 0).
    const prior = (s.chargedTerms as ChangeChargeTerms | null | undefined)?.changeCharge;
    const keeps = after !== null && prior?.periodStart === s.periodStart.toISOString() && prior.rateCardId === ("rateCardId" in after ? after.rateCardId : cardId);
    const kept: ChangeChargeTerms | null = keeps && after !== null && prior ? { ...after, changeCharge: prior } : after;
    return kept;
  }
  const kept: ChangeChargeTerms = {
    ...(after ?? { fixedRateQuantities: { ...next.fixedRateQuantities }, rateMultipliers: { ...next.rateMultipliers } }),
    changeCharge: { periodStart: s.periodStart.toISOString(), rateCardId: cardId, ...charge },
  };
  return kept;
}

/**
 * The period's charged terms with what a change of rate card charged for the new card's time and
 * what discounts took of it (`changeCharge`, decimal strings), kept when the change's lines netted
 * to a credit and left its invoice for the subject's balance (change-credit.ts `charge`): no
 * invoice of the period then shows that charge, and a later upgrade values the new card's unused
 * time from it (change-lines.ts paidCredit). For the period starting `periodStart` and card `rateCardId` only.
 * A change of that card's terms in the period keeps it, moved to the new terms when prorated
 * (change-lines.ts chargeAfterTermsChange).
 */
export type ChangeChargeTerms = NonNullable<Subscription["chargedTerms"]> & {
  changeCharge?: { periodStart: string; rateCardId: string; charged: string; discounted: string };
};

/**
 * What `s`'s chargedTerms are after a change to `next` that bills nothing now (proration_behavior
 * none): the period keeps the terms it was billed at; null when they are `next` again.
 */
export function chargedAfterUnbilled(s: Subscription, next: TermsOf): TermsOf | null {
  const charged = chargedTerms(s);
  return sameTerms(charged, next) ? null : { fixedRateQuantities: { ...charged.fixedRateQuantities }, rateMultipliers: { ...charged.rateMultipliers } };
}

/**
 * What `s`'s chargedTerms are after a prorated change to `next` that credited nothing for the
 * decreases of rates `uncredited` (nothing of them paid in the period yet, unused-credit.ts): the
 * period stays charged at the terms it was billed at for those rates, so a later increase is
 * prorated from what was billed, not charged again; null when that is `next`.
 */
export function chargedKeeping(s: Subscription, next: TermsOf, uncredited: ReadonlySet<string>): TermsOf | null {
  const charged = chargedTerms(s);
  const kept: TermsOf = { fixedRateQuantities: { ...next.fixedRateQuantities }, rateMultipliers: { ...next.rateMultipliers } };
  for (const code of uncredited) {
    for (const k of ["fixedRateQuantities", "rateMultipliers"] as const) {
      const was = charged[k][code];
      if (was === undefined) delete kept[k][code];
      else kept[k][code] = was;
    }
  }
  return sameTerms(kept, next) ? null : kept;
}

/** Whether `a` and `b`'s periods were billed on the same card at the same terms (chargedCardTerms). */
export function sameCharged(a: Subscription, b: Subscription): boolean {
  const [x, y] = [chargedCardTerms(a), chargedCardTerms(b)];
  return x.rateCardId === y.rateCardId && sameTerms(x, y);
}

/** Whether two sets of terms are the same. */
export function sameTerms(a: TermsOf, b: TermsOf): boolean {
  return sameEntries(a.fixedRateQuantities, b.fixedRateQuantities) && sameEntries(a.rateMultipliers, b.rateMultipliers);
}

/** Whether two maps of text hold the same entries (in any order). */
export function sameEntries(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
