/**
 * What the unused time of a fixed rate is worth (DESIGN §13, §15), pure: the period's invoices are
 * walked once for what their fixed and proration lines took, net of discounts and of what credit
 * notes and earlier credits for unused time gave back of them, their amount credited (fixedTaken,
 * given-back.ts; a pause's unused time is capped by it too, pauses.ts), and a seat
 * decrease's credit for a rate is valued at what the period's paid invoices actually took for that
 * rate (valuedCredits):
 * - fraction = the discounts on the rate's fixed and proration charge lines (keyed `<code>|`) in
 *   the period's paid invoices / those lines' amounts; credit = list-price unused × (1 − fraction),
 *   rounded half up once per line. So a coupon that took half of what was billed halves the
 *   credit, a 100% one (a `once` one too) leaves nothing, and a coupon added after the period was
 *   paid at list takes nothing of it.
 * - Lines the rate was billed on without its code (a rate-card change's lines name the card, not
 *   a rate) stand for every rate that has none of its own in the period.
 * - Nothing billed (or nothing paid) for the rate in the period: nothing to give back, credit 0.
 * - Never more than what those lines took net of discounts and of what was given back for them
 *   before on the invoices (amount credited; negative lines of the rate), shared by the credits of
 *   one change in their order.
 * - All before tax. The exclusive tax a credit gives back is the tax those same lines booked on
 *   what it takes off, not the buyer's tax details at the change (paidTax): drawn from the lines
 *   newest first (the seats added last go first), each part at its own line's tax ÷ net of
 *   discounts (an open invoice's line counts as paid, a void or uncollectible one's gives back
 *   none), rounded half up once per credit, never more than the paid and open lines' tax less
 *   what the period's earlier decreases gave back (TaxCreditedTerms). 2 seats at 1,000 + 20% paid (2,400), half the
 *   period left: 500 + 100; paid exempt (2,000), then taxable: 500; a thousand one-seat
 *   decreases at 3 (3,000 + 600 paid) give back 600 of tax, not 1,000. Per rate as paid, those
 *   taxes are what the credit's line books on the invoice it lands on (paid-taxes.ts).
 */
import { type BookedTax, splitInProportion } from "../invoicing/booking.js";
import { type Decimal, ZERO, dec, formatDecimal, roundAmount } from "../money.js";
import type { BillLine } from "./invoice-building.js";
import { cardOfKey, rateCodeOf } from "./line-cards.js";
import { type DrawnRate, creditTaxes, drawRates } from "./paid-taxes.js";
import { isCarriedCredit } from "./proration.js";
import type { Invoice, InvoiceLine, Subscription } from "./types.js";

/** A line's discounts. */
const discountsOf = (l: InvoiceLine): Decimal => (l.discountAmounts ?? []).reduce((a, d) => a.plus(dec(d.amount)), ZERO);

/**
 * Whether a line is a fixed charge (or a proration of one) of the invoice's period: not a credit
 * carried onto it (isCarriedCredit: a resume's credit for the cycle the pause cut short lies on
 * the new cycle's first invoice, but it gives back time of the old one).
 */
const isFixed = (l: InvoiceLine): boolean => (l.kind === "fixed" || l.kind === "proration") && !isCarriedCredit(l);

/** A line's exclusive tax (an inclusive one is inside its amount). */
const exclusiveTax = (l: InvoiceLine): Decimal => (l.taxAmounts ?? []).reduce((a, t) => (t.inclusive ? a : a.plus(dec(t.amount))), ZERO);

/**
 * Whether `l` is a change of rate card's credit for the old card (a negative proration line naming
 * the card, change-lines.ts): what it gives back is recorded on the invoices it was drawn on, on
 * their amount credited (given-back.ts), so the invoice it lies on took it as a credit of other time.
 */
const isChangeCredit = (l: InvoiceLine): boolean => l.kind === "proration" && dec(l.amount).isNegative() && cardOfKey(l.key) !== null;

/** Whether `pick` counts `l` as a fixed line whose net an invoice took: never a change's credit for the old card (isChangeCredit). */
const takenLine = (l: InvoiceLine, pick: (l: InvoiceLine) => boolean): boolean => isFixed(l) && pick(l) && !isChangeCredit(l);

/**
 * What the credits of other time took off an invoice's total, their amounts and exclusive tax
 * negated: its negative proration lines that are not among the lines `pick` counts as taken (a
 * carried credit, never a fixed line; a change's credit for the old card, which the invoices it
 * was drawn on count in their amount credited; with a rate's pick, another rate's unused-time
 * credit too, which gives back time an earlier invoice paid for). Credits are never discounted.
 */
const otherCreditsOff = (inv: Invoice, pick: (l: InvoiceLine) => boolean): Decimal =>
  inv.lines.reduce((a, l) => (l.kind === "proration" && dec(l.amount).isNegative() && !takenLine(l, pick) ? a.plus(dec(l.amount)).plus(exclusiveTax(l)) : a), ZERO).neg();

/**
 * What the paid invoices among `billed` took for their fixed and proration lines that `pick`
 * selects (every one by default; never a credit carried onto the invoice from another period,
 * isCarriedCredit): per invoice, those lines less their discounts, never more than its total
 * before the credits of other time on it (otherCreditsOff) less its amount credited (what credit
 * notes and unused-time credits drawn on it gave back, given-back.ts); 0 at least. A resume's invoice (1,000 for the new cycle, −903 for the paused one's unused time: 97)
 * took 1,000 for the new cycle, not 97; an upgrade's (Pro's unused −9,355, Ent's rest +18,710:
 * 9,355) took 18,710 for Ent, not 9,355. Also the charge lines' amounts and
 * discounts (positive lines), from which a rate's discount fraction is read.
 */
export function fixedTaken(billed: readonly Invoice[], pick: (l: InvoiceLine) => boolean = () => true): { took: Decimal; charged: Decimal; discounted: Decimal } {
  let took = ZERO;
  let charged = ZERO;
  let discounted = ZERO;
  for (const inv of billed) {
    if (inv.status !== "paid") continue;
    let fixed = ZERO;
    for (const l of inv.lines) {
      if (!takenLine(l, pick)) continue;
      fixed = fixed.plus(dec(l.amount)).minus(discountsOf(l));
      if (dec(l.amount).gt(0)) {
        charged = charged.plus(dec(l.amount));
        discounted = discounted.plus(discountsOf(l));
      }
    }
    // The invoice's total before the credits of other time on it (carried credits; with a rate's
    // pick, other cards' and rates' unused-time credits): they pay for none of the picked lines.
    const kept = dec(inv.total)
      .plus(otherCreditsOff(inv, pick))
      .minus(dec(inv.amountCredited ?? "0"));
    const part = fixed.lte(kept) ? fixed : kept;
    if (part.gt(0)) took = took.plus(part);
  }
  return { took, charged, discounted };
}

/** Which lines stand for rate `code` in `billed`: its own, or (when it has none) those of no rate. */
function linesOf(billed: readonly Invoice[], code: string | null): (l: InvoiceLine) => boolean {
  const own = (l: InvoiceLine) => code !== null && rateCodeOf(l) === code;
  const paid = billed.filter((i) => i.status === "paid");
  return paid.some((i) => i.lines.some((l) => isFixed(l) && own(l))) ? own : (l) => rateCodeOf(l) === null;
}

/**
 * A credit line's description once valued: what the period's discounts took of the list-price
 * credit `l` (down to `net`), said only when they took something, and, when what the period's
 * invoices took for the rate holds it to `value`, that cap.
 */
function describe(l: BillLine, net: Decimal, value: Decimal, money: (d: Decimal) => string): string {
  const discounts = l.amount.neg().minus(net);
  const less = discounts.gt(0) ? `, less the period's discounts on it: ${money(discounts)}` : "";
  const capped = net.gt(value) ? `, at most what the period's invoices took for it: ${money(value)}` : "";
  return `${l.description}${less}${capped}`;
}

/**
 * `lines` of a change with each negative one (list-price unused time, keyed `<code>|`) valued at
 * what the period's invoices `billed` took for its rate (see the module's comment), in their
 * order; null for one valued at 0, the others as they are. `money` prints an amount for the
 * line's description.
 */
export function valuedCredits(lines: readonly BillLine[], billed: readonly Invoice[], money: (d: Decimal) => string): (BillLine | null)[] {
  const room = new Map<string, Decimal>();
  // In all, never more than the paid invoices took for fixed charges (an old card's credit on a
  // change's invoice is added back for the new card's lines, but only paid invoices count here).
  let paid = fixedTaken(billed).took;
  return lines.map((l) => {
    if (!l.amount.isNegative()) return l;
    const pick = linesOf(billed, rateCodeOf(l));
    const group = rateCodeOf(l) ?? "";
    const taken = fixedTaken(billed, pick);
    const fraction = taken.charged.gt(0) ? taken.discounted.div(taken.charged) : dec(1);
    const left = room.get(group) ?? taken.took;
    // The unused time before rounding (a proration line's unit amount, quantity 1), rounded once.
    const net = roundAmount(l.unitAmount.neg().times(dec(1).minus(fraction)));
    const cap = left.lt(paid) ? left : paid;
    const value = net.gt(cap) ? cap : net;
    room.set(group, left.minus(value));
    paid = paid.minus(value);
    if (value.lte(0)) return null;
    return { ...l, amount: value.neg(), unitAmount: value.neg(), description: describe(l, net, value, money) };
  });
}

/** The sum of `lines`' amounts. */
export const sumOf = (lines: readonly BillLine[]): Decimal => lines.reduce((a, l) => a.plus(l.amount), ZERO);

/**
 * The charged terms of a period (Subscription.chargedTerms) with `taxCredited`: the exclusive tax
 * seat decreases' credits gave back in the period starting at `periodStart` (ISO), per rate code
 * ("" for lines of no rate; paidTax); a later decrease in that period gives back at most the tax
 * paid less it; and, keyed `|<invoice ID>#<line index>` (drawnKey), the net each decrease drew
 * of each line, which a later one does not draw again. Kept in the row's charged_terms JSON, on
 * the row's own terms where the period is charged at them (updates.ts); a new period (the close,
 * a resume) or card drops it.
 */
export type TaxCreditedTerms = NonNullable<Subscription["chargedTerms"]> & { taxCredited?: { periodStart: string; amounts: Record<string, string> } };

/** The exclusive tax seat decreases' credits gave back in `s`'s period under way, per rate code ("" for none). */
export function taxCreditedIn(s: Pick<Subscription, "chargedTerms" | "periodStart" | "rateCardId">): Record<string, string> {
  const t = s.chargedTerms as TaxCreditedTerms | null | undefined;
  const same = t?.taxCredited?.periodStart === s.periodStart.toISOString() && (t.rateCardId === undefined || t.rateCardId === s.rateCardId);
  return same ? { ...(t?.taxCredited?.amounts ?? {}) } : {};
}

/** The lesser of two amounts. */
const minOf = (a: Decimal, b: Decimal): Decimal => (a.lt(b) ? a : b);

/**
 * Where TaxCreditedTerms' amounts keep what the period's decreases drew of a line (the net they
 * took off it, paidTax): `|<invoice ID>#<line index>`, which no rate code's total (`<code>`, or ""
 * for lines of no rate) can be, a rate code having no `|` (line keys are `<code>|…`).
 */
const drawnKey = (inv: Invoice, index: number): string => `|${inv.id}#${index}`;

/**
 * Whether an invoice's lines give back the tax they booked: a paid one's, and an open one's (it
 * still asks for that tax: a credit to the balance is what the customer pays for the time given
 * back, as change-lines.ts counts an open invoice as paid); a void or uncollectible one's none.
 */
const owesTax = (inv: Invoice): boolean => inv.status === "paid" || inv.status === "open";

/**
 * A charge line a credit can draw on: what it has left (its net less what was drawn), its net and
 * the exclusive tax paid on it, and its invoice (givenBack).
 */
type Slot = { key: string; left: Decimal; net: Decimal; tax: Decimal; rates: readonly BookedTax[]; invoice: Invoice };

/**
 * The lines `pick` selects of the period's invoices `billed` (oldest first) as a stack, the last
 * billed on top: each positive one with what it has left to give back (its amount less discounts,
 * less what decreases drew of it before, `drawn`, and what negative lines of the rate billed after
 * it took off the top), and the exclusive tax booked on it (owesTax: none on a void or
 * uncollectible invoice's line; an open proration invoice's seats still owe theirs).
 */
function stackOf(billed: readonly Invoice[], pick: (l: InvoiceLine) => boolean, drawn: Readonly<Record<string, string>>): Slot[] {
  const stack: Slot[] = [];
  for (const inv of billed) {
    inv.lines.forEach((l, i) => {
      if (!isFixed(l) || !pick(l)) return;
      const net = dec(l.amount).minus(discountsOf(l));
      if (net.isNegative()) {
        let off = net.neg();
        for (let j = stack.length - 1; j >= 0 && off.gt(0); j--) {
          const took = minOf(stack[j].left, off);
          stack[j].left = stack[j].left.minus(took);
          off = off.minus(took);
        }
      } else if (net.gt(0)) {
        const key = drawnKey(inv, i);
        const left = net.minus(dec(drawn[key] ?? "0"));
        const owes = owesTax(inv);
        stack.push({ key, left: left.isNegative() ? ZERO : left, net, tax: owes ? exclusiveTax(l) : ZERO, rates: owes ? (l.taxAmounts ?? []) : [], invoice: inv });
      }
    });
  }
  return stack;
}

/**
 * The exclusive tax each of a change's `valued` credits (valuedCredits) gives back, in their
 * order (0 for other lines). A credit is drawn from the lines it stands for (those valuedCredits
 * reads) newest first, what was added last being taken off first (stackOf), each part with its
 * own line's tax: the exclusive tax its paid or open invoice booked on it × the part / its amount
 * less discounts; a void or uncollectible line's part gives back none. Summed, rounded half up
 * once per credit, and never more than the tax the period's paid and open invoices booked on
 * those lines less what was given
 * back before in the period and by the change's earlier credits. `credited` (TaxCreditedTerms'
 * amounts) is what earlier decreases in the period gave back per rate code and drew of each line
 * (drawnKey); returned with this change's added. 2 seats paid at 1,000 + 20%, then exempt:
 * 2 → 12 (5,000, no tax), 12 → 2 gives back 5,000, none of the 400 paid for the 2 seats kept.
 * `rates`: each credit's taxes per rate as paid (paid-taxes.ts), what its line books on an
 * invoice; `pickOf`: the lines a credit stands for (by default those valuedCredits reads; every
 * fixed and proration line of the period, whatever its rate or card, for a change of rate card's
 * credit for the old card, valued on them all: change-lines.ts, given-back.ts changeGivenBack).
 */
export function paidTax(
  valued: readonly (BillLine | null)[],
  billed: readonly Invoice[],
  credited: Readonly<Record<string, string>>,
  pickOf: (l: BillLine) => (line: InvoiceLine) => boolean = (l) => linesOf(billed, rateCodeOf(l)),
): { taxes: Decimal[]; rates: BookedTax[][]; credited: Record<string, string>; givenBack: Map<string, Decimal>; draws: Map<string, Decimal>[] } {
  const given: Record<string, string> = { ...credited };
  const givenBack = new Map<string, Decimal>();
  const draws = valued.map(() => new Map<string, Decimal>());
  const rates = valued.map((): BookedTax[] => []);
  const taxes = valued.map((l, k) => {
    if (!l?.amount.isNegative()) return ZERO;
    const pick = pickOf(l);
    const group = rateCodeOf(l) ?? "";
    let paid = ZERO;
    for (const inv of billed) if (owesTax(inv)) for (const line of inv.lines) if (isFixed(line) && pick(line)) paid = paid.plus(exclusiveTax(line));
    const stack = stackOf(billed, pick, given);
    let rest = l.amount.neg();
    let exact = ZERO;
    const parts: { invoice: Invoice; net: Decimal; tax: Decimal }[] = [];
    const drawn = new Map<string, DrawnRate>();
    for (let j = stack.length - 1; j >= 0 && rest.gt(0); j--) {
      const slot = stack[j];
      const part = minOf(slot.left, rest);
      if (part.lte(0)) continue;
      const tax = slot.tax.times(part).div(slot.net);
      parts.push({ invoice: slot.invoice, net: part, tax });
      exact = exact.plus(tax);
      drawRates(drawn, slot.rates, part, slot.net);
      given[slot.key] = formatDecimal(dec(given[slot.key] ?? "0").plus(part));
      rest = rest.minus(part);
    }
    const before = dec(given[group] ?? "0");
    const room = paid.minus(before);
    let share = roundAmount(exact);
    if (share.gt(room)) share = room;
    if (share.lt(0)) share = ZERO;
    rates[k] = creditTaxes(
      drawn,
      l.amount.neg(),
      share,
      parts.reduce((a, p) => a.plus(p.net), ZERO),
    );
    addGivenBack(draws[k] as Map<string, Decimal>, parts, share);
    for (const [id, a] of draws[k] ?? []) givenBack.set(id, (givenBack.get(id) ?? ZERO).plus(a));
    if (share.isZero()) return ZERO;
    given[group] = formatDecimal(before.plus(share));
    return share;
  });
  return { taxes, rates, credited: given, givenBack, draws };
}

/**
 * Adds to `givenBack` (per invoice ID) what one credit drawn in `parts` gives back of each paid
 * or open invoice: the net it drew of the invoice's lines and its part of the credit's tax
 * `share`, split in proportion to the exact tax of each part (so the parts sum to the share). A
 * draft's, void or uncollectible invoice's part is no invoice's: no credit note can credit it.
 */
function addGivenBack(givenBack: Map<string, Decimal>, parts: readonly { invoice: Invoice; net: Decimal; tax: Decimal }[], share: Decimal): void {
  const taxes = splitInProportion(
    share,
    parts.map((p) => p.tax),
  );
  parts.forEach((p, i) => {
    if (!owesTax(p.invoice)) return;
    const amount = p.net.plus(taxes[i] ?? ZERO);
    givenBack.set(p.invoice.id, (givenBack.get(p.invoice.id) ?? ZERO).plus(amount));
  });
}
