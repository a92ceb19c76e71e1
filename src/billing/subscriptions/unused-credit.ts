/**
 * What the unused time of a fixed rate is worth (DESIGN §13, §15), pure: the period's invoices are
 * walked once for what their fixed and proration lines took, net of discounts and of what credit
 * notes gave back (fixedTaken; a pause's unused time is capped by it too, pauses.ts), and a seat
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
 *   before on the invoices (credit notes; negative lines of the rate), shared by the credits of
 *   one change in their order.
 * - Only seats paid for: the credit is drawn from the rate's lines newest first (the seats added
 *   last go first, unused-draws.ts), and what it takes of a void or written-off invoice's lines,
 *   or beyond what is left of an invoice after its credit notes, is not credited. 1 seat at 5,000
 *   paid, 1 → 3 at half the period on an invoice then voided, 3 → 1: 0, not 5,000.
 * - All before tax. The exclusive tax a credit gives back is the tax those same lines booked on
 *   what it takes off, not the buyer's tax details at the change (paidTax): each part at its own
 *   line's tax ÷ net of discounts (an open invoice's line counts as paid, a void or uncollectible
 *   one's gives back none), rounded half up once per credit, never more than the paid and open
 *   lines' tax less what the period's earlier decreases gave back (TaxCreditedTerms), nor than is
 *   left of the invoices drawn on once the credit is. 2 seats at 1,000 + 20% paid (2,400), half the
 *   period left: 500 + 100; paid exempt (2,000), then taxable: 500; a thousand one-seat
 *   decreases at 3 (3,000 + 600 paid) give back 600 of tax, not 1,000.
 */
import { splitInProportion } from "../invoicing/booking.js";
import { type Decimal, ZERO, dec, formatDecimal, roundAmount } from "../money.js";
import type { BillLine } from "./invoice-building.js";
import { rateCodeOf } from "./line-cards.js";
import type { Invoice, InvoiceLine, Subscription } from "./types.js";
import { type Draw, type DrawnAt, drawFrom, exclusiveTax, isFixed, minOf, otherCreditsOff, owesTax, roomOf, stackOf, discountsOf } from "./unused-draws.js";

/**
 * What the paid invoices among `billed` took for their fixed and proration lines that `pick`
 * selects (every one by default; never a credit carried onto the invoice from another period,
 * isCarriedCredit): per invoice, those lines less their discounts, never more than its total
 * before the credits of other time on it (otherCreditsOff) less what credit notes gave back; 0 at
 * least. A resume's invoice (1,000 for the new cycle, −903 for the paused one's unused time: 97)
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
      if (!isFixed(l) || !pick(l)) continue;
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

/** A credit valued by valuedCredits, with what it draws of the period's lines (unused-draws.ts), newest first. */
export type ValuedLine = BillLine & { draws?: readonly Draw[] };

/**
 * `lines` of a change at `from.at` with each negative one (list-price unused time, keyed
 * `<code>|`) valued at what the period's invoices `billed` (void ones too) took for its rate (see
 * the module's comment), in their order; null for one valued at 0, the others as they are.
 * `from.credited`: TaxCreditedTerms' amounts (what earlier decreases drew of each line).
 * `money` prints an amount for the line's description.
 */
export function valuedCredits(
  lines: readonly BillLine[],
  billed: readonly Invoice[],
  money: (d: Decimal) => string,
  from: DrawnAt & { credited: Readonly<Record<string, string>> },
): (ValuedLine | null)[] {
  const room = new Map<string, Decimal>();
  const drawn: Record<string, string> = { ...from.credited };
  const rooms = new Map<string, Map<string, Decimal>>();
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
    // The seats it takes off, the last added first: what no money backs (never paid, or given back by a note) is not credited.
    const backing = new Map(rooms.get(group) ?? []);
    const draws = drawFrom(stackOf(billed, pick, drawn, from), net, (inv) => roomOf(inv, pick), backing);
    const unbacked = draws.reduce((a, d) => a.plus(d.taken).minus(d.worth), ZERO);
    const cap = left.lt(paid) ? left : paid;
    const value = minOf(roundAmount(net.minus(unbacked)), cap);
    room.set(group, left.minus(value));
    paid = paid.minus(value);
    if (value.lte(0)) return null;
    rooms.set(group, backing);
    // Each invoice's part in whole units, together never more than the credit.
    const worths = splitInProportion(
      minOf(value, roundAmount(draws.reduce((a, d) => a.plus(d.worth), ZERO))),
      draws.map((d) => d.worth),
    );
    for (const d of draws) drawn[d.key] = formatDecimal(dec(drawn[d.key] ?? "0").plus(d.full));
    const valued: ValuedLine = { ...l, amount: value.neg(), unitAmount: value.neg(), description: describe(l, net, value, money) };
    return { ...valued, draws: draws.map((d, i) => ({ ...d, worth: worths[i] ?? ZERO })) };
  });
}

/** The sum of `lines`' amounts. */
export const sumOf = (lines: readonly BillLine[]): Decimal => lines.reduce((a, l) => a.plus(l.amount), ZERO);

/**
 * The charged terms of a period (Subscription.chargedTerms) with `taxCredited`: the exclusive tax
 * seat decreases' credits gave back in the period starting at `periodStart` (ISO), per rate code
 * ("" for lines of no rate; paidTax); a later decrease in that period gives back at most the tax
 * paid less it; and, keyed `|<invoice ID>#<line index>` (unused-draws.ts), what each decrease
 * drew of each line in the line's own terms, which a later one does not draw again. Kept in the row's charged_terms JSON, on
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

/**
 * The exclusive tax each of a change's `valued` credits (valuedCredits) gives back, in their
 * order (0 for other lines). A credit is drawn from the lines it stands for newest first, what
 * was added last being taken off first (valuedCredits' draws), each part with its own line's
 * tax: the exclusive tax its paid or open invoice booked on it × the part's worth / its amount
 * less discounts; a void or uncollectible line's part gives back none. Summed, rounded half up
 * once per credit, and never more than the tax the period's paid and open invoices booked on
 * those lines less what was given back before in the period and by the change's earlier
 * credits, nor more than is left to give back of the invoices drawn on once the credit is (their
 * total less amount credited: after a note of 9,600 on 10,000 + 2,000 of 20% VAT, 2,000 + 400).
 * `credited` (TaxCreditedTerms' amounts) is what earlier decreases in the period gave back per
 * rate code and drew of each line; returned with this change's added. 2 seats paid at 1,000 +
 * 20%, then exempt: 2 → 12 (5,000, no tax), 12 → 2 gives back 5,000, none of the 400 paid for
 * the 2 seats kept.
 */
export function paidTax(
  valued: readonly (ValuedLine | null)[],
  billed: readonly Invoice[],
  credited: Readonly<Record<string, string>>,
): { taxes: Decimal[]; credited: Record<string, string>; givenBack: Map<string, Decimal>; draws: Map<string, Decimal>[] } {
  const given: Record<string, string> = { ...credited };
  const givenBack = new Map<string, Decimal>();
  const draws = valued.map(() => new Map<string, Decimal>());
  const taxes = valued.map((l, k) => {
    if (!l?.amount.isNegative()) return ZERO;
    const pick = linesOf(billed, rateCodeOf(l));
    const group = rateCodeOf(l) ?? "";
    let paid = ZERO;
    for (const inv of billed) if (owesTax(inv)) for (const line of inv.lines) if (isFixed(line) && pick(line)) paid = paid.plus(exclusiveTax(line));
    const parts = (l.draws ?? []).filter((d) => d.worth.gt(0)).map((d) => ({ invoice: d.invoice, net: d.worth, tax: owesTax(d.invoice) ? d.worth.times(d.ratio) : ZERO }));
    for (const d of l.draws ?? []) given[d.key] = formatDecimal(dec(given[d.key] ?? "0").plus(d.full));
    const exact = parts.reduce((a, p) => a.plus(p.tax), ZERO);
    const before = dec(given[group] ?? "0");
    let share = minOf(minOf(roundAmount(exact), paid.minus(before)), taxRoom(parts, pick, givenBack));
    if (share.lt(0)) share = ZERO;
    addGivenBack(draws[k] as Map<string, Decimal>, parts, share);
    for (const [id, a] of draws[k] ?? []) givenBack.set(id, (givenBack.get(id) ?? ZERO).plus(a));
    if (share.isZero()) return ZERO;
    given[group] = formatDecimal(before.plus(share));
    return share;
  });
  return { taxes, credited: given, givenBack, draws };
}

/**
 * The most tax a credit drawn in `parts` may give back: what is left to give back of the paid and
 * open invoices it draws on (roomOf with the tax, less what the change's earlier credits gave back
 * of them, `givenBack`) less the net it draws of them, in whole units.
 */
function taxRoom(parts: readonly { invoice: Invoice; net: Decimal }[], pick: (l: InvoiceLine) => boolean, givenBack: ReadonlyMap<string, Decimal>): Decimal {
  const seen = new Set<string>();
  let room = ZERO;
  for (const p of parts) {
    if (!owesTax(p.invoice)) continue;
    if (!seen.has(p.invoice.id)) room = room.plus(roomOf(p.invoice, pick, true)).minus(givenBack.get(p.invoice.id) ?? ZERO);
    seen.add(p.invoice.id);
    room = room.minus(p.net);
  }
  return room.gt(0) ? room.floor() : ZERO;
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
