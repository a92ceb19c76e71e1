/**
 * Credits applied to invoices (DESIGN §14). When an invoice becomes open (a cycle close that
 * finalizes at once, a draft at the end of its grace period, the immediate invoice of a change,
 * a proration, a resume), in the transaction that makes it open: the subject's spendable grants
 * in the invoice's currency, in spend order (priority, soonest expiry, oldest), are allocated by
 * allocateCredits (restricted grants only to lines of their rate codes) and each is spent by the
 * store's conditional spend with an "application" ledger entry on the invoice. The invoice keeps
 * `creditsApplied` and `amountDue` = total − applied (never negative); nothing is charged when
 * it is 0.
 * - Races: the grants are read again with a row lock (FOR UPDATE on MariaDB, whatever committed
 *   since the transaction's snapshot) before allocating, and held until commit, so two
 *   finalizations of one subject take turns and the second sees what the first left. A spend
 *   that still finds less than allocated (it cannot while the lock is held) fails the whole
 *   transaction as AbortedError (retryable: nothing was spent), never spending a credit twice.
 * - A draft shows what would be applied now: computed on read, nothing spent.
 * - A voided invoice gives back what it spent (as Stripe returns the balance applied to an invoice
 *   it voids): in the transaction of the void, each application is matched by a "reinstatement"
 *   entry and its grant's remaining restored; a grant expired or voided since lets it go again at
 *   once (reinstateCredits). An uncollectible invoice keeps it. What a voided invoice's total below
 *   0 granted goes with it, refused when some was spent (takeBackNegativeTotal).
 * - A credit purchase's invoice is never paid with credit.
 * - Proration credits (a seat decrease's net credit, what a resume's invoice could not take of
 *   the unused time) go to the subject's balance (DESIGN §13), a seat decrease's valued at what
 *   the period's invoices took for its rate net of discounts (unused-credit.ts), a carried one with
 *   the exclusive tax paid for the time it gives back (pauses.ts unusedTime): each a promotional grant of
 *   priority 50 for no rate in particular, without expiry, with a "proration" ledger entry
 *   (grantProrationCredits). Credits carried on a subscription from before (the earlier rule) move
 *   to the balance the same way at its next cycle close or change, then apply like any credit.
 * - Lines know their rate by their key (`<code>|…`): usage, minimum, maximum and adjustment lines
 *   always; fixed lines where the cycle close, a subscription's first invoice and a resume key
 *   them (keyedFixedLines); a seat change's proration lines (proration.ts). Other lines (a resume's
 *   credit, true-ups) are paid by unrestricted grants only. Coupons limited to rates (DESIGN §15)
 *   read the same keys; no coupon covers a credit for unused time (isCreditLine).
 */
import { carriedInOf } from "../payments/carries.js";
import { rateCodeOf } from "./line-cards.js";
import type { ChargedRates } from "../catalog/addons.js";
import { bookTotals } from "../invoicing/booking.js";
import { allocateCredits, appliedTotal, type ChargeLine } from "../credits/apply.js";
import type { CreditApplication, CreditGrant } from "../credits/types.js";
import { AbortedError, FailedPreconditionError } from "../errors.js";
import { creditGrantEvent } from "../events/types.js";
import { derivedBase62, randomBase62 } from "../ids.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal } from "../money.js";
import type { BillingStores, BillingTx } from "./ports.js";
import type { Invoice, InvoiceLine, InvoiceLineKind, ProrationCredit, Subscription } from "./types.js";

/** Line kinds whose key starts with their rate's code. */
const CODED: ReadonlySet<InvoiceLineKind> = new Set(["fixed", "usage", "minimum", "maximum", "adjustment", "proration"]);

/** A fixed rate's lines keyed by its code (`<code>|`), so a grant restricted to that code can pay them. */
export function keyedFixedLines<L extends { key: string | null }>(
  builder: { fixedLinesOf(fixed: ChargedRates["fixed"], s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">): L[] },
  fixed: ChargedRates["fixed"],
  s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">,
): L[] {
  return fixed.flatMap((r) => builder.fixedLinesOf([r], s).map((l) => ({ ...l, key: `${r.code}|` })));
}

/**
 * Whether `l` is a credit for unused time (a negative proration line: a pause's or a change's
 * credit, a seat decrease's, a credit carried from before): valued at what was paid for that time
 * (unused-credit.ts), so booking lets no current coupon discount it (../invoicing/booking.ts).
 */
export function isCreditLine(l: Pick<InvoiceLine, "kind" | "amount"> | undefined): boolean {
  return l?.kind === "proration" && dec(l.amount).isNegative();
}

/** An invoice's lines as credits see them: each with its rate code (null: none) and amount. */
export function chargeLines(inv: Pick<Invoice, "lines">): ChargeLine[] {
  return inv.lines.map((l) => {
    // What the line costs the buyer (DESIGN §15): its amount less its discounts plus its exclusive tax.
    let amount = dec(l.amount);
    for (const d of l.discountAmounts ?? []) amount = amount.minus(dec(d.amount));
    for (const t of l.taxAmounts ?? []) if (!t.inclusive) amount = amount.plus(dec(t.amount));
    return { rateCode: CODED.has(l.kind) ? rateCodeOf(l) : null, amount: formatDecimal(amount) };
  });
}

/** `inv` with `applied` and its amount due (total + carried in − applied, never negative). */
export function withApplications(inv: Invoice, applied: CreditApplication[]): Invoice {
  const due = payableTotal(inv).minus(dec(appliedTotal(applied)));
  return { ...inv, creditsApplied: applied, amountDue: formatDecimal(due.gt(0) ? due : ZERO) };
}

/** What credit may pay of `inv`: its total and what it took of carried debits (payments/carries.ts). */
function payableTotal(inv: Invoice): Decimal {
  return dec(inv.total).plus(carriedInOf(inv));
}

/** `inv`'s lines as credits see them (chargeLines), and what it took of carried debits as one of no rate (unrestricted grants pay it). */
function creditedLines(inv: Invoice): ChargeLine[] {
  const carried = carriedInOf(inv);
  return [...chargeLines(inv), ...(carried.gt(0) ? [{ rateCode: null, amount: formatDecimal(carried) }] : [])];
}

/** Whether credit can pay any of `inv`: an open (or draft) invoice of a positive amount (total and carried) that buys no credit. */
function payable(inv: Invoice): boolean {
  return payableTotal(inv).gt(0) && !inv.lines.some((l) => l.kind === "credit_purchase");
}

/**
 * The spendable grants of each invoice of `list` that applyCredits would read (open, payable),
 * as of its `atOf`, read at once per environment where the store can (keyed by invoice ID); the
 * others are not in the map (applyCredits reads them on its own). Read before any of `list` is
 * credited: the grants an earlier one spends are still listed with what they had, which changes
 * nothing, as applyCredits locks each listed grant and uses it only as the lock finds it.
 */
export async function spendableOfBatch(tx: BillingTx, list: readonly Invoice[], atOf: (i: Invoice) => Date): Promise<Map<string, CreditGrant[]>> {
  const out = new Map<string, CreditGrant[]>();
  const read = tx.credits?.spendableOfAll?.bind(tx.credits);
  if (!read) return out;
  const byEnv = new Map<string, Invoice[]>();
  for (const inv of list) if (inv.status === "open" && payable(inv)) byEnv.set(inv.environmentId, [...(byEnv.get(inv.environmentId) ?? []), inv]);
  for (const [env, invoices] of byEnv) {
    const found = await read(
      env,
      invoices.map((inv) => ({ subjectId: inv.subjectId, currency: inv.currency, at: atOf(inv) })),
    );
    invoices.forEach((inv, k) => {
      out.set(inv.id, found[k] ?? []);
    });
  }
  return out;
}

/**
 * Spends the subject's credit on `inv` (open, just finalized) in the transaction `tx`, as of
 * `at` on the subscription's clock; the invoice with what was applied. Nothing when the store
 * keeps no credits or the invoice is not open. `listed`: its spendable grants as read for its
 * batch (spendableOfBatch), else read here.
 */
export async function applyCredits(tx: BillingTx, inv: Invoice, at: Date, listed?: readonly CreditGrant[]): Promise<Invoice> {
  const credits = tx.credits;
  if (!credits || inv.status !== "open" || !payable(inv)) return withApplications(inv, []);
  listed ??= await credits.spendable(inv.environmentId, inv.subjectId, inv.currency, at);
  if (listed.length === 0) return withApplications(inv, []);
  // Locked, in spend order (the same for every finalization, so they cannot deadlock on grants).
  const fresh = [];
  for (const g of listed) {
    const locked = await credits.lockGrant(inv.environmentId, g.id);
    if (locked?.status === "active" && dec(locked.remaining).gt(0)) fresh.push(locked);
  }
  const applied = allocateCredits(creditedLines(inv), formatDecimal(payableTotal(inv)), fresh);
  for (const a of applied) {
    if (!(await credits.spend(a.grantId, a.amount, inv.id, `Applied to invoice ${inv.id}`, at, inv.environmentId))) {
      throw new AbortedError("CREDIT_CHANGED", `credit grant ${a.grantId} changed while invoice ${inv.id} was finalized; try again`, { credit_grant_id: a.grantId });
    }
  }
  return withApplications(inv, applied);
}

/**
 * Gives back the credit open invoice `inv`, just voided in `tx`, spent (BillingCreditWrites.reinstate)
 * as of `at` on its clock; nothing where the store keeps no credits. The move's conditional UPDATE
 * lets one void of an invoice get here, and the ledger's unique key a reinstatement once.
 */
export async function reinstateCredits(tx: BillingTx, inv: Pick<Invoice, "environmentId" | "subjectId" | "id">, at: Date): Promise<void> {
  if (!tx.credits) return;
  if (!tx.credits.reinstate) throw new Error("this store spends credit but cannot give it back");
  await tx.credits.reinstate(inv.environmentId, inv.subjectId, inv.id, at);
}

/** What credit would pay of a draft if it finalized at `at`: read in a transaction of its own, nothing spent. */
export async function previewCredits(stores: BillingStores, inv: Invoice, at: Date): Promise<Invoice> {
  if (!payable(inv)) return withApplications(inv, []);
  const grants = await stores.transaction(async (tx) => (tx.credits ? tx.credits.spendable(inv.environmentId, inv.subjectId, inv.currency, at) : []));
  return withApplications(inv, allocateCredits(creditedLines(inv), formatDecimal(payableTotal(inv)), grants));
}

/**
 * What the subscription's discounts take of each line of `mirror` (an invoice of `draft` status,
 * never written: a change's increases, to decide whether it nets to a charge, updates.ts) at `at`: the
 * discounts that would apply to an invoice of those lines now, in their order and on their rate
 * codes, as booking takes them (../invoicing/booking.ts), with the names of those that took
 * something; "once" ones left out (one is spent on one invoice, and a credit is none); nothing
 * without booking (the in-memory fake). Nothing is locked or recorded.
 */
export async function discountsOnLines(tx: BillingTx, mirror: Invoice, at: Date): Promise<{ amount: Decimal; names: string[] }[]> {
  const none = () => mirror.lines.map(() => ({ amount: ZERO, names: [] }));
  if (!tx.booking) return none();
  const discounts = (await tx.booking.discountsFor({ ...mirror, status: "draft" }, at)).filter((d) => d.duration !== "once");
  if (discounts.length === 0) return none();
  const booked = bookTotals({ lines: chargeLines(mirror), discounts, ratesPerLine: [], exempt: "none" });
  return booked.lines.map((l) => ({ amount: l.discountAmounts.reduce((a, d) => a.plus(dec(d.amount)), ZERO), names: l.discountAmounts.map((d) => d.name) }));
}

/**
 * Grants proration `credits` (negative amounts) of subscription `s` to its subject's balance in
 * `currency`, effective at `at`, in the transaction `tx`; what is left to carry on the
 * subscription: nothing, or all of them where the store keeps no credits (the in-memory fake).
 * A credit carried from an invoice that could not take it is granted with the exclusive tax it
 * carries (ProrationCredit.tax: a paused cycle's unused time, the tax paid for that time,
 * pauses.ts unusedTime), its description saying so: 6,774 unused of a cycle paid 10,000 + 1,000,
 * of which a resume's invoice took 5,000, carries 1,774 with −177 (−677 × 1,774 / 6,774) and is
 * granted 1,774 + 177 = 1,951; paid exempt or with the tax inside the price, 1,774.
 */
export async function grantProrationCredits(tx: BillingTx, s: Subscription, currency: string, credits: readonly ProrationCredit[], at: Date): Promise<ProrationCredit[]> {
  if (!tx.credits) return [...credits];
  for (const c of credits) {
    const tax = dec(c.tax ?? "0").neg();
    const amount = dec(c.amount).neg().plus(tax);
    if (amount.lte(0)) continue;
    const description = tax.isZero() ? c.description : `${c.description}, incl. tax: ${displayMoney(formatDecimal(tax), currency)}`;
    const grant = balanceGrant(`cg_${randomBase62(22)}`, s, currency, amount, at, { subscription_id: s.id });
    await tx.credits.insertGrant(grant, { type: "proration", invoiceId: null, description: description.slice(0, 1000) });
    await tx.emit([creditGrantEvent("credit_grant.created", grant)]);
  }
  return [];
}

/**
 * A credit never becomes a negative invoice (DESIGN §14): open invoice `inv`, booked with a total
 * below 0 (late usage withdrawn after its period closed: a −6,000 adjustment on a 1,000 charge,
 * total −5,000, amount due 0), grants −total (5,000) to its subject's balance in its currency as
 * of `at`, in the transaction that makes it open, with an "invoice_credit" ledger entry naming it;
 * the invoice keeps its total; what it carries in is taken off first. The grant's ID is derived
 * from the invoice's, so the store's unique key lets one invoice grant once. Nothing where the
 * store keeps no credits.
 */
export async function grantNegativeTotal(tx: BillingTx, inv: Invoice, at: Date): Promise<void> {
  // Amounts carried in (payments/carries.ts) are owed on top of the total: −1,000 with 30 carried in grants 970; −10 with 30, nothing (20 due).
  const amount = dec(inv.total).plus(carriedInOf(inv)).neg();
  if (!tx.credits || inv.status !== "open" || !amount.gt(0)) return;
  const grant = balanceGrant(invoiceCreditId(inv), inv, inv.currency, amount, at, { invoice_id: inv.id, subscription_id: inv.subscriptionId });
  await tx.credits.insertGrant(grant, { type: "invoice_credit", invoiceId: inv.id, description: `Credit from invoice ${inv.number ?? inv.id} (total below zero)` });
  await tx.emit([creditGrantEvent("credit_grant.created", grant)]);
}

/** The ID of the grant invoice `inv`'s total below 0 gave (grantNegativeTotal): derived from the invoice's, one per invoice. */
function invoiceCreditId(inv: Pick<Invoice, "environmentId" | "id">): string {
  return `cg_${derivedBase62(["invoice-credit", inv.environmentId, inv.id].join("\u0000"))}`;
}

/**
 * Takes back, in the transaction `tx` that voids open invoice `inv` (as of `at` on its clock), the
 * credit its total below 0 granted (grantNegativeTotal): the invoice no longer exists, so neither
 * does its credit. The grant is voided, what is left of it off the balance with a "void" entry
 * naming the invoice. Part of it spent already (a later invoice paid with it) refuses the void,
 * nothing written (INVOICE_CREDIT_SPENT): the balance is never negative (DESIGN §14), so the spent
 * part cannot be owed back through it, and the void would otherwise leave it with the customer. A
 * grant voided already (POST /credit-grants/{id}/void: its operator's decision on what was left)
 * or none (the invoice's total was not below 0) takes nothing.
 */
export async function takeBackNegativeTotal(tx: BillingTx, inv: Pick<Invoice, "environmentId" | "id" | "number" | "currency">, at: Date): Promise<void> {
  const g = await tx.credits?.lockGrant(inv.environmentId, invoiceCreditId(inv));
  if (!tx.credits || !g || (g.status !== "active" && g.status !== "depleted")) return;
  const spent = dec(g.amount).minus(dec(g.remaining));
  if (spent.gt(0)) {
    const money = (d: Decimal) => displayMoney(formatDecimal(d), inv.currency);
    throw new FailedPreconditionError(
      "INVOICE_CREDIT_SPENT",
      `invoice ${inv.id} cannot be voided: ${money(spent)} of the ${money(dec(g.amount))} credit its total below zero granted (credit grant ${g.id}) was spent on later invoices, which voiding it would not take back; void the credit grant to take back what is left (${money(dec(g.remaining))}), then the invoice`,
      { invoice_id: inv.id, credit_grant_id: g.id, spent_amount: formatDecimal(spent) },
    );
  }
  const voided = await tx.credits.close(inv.environmentId, g.id, "void", at, { invoiceId: inv.id, description: `Invoice ${inv.number ?? inv.id} voided: its credit taken back` });
  if (voided) await tx.emit([creditGrantEvent("credit_grant.voided", voided)]);
}

/**
 * A credit grant of `amount` for `owner`'s subject in `currency` as of `at` that the service gives
 * back (a change's proration credit, an invoice's total below 0): promotional, priority 50, no
 * expiry, for any rate.
 */
function balanceGrant(id: string, owner: Pick<Subscription, "environmentId" | "subjectId">, currency: string, amount: Decimal, at: Date, metadata: Record<string, string>): CreditGrant {
  return {
    id,
    environmentId: owner.environmentId,
    subjectId: owner.subjectId,
    currency,
    amount: formatDecimal(amount),
    remaining: formatDecimal(amount),
    category: "promotional",
    priority: 50,
    effectiveAt: at,
    expiresAt: null,
    appliesToRateCodes: [],
    metadata,
    status: "active",
    invoiceId: null,
    createdAt: at,
    voidedAt: null,
    expiredAt: null,
  };
}
