/**
 * Minimum commitment per billing period (DESIGN §14), pure but for one read of the period's invoices.
 *
 * The rule: a period's charges are everything billed for it, before discounts (a coupon is a
 * concession on the committed spend, not spend short of it) and before credits, on every invoice
 * of the subscription that is not void:
 * - fixed lines billed for the period: in advance on the invoice that opened it, and an upgrade's
 *   charge on a change of rate card during it, less its credit for the old card at list (the
 *   line's unit amount: its amount is net of the period's discounts, change-lines.ts);
 * - the usage, minimum and maximum lines of each usage window inside the period (with its
 *   adjustments for changes of usage terms, usage-term-changes.ts): those a change of rate card
 *   or a timeline's switch billed up to that instant, and the window being closed;
 * - a seat change's proration lines (the increase charged at once, net of decreases netted with
 *   it), and adjustments for late usage of a window inside the period.
 * A seat decrease's net credit goes to the subject's balance (DESIGN §13): a credit, like a
 * grant, so it does not lower the period's charges; nor does a credit carried onto an invoice (a
 * proration line without a rate, such as a resume's).
 * When the charges are below the subscription's commitment for that period, a
 * `commitment_true_up` line bills the difference on the invoice that closes the period (a cycle
 * close, an immediate cancellation, or a pause, which cuts the period short: the resume starts a
 * new one, on a commitment changed for the next period). For a partial period (a cancellation or a pause) the
 * commitment is prorated by the part of the period billed (elapsed ms / period ms, exact), and
 * the line rounds once, half-up. Discounts then apply to that invoice as to any: a coupon for
 * every rate covers the true-up line too; one limited to rate codes does not (the line has no rate).
 *
 * Late usage of a period billed after its close is charged as adjustments on a later invoice;
 * when the period was trued up, the true-up takes back what the late usage of any of its windows
 * covers on that invoice (trueUpCorrection), so that the period costs max(commitment, charges) still.
 *
 * The line carries what it was sized on in its key, `commitment|<commitment>|<billed>`, where
 * billed is the period's charges other than the closing window's usage, so that a draft's
 * finalization (which recomputes its usage lines) sizes it again on the new usage.
 */
import { checkAmount } from "../catalog/amounts.js";
import type { RateCard } from "../catalog/types.js";
import type { Violations } from "../errors.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal, roundAmount } from "../money.js";
import { formatInstant } from "../time.js";
import type { BillLine } from "./invoice-building.js";
import { cardOfKey } from "./line-cards.js";
import type { InvoiceStore } from "./ports.js";
import type { Commitment, Invoice, InvoiceLine, Subscription } from "./types.js";

/** Line kinds of a window that count as the period's usage charges. */
const USAGE_KINDS = new Set(["usage", "minimum", "maximum"]);

/**
 * A minimum_commitment from the wire: an Amount in the card's currency, ≥ 0. Undefined when not
 * given (or invalid: the violation is added); "0" is null (no commitment).
 */
export function checkCommitment(input: { currencyCode: string; value: string } | undefined, card: Pick<RateCard, "currency">, v: Violations): { given: false } | { given: true; value: string | null } {
  if (input === undefined) return { given: false };
  const at = v.at("minimum_commitment");
  const amount = checkAmount(input, at);
  if (!amount) return { given: false };
  const currency = card.currency ?? "USD";
  if (amount.currency !== currency) {
    at.add("currency_code", `must be the rate card's currency (${currency})`);
    return { given: false };
  }
  return { given: true, value: dec(amount.value).isZero() ? null : amount.value };
}

/** A new subscription's commitment (none when not given or 0). */
export function newCommitment(value: string | null | undefined, card: Pick<RateCard, "currency">): Commitment | null {
  return value ? { currency: card.currency ?? "USD", current: value } : null;
}

/** A PATCH's commitment: `value` from the next period on (null: removed). */
export function pendingCommitment(s: Pick<Subscription, "commitment">, value: string | null, card: Pick<RateCard, "currency">): Commitment | null {
  const current = s.commitment?.current ?? null;
  if (current === null && value === null) return null;
  return { currency: s.commitment?.currency ?? card.currency ?? "USD", current, next: value };
}

/** The commitment of the period after a cycle closes: the pending one takes effect. */
export function commitmentAfterClose(c: Commitment | null | undefined): Commitment | null {
  if (!c) return null;
  if (c.next === undefined) return { currency: c.currency, current: c.current };
  return c.next === null ? null : { currency: c.currency, current: c.next };
}

/** A closing window's line as a true-up reads it (an adjustment of its own has windowInvoiceId null). */
type WindowLine = Pick<BillLine, "amount" | "kind"> & { windowInvoiceId?: string | null };

/** The true-up line's key: what it was sized on. */
function trueUpKey(commitment: Decimal, billed: Decimal): string {
  return `commitment|${formatDecimal(commitment)}|${formatDecimal(billed)}`;
}

/**
 * The `commitment_true_up` line of a period whose charges billed apart from its closing window
 * are `billed` and whose closing window's usage lines are `usage`, against `commitment` ×
 * `fraction` (the part of the period billed); none when the charges reach it (or it rounds to 0).
 */
export function trueUpLine(commitment: string, billed: Decimal, usage: readonly WindowLine[], currency: string, fraction: Decimal = dec(1)): BillLine | undefined {
  const owed = dec(commitment).times(fraction);
  // The window's usage, with its own usage-terms adjustments (no window of their own: InvoiceBuilder.usageLinesOf).
  const charges = usage.filter((l) => USAGE_KINDS.has(l.kind) || (l.kind === "adjustment" && l.windowInvoiceId === null)).reduce((acc, l) => acc.plus(l.amount), billed);
  const diff = roundAmount(owed.minus(charges));
  if (diff.lte(0)) return undefined;
  const whole = fraction.eq(1) ? "" : ` (prorated from ${displayMoney(formatDecimal(roundAmount(dec(commitment))), currency)})`;
  const description = `Minimum commitment ${displayMoney(formatDecimal(roundAmount(owed)), currency)}${whole}: charges of the period ${displayMoney(formatDecimal(charges), currency)}`;
  return { description, quantity: dec(1), unitAmount: diff, amount: diff, kind: "commitment_true_up", key: trueUpKey(owed, billed), windowInvoiceId: null };
}

/** A stored true-up line sized again on a draft's recomputed usage lines (see the key). */
export function resizedTrueUp(line: InvoiceLine, usage: readonly WindowLine[], currency: string): BillLine | undefined {
  const [, owed, billed] = (line.key ?? "").split("|");
  if (owed === undefined || billed === undefined) return undefined;
  return trueUpLine(owed, dec(billed), usage, currency);
}

/** A proration line that is a seat change's own (keyed `<code>|`), not a credit carried onto the invoice (no key). */
const isChangeProration = (l: Pick<InvoiceLine, "kind" | "key">): boolean => l.kind === "proration" && l.key !== null;

/**
 * A line's amount before discounts: a change of rate card's credit for the old card is valued net
 * of the period's discounts (change-lines.ts) and keeps its list-price credit as its unit amount.
 */
function beforeDiscounts(l: Pick<InvoiceLine, "amount" | "kind" | "key" | "quantity" | "unitAmount">): Decimal {
  const amount = dec(l.amount);
  if (l.kind !== "proration" || cardOfKey(l.key) === null || !amount.isNegative()) return amount;
  return roundAmount(dec(l.quantity).times(dec(l.unitAmount)));
}

/** A change of usage terms' settlement of the usage before it (usage-term-changes.ts): an adjustment of no window, keyed `<code>|` (billed at once, or on the invoice of the window it adjusts). */
const isUsageTermSettlement = (l: Pick<InvoiceLine, "kind" | "key" | "windowInvoiceId">): boolean => l.kind === "adjustment" && l.windowInvoiceId === null && l.key !== null;

/**
 * What `invoices` billed for the period [start, end) (see the rule above), before discounts and
 * credits: their fixed lines when the invoice's period lies inside it, their usage lines when
 * its window does, seat changes' proration lines, changes of usage terms' settlements of the
 * usage before them (usage-term-changes.ts), and adjustments of those windows; void
 * invoices count nothing. `late`: the adjustment lines of the invoice being written, counted when
 * they adjust one of these windows.
 */
export function periodCharges(invoices: readonly PeriodInvoice[], start: Date, end: Date, late: readonly Pick<BillLine, "amount" | "kind" | "windowInvoiceId">[] = []): Decimal {
  const inside = (from: Date, to: Date) => from.getTime() >= start.getTime() && to.getTime() <= end.getTime();
  const counted = invoices.filter((i) => i.status !== "void");
  const windows = new Set(counted.filter((i) => i.window && inside(i.window.from, i.window.to)).map((i) => i.id));
  const adjusts = (l: { kind: string; windowInvoiceId: string | null }) => l.kind === "adjustment" && l.windowInvoiceId !== null && windows.has(l.windowInvoiceId);
  let sum = ZERO;
  for (const i of counted) {
    const fixed = inside(i.periodStart, i.periodEnd);
    for (const l of i.lines) {
      // A window's usage-terms adjustment (no window of its own) is its usage; one billed at once (no window), of the period's.
      const ofWindow = USAGE_KINDS.has(l.kind) || (isUsageTermSettlement(l) && i.window);
      const counts = ofWindow ? windows.has(i.id) : ((l.kind === "fixed" || l.kind === "charge" || isChangeProration(l) || isUsageTermSettlement(l)) && fixed) || adjusts(l);
      if (counts) sum = sum.plus(beforeDiscounts(l));
    }
  }
  return late.filter(adjusts).reduce((acc, l) => acc.plus(l.amount), sum);
}

/** An invoice as periodCharges reads it. */
export type PeriodInvoice = Pick<Invoice, "id" | "status" | "periodStart" | "periodEnd" | "window"> & {
  lines: readonly Pick<InvoiceLine, "amount" | "kind" | "key" | "windowInvoiceId" | "quantity" | "unitAmount">[];
};

/**
 * The `commitment_true_up` line (none, or one) of `s`'s current period billed up to `end`: the
 * period's end at a cycle close (all of the commitment), or an earlier instant when the period
 * is cut short (an immediate cancellation or a pause: the commitment prorated by the part of the period
 * up to `end`). `usage`: the closing window's usage lines; `late`: the adjustments the closing
 * invoice carries. Reads the period's invoices only when there is a commitment.
 */
export async function commitmentTrueUp(
  invoices: Pick<InvoiceStore, "billedWithin">,
  s: Subscription,
  usage: readonly WindowLine[],
  currency: string,
  end: Date,
  late: readonly Pick<BillLine, "amount" | "kind" | "windowInvoiceId">[] = [],
): Promise<BillLine[]> {
  const commitment = s.commitment?.current;
  if (!commitment) return [];
  const span = s.periodEnd.getTime() - s.periodStart.getTime();
  const upTo = Math.min(Math.max(end.getTime(), s.periodStart.getTime()), s.periodEnd.getTime());
  const fraction = span > 0 ? dec(upTo - s.periodStart.getTime()).div(span) : dec(1);
  const billed = periodCharges(await invoices.billedWithin(s.id, s.environmentId, s.periodStart, s.periodEnd), s.periodStart, s.periodEnd, late);
  const line = trueUpLine(commitment, billed, usage, currency, fraction);
  return line ? [line] : [];
}

/** A line as trueUpCorrection reads it. */
type CorrectionLine = Pick<InvoiceLine, "amount" | "kind" | "windowInvoiceId">;

/**
 * The correction of a trued-up period's `commitment_true_up` for its late usage (late-usage.ts):
 * the period then costs max(commitment, new charges) − max(commitment, old charges) more, where
 * the true-up was commitment − old charges; with Δ the period's late usage since the true-up was
 * sized, that is Δ less min(Δ, true-up), so the true-up takes back min(Δ, true-up) in all (a late
 * usage above the true-up bills only the rest). The period is every usage window inside it (a
 * change of rate card's, a timeline switch's, the one its close billed): the true-up was sized on
 * all of them. `period`: its bounds (for the description); `closing`: the invoice that closed it,
 * with all its lines (its own true-up, windowInvoiceId null; and the adjustments it carried, of
 * the period's earlier windows too: counted when the true-up was sized, not late since);
 * `windows`: the period's windows (not void), each with what was billed for it so far (its own
 * lines, and every line tied to it: adjustments and earlier corrections); `late`: this run's lines
 * (those adjusting the period's windows count). The line, tied to the closing invoice, is what is
 * still to take back (earlier corrections counted, so a run that finds no new late usage writes
 * none); none when the period was not trued up.
 */
export function trueUpCorrection(
  period: { from: Date; to: Date },
  closing: { id: string; lines: readonly CorrectionLine[] },
  windows: readonly { id: string; billed: readonly CorrectionLine[] }[],
  late: readonly Pick<BillLine, "amount" | "kind" | "windowInvoiceId">[],
): BillLine | undefined {
  const sum = (lines: readonly { amount: Decimal | string }[]) => lines.reduce((acc, l) => acc.plus(typeof l.amount === "string" ? dec(l.amount) : l.amount), ZERO);
  const trueUp = sum(closing.lines.filter(isOwnTrueUp));
  if (trueUp.lte(0)) return undefined;
  const ids = new Set([closing.id, ...windows.map((w) => w.id)]);
  const of = (kind: string) => (l: { kind: string; windowInvoiceId: string | null }) => l.kind === kind && l.windowInvoiceId !== null && ids.has(l.windowInvoiceId);
  // Each tied line once: in the billed of the window it is tied to (a correction is also its own invoice's line).
  const billed = windows.flatMap((w) => w.billed.filter((l) => l.windowInvoiceId === w.id));
  const corrected = sum(billed.filter(of("commitment_true_up")));
  // Late usage billed since the sizing: every adjustment of the period's windows, less those the closing invoice carried.
  const lateUsage = sum(billed.filter(of("adjustment")))
    .plus(sum(late.filter(of("adjustment"))))
    .minus(sum(closing.lines.filter(of("adjustment"))));
  const amount = (lateUsage.lt(trueUp) ? lateUsage : trueUp).neg().minus(corrected);
  if (amount.isZero()) return undefined;
  const stated = `period ${formatInstant(period.from)} to ${formatInstant(period.to)}`;
  const description = amount.isNegative() ? `Minimum commitment true-up, less late usage (${stated})` : `Minimum commitment true-up, back for late usage credited (${stated})`;
  return { description, quantity: dec(1), unitAmount: amount, amount, kind: "commitment_true_up", key: null, windowInvoiceId: closing.id };
}

/** Whether a `commitment_true_up` line is a correction for late usage (trueUpCorrection, kept as written) rather than a period's own true-up (sized on its usage). */
export const isTrueUpCorrection = (l: Pick<InvoiceLine, "kind" | "windowInvoiceId">): boolean => l.kind === "commitment_true_up" && l.windowInvoiceId !== null;

/** Whether a line is a period's own `commitment_true_up` (on the invoice that closed it), not a correction of one. */
export const isOwnTrueUp = (l: Pick<InvoiceLine, "kind" | "windowInvoiceId">): boolean => l.kind === "commitment_true_up" && l.windowInvoiceId === null;
