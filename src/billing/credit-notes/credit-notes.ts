/**
 * Credit notes (DESIGN §15): issue one against an open or paid invoice, read and list them. See
 * arithmetic.ts for what is credited, ports.ts for the transaction that writes one, and the
 * contract (CreateCreditNote) for the errors.
 *
 * Outcomes, decided in the same transaction as the note:
 * - reduce_amount_due: an open invoice's amount due is lowered (never below 0, never by more than
 *   it is); at 0 it becomes paid with its `invoice.paid` event, and a charge of it still waiting
 *   for the customer (3-D Secure) is cancelled at the provider as a voided invoice's is: written in
 *   the note's transaction, made after its commit (payments/cancels.ts; the sweep if that fails).
 * - credit_balance: a promotional grant on the subject's balance in the invoice's currency (§14),
 *   priority 50, no expiry, for every rate, with a "credit_note" ledger entry on the invoice. Only
 *   on a paid invoice (INVOICE_NOT_PAID): an open one's credit is reduce_amount_due, so that no
 *   credit is spendable for money never received. Not on a credit purchase's invoice
 *   (INVOICE_NOT_CREDITABLE): its credit is on the balance already; a refund note takes it back.
 * - refund: a paid invoice that was charged through the payment provider (an amount due above 0)
 *   is refunded through the environment's provider, against its charge (chargeKey of attempt 1),
 *   with an idempotency key derived from the note's id: the provider answers a repeat with the
 *   first refund, never a second one. The refund is the transaction's last call: after it only the
 *   note's own row and events are written; a retry after a lost race keeps the note's ID (hence
 *   the key) whatever committed meanwhile, and so does a request retried with its Idempotency-Key
 *   after a 5xx (keyedCreditNoteId): a refund the provider made under that key, asked for before
 *   anything is planned, is the note, written as made whatever the invoice allows now, and the
 *   provider is not asked to refund again (refunded-earlier.ts). A refusal fails the whole note
 *   (nothing is written). A refund of a credit purchase also takes back the
 *   credit it refunds, at most what is unspent, with a "void" ledger entry on the purchase's
 *   invoice naming the note (purchase-refund.ts).
 *   The note's refundStatus is the provider's answer (Stripe's refund may be `pending`: the money
 *   not back yet), then moved by the provider's refund events, a failure announced
 *   (`credit_note.refund_failed`) and the note left issued (refund-status.ts).
 */
import { purchasedGrantId } from "../credits/purchase-states.js";
import { FailedPreconditionError, InvalidArgumentError, NotFoundError, Violations } from "../errors.js";
import type { CreditGrant } from "../credits/types.js";
import { type NewEvent, creditGrantEvent } from "../events/types.js";
import { derivedBase62, randomBase62 } from "../ids.js";
import { dec, formatDecimal } from "../money.js";
import { type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { retryingRaces } from "../subscriptions/races.js";
import { checkTransition, transitionEvents } from "../subscriptions/invoice-states.js";
import { recordCancels } from "../payments/cancels.js";
import type { ProviderEventRef } from "../payments/event-writes.js";
import type { RefundUpdate, RefundUpdated } from "../payments/types.js";
import type { Lookups } from "../subscriptions/lookups.js";
import { noPaymentProvider } from "../subscriptions/payments.js";
import { type Invoice, type PaymentProvider, amountDueOf } from "../subscriptions/types.js";
import { type CreditAsk, type CreditPlan, type PlanProblem, creditableLines, planCredit } from "./arithmetic.js";
import type { CreditNoteStore, CreditNoteTx } from "./ports.js";
import { type TakeBack, checkTakeBack, takeBackPurchased } from "./purchase-refund.js";
import { refundUpdated } from "./refund-status.js";
import { type KeptRefund, type MadeRefund, RefundedEarlier, madeUnderKey, paidBy, refundKey, refundedEarlier } from "./refunded-earlier.js";
import type { CreditNote } from "./types.js";
import { type CheckedCreditNote, type CreateCreditNoteInput, checkCreditNote, checkLineIndexes } from "./validation.js";

/** A credit note's ID from the parts it is derived from: `cn_` and 22 base62 characters of their hash. */
const derivedId = (parts: readonly (string | number)[]): string => `cn_${derivedBase62(parts.join("\u0000"))}`;

/**
 * A credit note's ID asked without an Idempotency-Key, derived from what it is written over: its
 * invoice, how many notes the invoice had and what they credited, and what this one credits how.
 * A note whose transaction rolled back after its refund went through (the commit failed), asked
 * again while the invoice is as it was, gets the same ID, hence the same refund idempotency key,
 * and the provider answers with the first refund. Every committed note changes the count, so no
 * two notes share an ID. Within one create(), a retry after the refund keeps the first attempt's
 * ID even if another note of the invoice committed in between (which changes the count): see
 * create(). A call asked again after another note committed is another note: with a key, see
 * keyedCreditNoteId.
 */
export function creditNoteId(environmentId: string, invoiceId: string, notesBefore: number, creditedBefore: string, total: string, outcome: string): string {
  return derivedId([environmentId, invoiceId, notesBefore, creditedBefore, total, outcome]);
}

/**
 * A credit note's ID asked with an Idempotency-Key (DESIGN §12): derived from the environment, the
 * invoice, that key and what the request asks (the outcome, and the amount or each line's amount,
 * "all" where none is given), never from the notes before it. A call that failed with a 5xx after
 * the provider refunded (the answer lost, the commit failed; its key let go), retried with its key
 * after another note of the invoice committed, gets the same ID, hence the same refund key: the
 * provider answers with the first refund, never a second. The request, not the total it comes to,
 * so that a whole note asked again after the invoice changed keeps its ID too (the provider then
 * refuses the other amount under the same key rather than refunding again). The same key reused
 * for the same request once it expired meets the note it wrote, and is answered with it (create()).
 */
export function keyedCreditNoteId(environmentId: string, invoiceId: string, idempotencyKey: string, outcome: string, ask: CreditAsk): string {
  const asked = ask.kind === "amount" ? `amount=${ask.amount?.toFixed() ?? "all"}` : ask.lines.map((l) => `line${l.index}=${l.amount?.toFixed() ?? "all"}`).join(",");
  return derivedId(["idempotency-key", environmentId, invoiceId, idempotencyKey, outcome, asked]);
}

export const creditNoteEvent = (note: CreditNote): NewEvent => ({ type: "credit_note.created", environmentId: note.environmentId, resource: { kind: "credit_note", creditNote: note } });

export interface ListCreditNotesInput {
  invoiceId: string;
  subjectId: string;
  limit?: number;
  offset?: number;
}

const notFound = (id: string) => new NotFoundError("INVOICE_NOT_FOUND", `invoice_id: invoice ${JSON.stringify(id)} not found`, { invoice_id: id });

/**
 * A charge of the invoice waits for the customer (3-D Secure, a pay link), or a bank debit of it is
 * processing, for its whole amount due: lowering that amount would leave the customer paying the
 * old one (a debit that succeeds is never refunded its difference when its webhook is lost, since
 * the look-up that then pays it knows no amount received). Only a note crediting all of it is
 * taken (it pays the invoice; the waiting payment is cancelled, a debit that succeeds refunded).
 */
function checkNotWaiting(inv: Invoice, total: string): void {
  const due = amountDueOf(inv);
  if (!(inv.payment?.actionRequired || inv.payment?.processing) || dec(total).gte(dec(due))) return;
  const [reason, what] = inv.payment?.processing ? ["INVOICE_PAYMENT_PROCESSING", "a bank debit of it is processing"] : ["INVOICE_PAYMENT_WAITS_FOR_CUSTOMER", "its payment waits for the customer"];
  throw new FailedPreconditionError(
    reason,
    `outcome: reduce_amount_due cannot lower invoice ${inv.id}'s amount due ${due} by ${total} while ${what} (for the full amount); void the invoice or let that payment finish first, or credit the full amount due`,
    { invoice_id: inv.id, amount_due: due, field: "outcome" },
    [{ field: "outcome", description: `cannot be reduce_amount_due for less than the amount due while ${what}` }],
  );
}

/** Whether an invoice in its status may take a credit note with `outcome` (FAILED_PRECONDITION otherwise). */
export function checkCreditable(inv: Invoice, outcome: CheckedCreditNote["outcome"]): void {
  const meta = { invoice_id: inv.id, status: inv.status };
  if (inv.status !== "open" && inv.status !== "paid") {
    throw new FailedPreconditionError("INVOICE_NOT_CREDITABLE", `invoice ${inv.id} is ${inv.status}; only an open or paid invoice can be credited`, meta);
  }
  // A credit purchase still waiting for its payment is voided, not credited (its grant then fails: credits/purchase-states.ts).
  const grantId = purchasedGrantId(inv);
  if (inv.status === "open" && grantId !== undefined) {
    throw new FailedPreconditionError("INVOICE_NOT_CREDITABLE", `invoice ${inv.id} buys credit grant ${grantId} and is not paid yet; void it instead`, meta);
  }
  // A paid purchase's credit is on the balance already: a balance credit for it would be the same credit twice.
  if (outcome === "credit_balance" && grantId !== undefined) {
    throw new FailedPreconditionError(
      "INVOICE_NOT_CREDITABLE",
      `outcome: credit_balance cannot credit invoice ${inv.id}: it bought credit grant ${grantId}, whose credit is on the balance already (a balance credit for it would be the same credit twice); issue a credit note with outcome refund instead, which takes the unspent credit back with the money`,
      { ...meta, field: "outcome", credit_grant_id: grantId },
      [{ field: "outcome", description: `cannot be credit_balance on a credit purchase's invoice (its credit is on the balance already); use refund` }],
    );
  }
  // Money not received is not given back: an open invoice is credited by lowering what it asks (as
  // Stripe's pre-payment credit note), never by balance credit that would outlive its voiding or dunning.
  if (outcome === "credit_balance" && inv.status !== "paid") {
    throw new FailedPreconditionError(
      "INVOICE_NOT_PAID",
      `outcome: credit_balance cannot credit invoice ${inv.id}: it is ${inv.status}, not paid yet (a balance credit would be credit for money not received, kept if the invoice is voided or never paid); issue a credit note with outcome reduce_amount_due instead, which lowers its amount due`,
      { ...meta, field: "outcome" },
      [{ field: "outcome", description: "cannot be credit_balance on an invoice that is not paid; use reduce_amount_due" }],
    );
  }
  if (outcome === "reduce_amount_due" && inv.status !== "open") {
    throw new FailedPreconditionError("INVOICE_NOT_OPEN", `invoice ${inv.id} is ${inv.status}; only an open invoice's amount due can be reduced (use refund or credit_balance)`, meta);
  }
  // Paid by carrying its amount due to the next invoice (below the provider's minimum charge, payments/carries.ts): nothing was charged either.
  if (outcome === "refund" && (inv.status !== "paid" || !dec(amountDueOf(inv)).gt(0) || inv.payment?.carried)) {
    const why = inv.status !== "paid" ? `is ${inv.status}` : "was paid by no provider (nothing was charged)";
    throw new FailedPreconditionError("INVOICE_NOT_REFUNDABLE", `invoice ${inv.id} ${why}; only a paid invoice charged through the payment provider can be refunded`, meta);
  }
}

/** The error of a plan that cannot be made. */
function planError(inv: Invoice, problems: PlanProblem[]): Error {
  const over = problems.find((p) => p.kind === "exceeds_invoice");
  if (over) {
    return new FailedPreconditionError(
      "CREDIT_EXCEEDS_INVOICE",
      `${over.asked.lte(0) ? "nothing" : over.asked.toFixed()} to credit, but ${over.left.toFixed()} of invoice ${inv.id}'s total ${inv.total} is left to credit`,
      { invoice_id: inv.id, left: over.left.toFixed() },
    );
  }
  return new InvalidArgumentError(
    problems.flatMap((p) => (p.kind === "line_exceeded" ? [{ field: `lines[${p.position}].${p.field}`, description: `is more than what is left to credit of the line (${p.left.toFixed()})` }] : [])),
  );
}

export class CreditNotes {
  /** Told after a credit note put credit on a subject's balance: credit alerts are evaluated then. */
  changed: ((environmentId: string, subjectId: string) => Promise<unknown>) | undefined = undefined;
  /** Cancels a payment left waiting for the customer on an invoice a note paid (payments/cancels.ts), once wired. */
  cancels: { settle(ref: Pick<Invoice, "environmentId" | "id">): Promise<boolean> } | undefined = undefined;

  constructor(
    private readonly store: CreditNoteStore,
    private readonly lookups: Lookups,
    private readonly publicBaseUrl: () => string,
  ) {}

  /** GET /credit-notes/{id}/pdf, where the note's PDF is served. */
  pdfUrl(note: Pick<CreditNote, "id">): string {
    return `${this.publicBaseUrl()}/credit-notes/${note.id}/pdf`;
  }

  /**
   * Issues a credit note; see the file's comment and the contract. `idempotencyKey`, the request's
   * (DESIGN §12), names the note (keyedCreditNoteId): a note of that ID already written is answered as it is.
   */
  async create(caller: Caller, input: CreateCreditNoteInput, idempotencyKey?: string): Promise<CreditNote> {
    const v = new Violations();
    const c = checkCreditNote(input, v);
    v.throwIfAny();
    const env = caller.environmentId;
    const before = await this.lookups.stores.invoices.get(env, c.invoiceId);
    if (!before) throw notFound(c.invoiceId);
    checkCreditable(before, c.outcome);
    const provider = c.outcome === "refund" ? await this.lookups.paymentsFor(caller) : undefined;
    if (c.outcome === "refund" && !provider) throw noPaymentProvider("a refund cannot be made");
    const subject = await this.lookups.stores.directory.subject(env, before.subjectId);
    const now = subject ? await this.lookups.nowFor(subject) : this.lookups.engine.now();
    // A deadlock or lock wait (AbortedError) runs the whole transaction again from the locking
    // read. A refund the provider made in an attempt that then lost its race stays made: every
    // later attempt of this call writes that very note (its ID, lines and total kept, whatever was
    // committed meanwhile, even beyond what is left to credit: the money went back), with that
    // refund, and never asks the provider again, so there is never a second refund, nor a refund
    // that no note records. So is a keyed note's refund that the provider made for an earlier call
    // whose answer was lost, asked for before anything is planned or refused (refunded-earlier.ts).
    const keyed = idempotencyKey === undefined ? undefined : keyedCreditNoteId(env, c.invoiceId, idempotencyKey, c.outcome, c.ask);
    let refunded: KeptRefund | undefined = keyed && provider ? await madeUnderKey(provider, before, keyed, c.ask) : undefined;
    const attempt = () =>
      this.store.transaction(async (tx) => {
        const inv = await tx.lockInvoice(env, c.invoiceId);
        if (!inv) throw notFound(c.invoiceId);
        const earlier = await tx.ofInvoice(env, inv.id);
        // The key's note is written already (the key reused for the same request once it expired): that note, nothing more.
        const existing = keyed === undefined ? undefined : earlier.find((n) => n.id === keyed);
        if (existing) return { written: existing, cancel: false };
        // The same note (same state, same credit) committed meanwhile took that ID, and with it that refund: this one is another.
        if (refunded && earlier.some((n) => n.id === refunded?.id)) refunded = undefined;
        const kept = refunded;
        if (!kept) checkCreditable(inv, c.outcome);
        const lv = new Violations();
        checkLineIndexes(c.ask, inv.lines.length, lv);
        lv.throwIfAny();
        const credited = inv.amountCredited ?? "0";
        const left = dec(inv.total).minus(dec(credited));
        const plan = kept?.plan ?? planCredit(creditableLines(inv.lines, earlier), left, c.ask);
        if (Array.isArray(plan)) throw planError(inv, plan);
        const id = kept?.id ?? keyed ?? creditNoteId(env, inv.id, earlier.length, formatDecimal(dec(credited)), plan.total, c.outcome);
        if (c.outcome === "reduce_amount_due" && dec(plan.total).gt(dec(amountDueOf(inv)))) {
          throw new FailedPreconditionError("CREDIT_EXCEEDS_AMOUNT_DUE", `${plan.total} to credit is more than invoice ${inv.id}'s amount due ${amountDueOf(inv)}`, {
            invoice_id: inv.id,
            amount_due: amountDueOf(inv),
          });
        }
        if (c.outcome === "reduce_amount_due") checkNotWaiting(inv, plan.total);
        if (!(await tx.addCredited(env, inv.id, plan.total, kept !== undefined))) throw planError(inv, [{ kind: "exceeds_invoice", asked: dec(plan.total), left }]);
        const effects = await this.outcome(tx, c, inv, plan, id, now, kept !== undefined);
        // The number after the outcome's writes: the sequence row stays locked only from here to the commit.
        const number = await tx.nextNumber(env);
        // A refunded purchase's credit, checked before, is taken back under the note's number.
        const taken = effects.takeBackFrom === undefined ? [] : await takeBackPurchased(tx, effects.takeBackFrom, { id, number, environmentId: env, invoiceId: inv.id }, now);
        // The refund last: after it only the note's own row and events are written (new rows, hardly a lock to wait on).
        let made: MadeRefund | null = null;
        if (c.outcome === "refund") {
          made = kept?.refund ?? (await this.refund(provider as PaymentProvider, inv, plan, id));
          refunded = { id, plan, refund: made };
        }
        const written: CreditNote = {
          id,
          number,
          environmentId: env,
          invoiceId: inv.id,
          invoiceNumber: inv.number ?? "",
          subjectId: inv.subjectId,
          currency: inv.currency,
          reason: c.reason,
          memo: c.memo,
          outcome: c.outcome,
          ...plan,
          status: "issued",
          createdAt: now,
          creditGrantId: effects.grant?.id ?? null,
          refundId: made?.refundId ?? null,
          refundStatus: made?.status ?? null,
          refundFailureReason: null,
          metadata: c.metadata,
        };
        await tx.insert(written);
        await tx.emit([creditNoteEvent(written), ...effects.events, ...taken]);
        return { written, cancel: effects.cancel === true };
      });
    // The provider answered a refund made under the note's key for another amount: the note is that refund (refunded-earlier.ts).
    const done = await retryingRaces(attempt).catch((err: unknown) => {
      if (!(err instanceof RefundedEarlier)) throw err;
      refunded = err.kept;
      return retryingRaces(attempt);
    });
    if (done.cancel) await this.cancels?.settle(before);
    const note = done.written;
    // Credit alerts: a note's credit on the balance, or a purchase's credit taken back by its refund.
    if (note.creditGrantId || (note.outcome === "refund" && purchasedGrantId(before) !== undefined)) await this.changed?.(env, note.subjectId);
    return note;
  }

  /** The outcome's writes in `tx` (a refund's is made last, by refund()): what it made (a grant) and the events it adds. */
  private async outcome(
    tx: CreditNoteTx,
    c: CheckedCreditNote,
    inv: Invoice,
    plan: CreditPlan,
    id: string,
    now: Date,
    refunded = false,
  ): Promise<{ grant: CreditGrant | null; events: NewEvent[]; takeBackFrom?: TakeBack; cancel?: boolean }> {
    if (c.outcome === "reduce_amount_due") {
      if (!(await tx.reduceAmountDue(inv.environmentId, inv.id, plan.total, now))) {
        throw new FailedPreconditionError("CREDIT_EXCEEDS_AMOUNT_DUE", `invoice ${inv.id}'s amount due changed; try again`, { invoice_id: inv.id });
      }
      const due = dec(amountDueOf(inv)).minus(dec(plan.total));
      if (!due.isZero() || !(await tx.markPaid(inv.environmentId, inv.id, now))) return { grant: null, events: [] };
      const credited = formatDecimal(dec(inv.amountCredited ?? "0").plus(dec(plan.total)));
      const paid = { ...inv, amountDue: "0", amountCredited: credited };
      // Its charge waiting for the customer is to be cancelled (on real time, as the sweep reads it), as setInvoiceStatus does;
      // the note recorded as what paid it, so that any payment succeeding later is refunded (payments/cancels.ts paidAfterEnd).
      const realNow = this.lookups.engine.now();
      const cancel = tx.dunning ? (await recordCancels(tx.dunning, inv.environmentId, [inv.id], realNow, { paidBy: "credit_note" })).length > 0 : false;
      return { grant: null, events: transitionEvents(checkTransition("open", "paid"), [paid]), cancel };
    }
    if (c.outcome === "credit_balance") {
      const grant: CreditGrant = {
        id: `cg_${randomBase62(22)}`,
        environmentId: inv.environmentId,
        subjectId: inv.subjectId,
        currency: inv.currency,
        amount: plan.total,
        remaining: plan.total,
        category: "promotional",
        priority: 50,
        effectiveAt: now,
        expiresAt: null,
        appliesToRateCodes: [],
        metadata: { credit_note_id: id, invoice_id: inv.id },
        status: "active",
        invoiceId: null,
        createdAt: now,
        voidedAt: null,
        expiredAt: null,
      };
      await tx.insertGrant(grant, { type: "credit_note", invoiceId: inv.id, creditNoteId: id, description: `Credit note on invoice ${inv.number ?? inv.id}` });
      return { grant, events: [creditGrantEvent("credit_grant.created", grant)] };
    }
    // A credit purchase's credit goes back with its money: whether it can is checked (its grant
    // locked) before the provider refunds; create() takes it back once the note has its number (purchase-refund.ts).
    return { grant: null, events: [], takeBackFrom: await checkTakeBack(tx, c, inv, plan, refunded) };
  }

  /**
   * The provider's refund of note `id`: its ID, and pending (Stripe's refund made `pending`: the
   * money not back yet, its webhooks tell how it ends) or succeeded (the test provider's at once).
   * A refusal fails the note (REFUND_FAILED: nothing is written). One made earlier under its key for
   * another amount is thrown (RefundedEarlier): create() writes the note at that amount.
   */
  private async refund(provider: PaymentProvider, inv: Invoice, plan: CreditPlan, id: string): Promise<MadeRefund> {
    // The charge that paid it: the invoice's last attempt (dunning may have taken several), by its provider reference when kept.
    const out = await provider.refund(paidBy(inv), plan.total, inv.currency, refundKey(id), { reference: inv.payment?.reference ?? null, creditNoteId: id });
    if (!out.ok) throw new FailedPreconditionError("REFUND_FAILED", `the payment provider refused the refund of invoice ${inv.id}: ${out.message}`, { invoice_id: inv.id });
    const made: MadeRefund = { refundId: out.refundId, status: out.pending === true ? "pending" : "succeeded" };
    if (out.amount !== undefined && !dec(out.amount).eq(dec(plan.total))) throw refundedEarlier(inv, id, out.amount, made);
    return made;
  }

  /**
   * A provider's event about a refund (Stripe's refund.updated / refund.failed), in the
   * environment it came in on: the note with that refund moves forward to its status, once per
   * event (refund-status.ts); a failure emits `credit_note.refund_failed`. The note stays issued.
   */
  refundUpdated(environmentId: string, update: RefundUpdate, event: ProviderEventRef): Promise<RefundUpdated> {
    return retryingRaces(() => refundUpdated(this.store, environmentId, update, event, this.lookups.engine.now()));
  }

  /** A credit note of the caller's environment (NOT_FOUND otherwise): what the PDF reads too. */
  async creditNote(caller: Caller, id: string): Promise<CreditNote> {
    const n = id === "" ? undefined : await this.store.get(caller.environmentId, id);
    if (!n) throw new NotFoundError("CREDIT_NOTE_NOT_FOUND", `credit note ${JSON.stringify(id)} not found`, { credit_note_id: id });
    return n;
  }

  /** Oldest first, of one invoice and/or one subject (its ID or external ID; an unknown one has none). */
  async list(caller: Caller, input: ListCreditNotesInput): Promise<PageResult<CreditNote>> {
    const v = new Violations();
    const page = checkPage(input.limit, input.offset, v);
    v.throwIfAny();
    let subjectId: string | undefined;
    if (input.subjectId !== "") {
      const s = await this.lookups.stores.directory.subject(caller.environmentId, input.subjectId);
      if (!s) return { items: [], hasMore: false };
      subjectId = s.id;
    }
    return this.store.list(caller.environmentId, { subjectId, invoiceId: input.invoiceId === "" ? undefined : input.invoiceId }, page);
  }
}
