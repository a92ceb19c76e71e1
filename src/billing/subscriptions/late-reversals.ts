/**
 * What late usage withdrawn gives back (DESIGN §14, §15): a late-usage adjustment below 0 (usage of
 * a finalized window withdrawn: the customer was billed too much) is a credit of the invoices that
 * billed that usage, as a credit note is, so the two together never give back more than they
 * took. As Stripe caps a credit note at what is left to credit of its invoice (and as a seat
 * decrease's credit is, given-back.ts), the reversal gives back of each such invoice at most what
 * credit notes (and earlier credits) left of it, and what it gives back is added to the invoice's
 * amount credited, so a later note may credit only what is left. The window's invoice billed 10,000
 * of usage and was paid; a note refunded it all; the usage withdrawn then gives nothing more (was
 * 10,000 more, 20,000 back of 10,000 paid); a note of 4,000 on the usage line leaves 6,000 to give
 * back; a reversal of 10,000 first leaves a later note the rest of the invoice (its other lines).
 *
 * What a reversal of a rate (and cell) of a window draws on, newest first: the positive lines of
 * that rate tied to the window on later invoices (late usage billed since), then the window's own
 * lines of it; of each, at most what is left of those lines (their amount less discounts plus
 * exclusive tax, less what credit notes credited of them: notes keep what they credited per line),
 * and of its invoice at most its total less its amount credited, shared by the run's reversals.
 * An open invoice counts as a paid one (as a note may reduce what it asks); a void or
 * uncollectible one gives back nothing (the customer paid none of it); a draft's lines are given
 * back whole and nothing is recorded on it (no note can credit a draft). Lines' amounts are
 * before discounts and tax, as the adjustment's: what is left of a line (after them) is turned
 * into its amount at the line's own ratio, and what the reversal takes is recorded after them
 * (10,000 + 20% paid, a note of 6,000: 5,000 left to reverse, 6,000 recorded). What the rate's
 * changes of usage terms billed at once (usage-term-changes.ts `settled`, on a change's invoice
 * tied to no window) is given back beyond the window's lines, never more than was settled, and
 * is recorded nowhere. A reversal that has nothing left to give back is dropped.
 *
 * Read outside the transaction that writes the adjustment (as the close computes its invoice);
 * that transaction records what it gives back with recordGivenBack (given-back.ts), which locks
 * each invoice it draws on as a note does and loses its race (retried from a fresh read) when one
 * is not as it was read. Nothing without credit-note storage (the in-memory fake).
 */
import { lineGross } from "../credit-notes/arithmetic.js";
import type { CreditNote } from "../credit-notes/types.js";
import { AbortedError } from "../errors.js";
import { type Decimal, ZERO, dec, roundAmount } from "../money.js";
import type { BillLine } from "./invoice-building.js";
import { readBackKey } from "./line-keys.js";
import type { BillingStores } from "./ports.js";
import type { Invoice, InvoiceLine } from "./types.js";

/** A subscription's finalized windows (InvoiceStore.windows): a tied line names the invoice it is on (`invoiceId`). */
type Windows = Awaited<ReturnType<BillingStores["invoices"]["windows"]>>;

/** What the run's reversals give back of each invoice (ID: amount after discounts and tax), and those invoices as read. */
export interface GivenBack {
  valuedOn: Invoice[];
  amounts: Map<string, Decimal>;
}

/** The error of a reversal whose invoice changed since it was read (a credit note committed meanwhile): retried from a fresh read. */
export const reversalMoved = (subscriptionId: string): AbortedError =>
  new AbortedError("INVOICE_CHANGED", `an invoice the late usage of subscription ${subscriptionId} gives back was credited meanwhile; try again`, { subscription_id: subscriptionId });

/** A line's key as late usage compares it (late-usage.ts): its key as stored, or its description without one. */
const keyOf = (l: Pick<InvoiceLine, "key" | "description">): string => (l.key === null ? l.description : readBackKey(l.key));

/** A reversal: a late-usage adjustment of a window below 0. */
const isReversal = (l: BillLine): boolean => l.kind === "adjustment" && l.windowInvoiceId !== null && l.amount.isNegative();

/** Window `w`'s own lines of key `k` on its invoice `inv` (late-usage.ts counts them as billed), or those tied to it on a later one. */
function groupOf(inv: Invoice, w: string, k: string): number[] {
  const own = inv.id === w;
  const out: number[] = [];
  inv.lines.forEach((l, i) => {
    const mine = own ? l.windowInvoiceId === null && ["usage", "minimum", "maximum", "adjustment"].includes(l.kind) : l.windowInvoiceId === w && l.kind === "adjustment";
    if (mine && keyOf(l) === k) out.push(i);
  });
  return out;
}

/** The invoices a reversal of key `k` of window `w` draws on, newest first: later ones with a positive line of it tied to `w`, then `w`'s. */
function sourcesOf(win: Windows[number], k: string): string[] {
  const tied = win.billed.flatMap((l) => {
    const on = l.invoiceId;
    return on && l.windowInvoiceId === win.invoice.id && l.kind === "adjustment" && keyOf(l) === k && dec(l.amount).gt(0) ? [on] : [];
  });
  return [...new Set(tied)].reverse().concat(win.invoice.id);
}

/** What the rate of key `k` billed at once for the window's changes of its usage terms (`settled`; their adjustments are keyed `<code>|`). */
function settledOf(inv: Invoice, k: string): Decimal {
  return (inv.window?.usageAdjustments ?? []).filter((a) => `${a.code}|` === k).reduce((acc, a) => acc.plus(dec(a.settled ?? "0")), ZERO);
}

/** The invoices `ids` with their credit notes; undefined without credit-note storage. */
async function readSources(stores: BillingStores, environmentId: string, ids: readonly string[]): Promise<Map<string, { invoice: Invoice; notes: CreditNote[] }> | undefined> {
  const notes = await stores.transaction(async (tx) => {
    const writes = tx.creditNotes;
    if (!writes) return undefined;
    const out = new Map<string, CreditNote[]>();
    for (const id of ids) out.set(id, await writes.ofInvoice(environmentId, id));
    return out;
  });
  if (!notes) return undefined;
  const out = new Map<string, { invoice: Invoice; notes: CreditNote[] }>();
  for (const id of ids) {
    const invoice = await stores.invoices.get(environmentId, id);
    if (invoice) out.set(id, { invoice, notes: notes.get(id) ?? [] });
  }
  return out;
}

/**
 * This run's late-usage `lines` of `windows` with each reversal capped at what is left to give back
 * (see the file's comment), a reversal with nothing left dropped; and what they give back of each
 * invoice, for recordGivenBack in the transaction that writes them.
 */
export async function capReversals(stores: BillingStores, environmentId: string, windows: Windows, lines: BillLine[]): Promise<{ lines: BillLine[]; givenBack: GivenBack }> {
  const none = { lines, givenBack: { valuedOn: [], amounts: new Map() } };
  const reversals = lines.filter(isReversal);
  if (reversals.length === 0) return none;
  const windowOf = new Map(windows.map((w) => [w.invoice.id, w]));
  const ids = new Set<string>();
  for (const l of reversals) {
    const win = windowOf.get(l.windowInvoiceId as string);
    if (win) for (const id of sourcesOf(win, keyOf(l))) ids.add(id);
  }
  const sources = await readSources(stores, environmentId, [...ids]);
  if (!sources) return none;
  const room = new Map<string, Decimal>();
  const amounts = new Map<string, Decimal>();
  const out: BillLine[] = [];
  for (const l of lines) {
    const win = isReversal(l) ? windowOf.get(l.windowInvoiceId as string) : undefined;
    if (!win) {
      out.push(l);
      continue;
    }
    const given = draw(win, keyOf(l), l.amount.neg(), sources, room, amounts);
    if (given.gt(0)) out.push(given.eq(l.amount.neg()) ? l : { ...l, amount: given.neg() });
  }
  const valuedOn = [...amounts.keys()].flatMap((id) => sources.get(id)?.invoice ?? []);
  return { lines: out, givenBack: { valuedOn, amounts } };
}

/**
 * What a reversal of `asked` (> 0, before discounts and tax) of key `k` of window `win` gives back
 * (see the file's comment), adding to `amounts` what it records on each invoice and taking it off
 * `room` (each invoice's total less its amount credited, read once per run).
 */
function draw(win: Windows[number], k: string, asked: Decimal, sources: Map<string, { invoice: Invoice; notes: CreditNote[] }>, room: Map<string, Decimal>, amounts: Map<string, Decimal>): Decimal {
  const groups = sourcesOf(win, k).flatMap((id) => {
    const src = sources.get(id);
    if (!src) return [];
    const idx = groupOf(src.invoice, win.invoice.id, k);
    const net = idx.reduce((a, i) => a.plus(dec((src.invoice.lines[i] as InvoiceLine).amount)), ZERO);
    const gross = idx.reduce((a, i) => a.plus(lineGross(src.invoice.lines[i] as InvoiceLine)), ZERO);
    let noted = ZERO;
    for (const n of src.notes) if (n.status === "issued") for (const nl of n.lines) if (nl.invoiceLineIndex !== null && idx.includes(nl.invoiceLineIndex)) noted = noted.plus(dec(nl.amount));
    return net.gt(0) ? [{ invoice: src.invoice, net, gross, left: gross.minus(noted) }] : [];
  });
  const billed = groups.reduce((a, g) => a.plus(g.net), ZERO);
  // Beyond the lines: what a change of usage terms billed at once on its own invoice, never more than that.
  const beyond = asked.gt(billed) ? asked.minus(billed) : ZERO;
  const settled = settledOf(win.invoice, k);
  let given = beyond.lt(settled) ? beyond : settled;
  let rest = asked.minus(beyond);
  for (const g of groups) {
    if (rest.lte(0)) break;
    const want = rest.lt(g.net) ? rest : g.net;
    let take = ZERO;
    if (g.invoice.status === "draft") take = want;
    else if ((g.invoice.status === "paid" || g.invoice.status === "open") && g.gross.gt(0)) {
      const left = room.get(g.invoice.id) ?? dec(g.invoice.total).minus(dec(g.invoice.amountCredited ?? "0"));
      const cap = g.left.lt(left) ? g.left : left;
      if (cap.lte(0)) continue;
      // What is left is after discounts and tax; the adjustment's amount before them, at the lines' ratio.
      const ratio = g.gross.div(g.net);
      const fits = want.times(ratio).lte(cap);
      take = fits ? want : roundAmount(cap.div(ratio));
      if (take.gt(want)) take = want;
      const recorded = roundAmount(take.times(ratio));
      const rec = recorded.lt(cap) ? recorded : cap;
      room.set(g.invoice.id, left.minus(rec));
      if (rec.gt(0)) amounts.set(g.invoice.id, (amounts.get(g.invoice.id) ?? ZERO).plus(rec));
    }
    given = given.plus(take);
    rest = rest.minus(take);
  }
  return given;
}
