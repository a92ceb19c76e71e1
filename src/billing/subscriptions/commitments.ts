/**
 * Minimum commitment per billing period (DESIGN §14), pure.
 *
 * The rule: a period's charges are the fixed lines billed for it (in advance, on the invoice
 * that opened it) plus the usage lines billed for it at its close (usage, minimum and maximum
 * lines of its window), before credits are applied. When they are below the subscription's
 * commitment for that period, a `commitment_true_up` line bills the difference on the invoice
 * that closes the period. For a partial period the commitment is prorated by the part of the
 * period billed (remaining ms / period ms, exact), and the line rounds once, half-up.
 *
 * The line carries what it was sized on in its key, `commitment|<commitment>|<fixed>`, so that
 * a draft's finalization (which recomputes its usage lines) sizes it again on the new usage.
 */
import { checkAmount } from "../catalog/amounts.js";
import type { RateCard } from "../catalog/types.js";
import type { Violations } from "../errors.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal, roundAmount } from "../money.js";
import { type BillLine, cycleKey } from "./invoice-building.js";
import type { InvoiceStore } from "./ports.js";
import type { Commitment, InvoiceLine, Subscription } from "./types.js";

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
  if (c.next === undefined) return c;
  return c.next === null ? null : { currency: c.currency, current: c.next };
}

/** The true-up line's key: what it was sized on. */
function trueUpKey(commitment: Decimal, fixed: Decimal): string {
  return `commitment|${formatDecimal(commitment)}|${formatDecimal(fixed)}`;
}

/**
 * The `commitment_true_up` line of a period whose fixed charges were `fixed` and whose usage
 * lines are `usage`, against `commitment` × `fraction` (the part of the period billed); none when
 * the charges reach it (or it rounds to 0).
 */
export function trueUpLine(commitment: string, fixed: Decimal, usage: readonly Pick<BillLine, "amount" | "kind">[], currency: string, fraction: Decimal = dec(1)): BillLine | undefined {
  const owed = dec(commitment).times(fraction);
  const charges = usage.filter((l) => USAGE_KINDS.has(l.kind)).reduce((acc, l) => acc.plus(l.amount), fixed);
  const diff = roundAmount(owed.minus(charges));
  if (diff.lte(0)) return undefined;
  const whole = fraction.eq(1) ? "" : ` (prorated from ${displayMoney(formatDecimal(roundAmount(dec(commitment))), currency)})`;
  const description = `Minimum commitment ${displayMoney(formatDecimal(roundAmount(owed)), currency)}${whole}: charges of the period ${displayMoney(formatDecimal(charges), currency)}`;
  return { description, quantity: dec(1), unitAmount: diff, amount: diff, kind: "commitment_true_up", key: trueUpKey(owed, fixed), windowInvoiceId: null };
}

/** A stored true-up line sized again on a draft's recomputed usage lines (see the key). */
export function resizedTrueUp(line: InvoiceLine, usage: readonly Pick<BillLine, "amount" | "kind">[], currency: string): BillLine | undefined {
  const [, owed, fixed] = (line.key ?? "").split("|");
  if (owed === undefined || fixed === undefined) return undefined;
  return trueUpLine(owed, dec(fixed), usage, currency);
}

/** The fixed charges of a period as billed: the fixed lines of the invoice that opened it. */
export function fixedCharges(opening: { lines: readonly InvoiceLine[] } | undefined): Decimal {
  return (opening?.lines ?? []).filter((l) => l.kind === "fixed" || l.kind === "charge").reduce((acc, l) => acc.plus(dec(l.amount)), ZERO);
}

/**
 * The `commitment_true_up` line (none, or one) of `s`'s current period billed up to `end`: the
 * period's end at a cycle close (all of the commitment), or an earlier instant when the period
 * is cut short (an immediate cancellation: the commitment prorated by the part of the period
 * up to `end`). Reads the invoice that opened the period only when there is a commitment.
 */
export async function commitmentTrueUp(
  invoices: Pick<InvoiceStore, "byPeriodKey">,
  s: Subscription,
  usage: readonly Pick<BillLine, "amount" | "kind">[],
  currency: string,
  end: Date,
): Promise<BillLine[]> {
  const commitment = s.commitment?.current;
  if (!commitment) return [];
  const span = s.periodEnd.getTime() - s.periodStart.getTime();
  const upTo = Math.min(Math.max(end.getTime(), s.periodStart.getTime()), s.periodEnd.getTime());
  const fraction = span > 0 ? dec(upTo - s.periodStart.getTime()).div(span) : dec(1);
  const opening = await invoices.byPeriodKey(s.id, cycleKey(s, s.cycleIndex));
  const line = trueUpLine(commitment, fixedCharges(opening), usage, currency, fraction);
  return line ? [line] : [];
}
