/**
 * A payment left waiting for the customer on an invoice that ends (DESIGN §16): an invoice voided
 * or marked uncollectible (the API, the dashboard, the CLI) while its charge waits for the
 * customer's authentication, or a credit purchase whose charge needed it (voided at once,
 * dunning.ts purchaseDecision), must not be payable any more: its payment is cancelled at the
 * provider (Stripe: the PaymentIntent), as Stripe Billing cancels an invoice's PaymentIntent.
 *
 * Crash-safe as a charge is: the cancel to make (InvoicePayment.cancel, its idempotency key
 * cancelKey of the attempt) is written in the transaction that ends the invoice, with a retry time
 * (next_payment_attempt, a minute ahead; never shown on an invoice that is not open); the provider
 * is called after that commit, without a row lock held, and its answer recorded in a transaction
 * of its own. A process that dies in between, or a provider that cannot be reached, leaves the
 * cancel pending: dunning's sweep on real time (runDue) makes it again with the same key.
 *
 * The same holds for an open invoice paid by another payment while one waits for the customer (a
 * pay link's: the waiting one is cancelled after that commit, as above); one charged again
 * meanwhile (a new card saved in the portal) has it cancelled before that charge (waiting.ts).
 *
 * And for an open invoice a credit note pays (credited to zero) while its charge waits: the note's
 * transaction writes the cancel, made after its commit (credit-notes.ts).
 *
 * And for a bank debit still processing (SEPA, ACH, Bacs) when its invoice ends: Stripe does not
 * let it be cancelled, so the cancel stays pending, asked again every CANCEL_RETRY_MS until the
 * debit ends: failed or cancelled, nothing taken; succeeded, refunded as below.
 *
 * A cancel that lost the race (the customer completed the payment first), and any payment that
 * succeeds on an invoice that ended (void, uncollectible, or paid already by another payment: a
 * duplicate; the provider's webhook: paidAfterEnd), is refunded in full through the provider (what
 * is left of that payment, whatever the invoice's amount due became since), keyed by the invoice
 * and the payment so that it is refunded once, and recorded on the invoice with the amount the
 * provider refunded (InvoicePayment.refundedAfterEnd). A refund the provider refuses for good (the
 * payment refunded by hand already, say) is recorded so, its cancel no longer pending: only a
 * provider that cannot be reached is asked again. The invoice stays as it is: no second invoice.paid.
 *
 * The payment that paid an invoice for more than its amount due (a pay link opened before a
 * credit note lowered it: InvoicePayment.excess, written by provider-events.ts) has the
 * difference refunded, once (refundExcessKey), recorded as refundedExcess.
 *
 * Each such refund names its invoice and kind at the provider; one the provider made pending and
 * fails later is recorded failed and announced (`invoice.refund_failed`), never kept as given back
 * (refund-failures.ts).
 */
import type { BillingStores } from "../subscriptions/ports.js";
import { retryingRaces } from "../subscriptions/races.js";
import { type Invoice, type PaymentProvider, chargeKey } from "../subscriptions/types.js";
import { CANCEL_GRACE_MS, type DunningStore, type DunningWrites, cancelKey } from "./dunning.js";
import type { ProviderEventRef } from "./event-writes.js";
import { invoiceRefundUpdated } from "./refund-failures.js";
import type { InvoicePayment, RefundAfterEnd, RefundOutcome, RefundUpdate, RefundUpdated } from "./types.js";
import { CANCEL_RETRY_MS, waitingOn } from "./waiting.js";

/** How many pending cancels one read of the sweep takes. */
const DUE_BATCH = 50;

/**
 * The provider's idempotency key of the refund in full (no amount asked) of payment `reference`
 * that succeeded on the ended invoice `invoiceId`. `:full`: the key without it was sent with an
 * amount before, and a key is never sent again with other parameters (Stripe refuses it).
 */
export const refundAfterEndKey = (invoiceId: string, reference: string) => `${invoiceId}:refund-after-end:${reference}:full`;

/**
 * The provider's idempotency key of the refund of what payment `reference` took beyond the amount
 * due of the invoice `invoiceId` it paid (InvoicePayment.excess): one per payment.
 */
export const refundExcessKey = (invoiceId: string, reference: string) => `${invoiceId}:refund-excess:${reference}`;

type Ref = Pick<Invoice, "environmentId" | "id">;

/** A refund the provider made but has not settled (Stripe's `pending`): so recorded, its events tell how it ends (refund-failures.ts). */
const pendingOf = (out: RefundOutcome): Pick<RefundAfterEnd, "pending"> => (out.ok && out.pending ? { pending: true } : {});

/** Whether an invoice has ended: paid, void or uncollectible (never charged again). */
const ended = (i: Pick<Invoice, "status">) => i.status === "paid" || i.status === "void" || i.status === "uncollectible";

/**
 * The payment state of an invoice as it ends while a charge waits for the customer, or while its
 * bank debit is processing (dunning.ts settling): no longer waiting nor processing, the cancel of
 * that payment to make; undefined when nothing waits. Stripe refuses to cancel a processing debit
 * (payment_intent_unexpected_state): the sweep asks again (later) until the debit ends, and
 * refunds it if it succeeded, so that a debit on a void invoice is given back even when its
 * payment_intent.succeeded webhook never comes (paidAfterEnd refunds it when it does).
 */
export function endedPayment(i: Pick<Invoice, "id" | "attemptCount" | "payment">): InvoicePayment | undefined {
  const { processing, ...payment } = i.payment ?? {};
  const reference = waitingOn(i) ?? (processing ? (payment.reference ?? undefined) : undefined);
  if (!reference) return undefined;
  return { ...payment, actionRequired: false, actionUrl: null, cancel: { reference, key: cancelKey(i.id, Math.max(i.attemptCount ?? 1, 1)) } };
}

/**
 * In the transaction that just moved `ids` (of one environment) to void or uncollectible (or paid
 * by a credit note), their rows locked by the move: each whose charge waited for the customer gets
 * its cancel to make, due for the sweep a minute from `realNow`; any retry planned is dropped;
 * `mark` is written on each payment state (paidBy). Returns the IDs with a cancel, to make after the commit.
 */
export async function recordCancels(writes: DunningWrites, environmentId: string, ids: readonly string[], realNow: Date, mark: Pick<InvoicePayment, "paidBy"> = {}): Promise<string[]> {
  const list: Parameters<DunningWrites["recordAttempts"]>[1][number][] = [];
  const marks = mark.paidBy !== undefined;
  for (const i of await writes.claimAll(environmentId, ids)) {
    const payment = endedPayment(i);
    if (payment) list.push({ id: i.id, attempt: { attemptCount: i.attemptCount ?? 0, nextPaymentAttempt: new Date(realNow.getTime() + CANCEL_GRACE_MS), payment: { ...payment, ...mark } } });
    // A retry dunning had planned is dropped with it: an ended invoice is never charged.
    else if (i.nextPaymentAttempt || marks) list.push({ id: i.id, attempt: { attemptCount: i.attemptCount ?? 0, nextPaymentAttempt: null, payment: { ...i.payment, ...mark } } });
  }
  if (list.length > 0) await writes.recordAttempts(environmentId, list, realNow);
  return list.filter((x) => x.attempt.payment.cancel).map((x) => x.id);
}

export class PaymentCancels {
  constructor(
    private readonly stores: BillingStores,
    private readonly providerFor: (environmentId: string) => Promise<PaymentProvider | undefined>,
    /** Where the sweep finds the cancels still to make. */
    private readonly store: Pick<DunningStore, "cancelsDue">,
    private readonly now: () => Date,
    /** Told of a cancel or refund that failed (it is tried again by the sweep, or by the provider's next delivery). */
    private readonly failed: (invoiceId: string, err: unknown) => void = () => {},
    /** Told of what is left to people: a refund the provider refused for good, a payment it cannot tell apart. */
    private readonly warn: (invoiceId: string, message: string) => void = () => {},
  ) {}

  /**
   * Makes the invoice's pending cancel at its provider and records the answer (after the commit
   * that ended it, or from the sweep). Never throws: a failure leaves it pending, retried by the
   * sweep. True when the cancel is done (cancelled, or refunded after it lost the race).
   */
  async settle(ref: Ref): Promise<boolean> {
    try {
      return await this.cancel(ref);
    } catch (err) {
      this.failed(ref.id, err);
      await this.later(ref).catch((e: unknown) => this.failed(ref.id, e));
      return false;
    }
  }

  /**
   * The provider's event of a refund made here (a payment refunded after its invoice ended, or an
   * excess), the refund naming its invoice: recorded with its effect on the invoice's record of it;
   * a failure recorded, announced (`invoice.refund_failed`) and told to people (payments/refund-failures.ts).
   */
  async refundUpdated(environmentId: string, update: RefundUpdate, event: ProviderEventRef): Promise<RefundUpdated> {
    const out = await invoiceRefundUpdated(this.stores, environmentId, update, event, this.now());
    const named = update.invoiceRefund;
    if (out.outcome === "failed" && named) {
      this.warn(
        named.invoiceId,
        `the provider failed refund ${update.refundId} (${named.kind}) of a payment of invoice ${named.invoiceId} after making it (${update.failureReason ?? "unknown"}): the money did not go back; pay the customer back by other means`,
      );
    }
    return out;
  }

  /** Dunning's sweep on real time: the cancels whose call after the commit never came or failed. Returns how many were done. */
  async runDue(now: Date): Promise<number> {
    let n = 0;
    for (const d of await this.store.cancelsDue(now, DUE_BATCH)) if (await this.settle(d)) n++;
    return n;
  }

  /**
   * The provider says payment `reference` of the invoice succeeded (its webhook). On a void or
   * uncollectible invoice, or one paid by another payment (a duplicate), the money is refunded,
   * once, and recorded on it; false for any other invoice, or the payment that paid it (nothing
   * done). An invoice a credit note paid (paidBy: credit_note) was paid by no payment: any is
   * refunded. Another paid invoice that stores no payment (paid before payments were recorded on
   * it) cannot tell a duplicate from the payment that paid it: never refunded, a warning for people instead.
   * Throws when the refund fails (the provider unreachable), so the provider delivers the event again.
   */
  async paidAfterEnd(ref: Ref, reference: string): Promise<boolean> {
    const i = await this.stores.invoices.get(ref.environmentId, ref.id);
    const p = i?.payment;
    if (!i || !ended(i)) return false;
    if (p?.refundedAfterEnd?.some((r) => r.reference === reference)) return true;
    if (i.status === "paid" && p?.excess?.reference === reference) return this.refundExcess(i, p.excess);
    // The payment that paid it: its stored reference, unless the invoice still waits on it or has
    // it to cancel, or a credit note paid it (credited to zero: that payment paid nothing).
    const byNote = p?.paidBy === "credit_note";
    if (i.status === "paid" && !byNote && p?.reference === reference && !p.actionRequired && p.cancel?.reference !== reference) return false;
    if (i.status === "paid" && !byNote && !p?.reference) {
      this.warn(i.id, `payment ${reference} succeeded on invoice ${i.id}, paid already with no payment recorded on it: not refunded (refund it by hand if it is a second payment)`);
      return false;
    }
    const provider = await this.providerFor(i.environmentId);
    if (!provider) throw new Error(`invoice ${i.id} was paid after it ended, and its environment has no payment provider to refund it`);
    await this.record(i, reference, null, await this.refund(provider, i, reference));
    return true;
  }

  /**
   * Refunds what the payment that paid invoice `i` took beyond its amount due (`excess`, written
   * when it paid), keyed by the invoice and the payment, and records it (refundedExcess), the
   * excess no longer pending. A refusal is final (recorded, a warning); a provider that cannot be
   * reached throws, the excess still pending, so the provider's next delivery refunds it.
   */
  private async refundExcess(i: Invoice, excess: { reference: string; amount: string }): Promise<boolean> {
    const provider = await this.providerFor(i.environmentId);
    if (!provider) throw new Error(`invoice ${i.id} was paid for more than its amount due, and its environment has no payment provider to refund the difference`);
    const { reference, amount } = excess;
    const out = await provider.refund(chargeKey(i.id, Math.max(i.attemptCount ?? 1, 1)), amount, i.currency, refundExcessKey(i.id, reference), {
      reference,
      invoiceRefund: { invoiceId: i.id, kind: "excess" },
    });
    if (!out.ok) this.warn(i.id, `the provider refused for good to refund ${amount} that payment ${reference} took beyond the amount due of invoice ${i.id} (not asked again): ${out.message}`);
    const refund: RefundAfterEnd = out.ok
      ? { reference, refundId: out.refundId, amount: out.amount ?? amount, ...pendingOf(out) }
      : { reference, refundId: out.refundId ?? null, amount: null, refused: out.message };
    await this.rewrite(i, (cur) => {
      const p = cur.payment ?? {};
      if (p.excess?.reference !== reference) return undefined;
      const done = p.refundedExcess ?? [];
      return { next: cur.nextPaymentAttempt ?? null, payment: { ...p, excess: null, refundedExcess: done.some((r) => r.reference === reference) ? done : [...done, refund] } };
    });
    return true;
  }

  private async cancel(ref: Ref): Promise<boolean> {
    const i = await this.stores.invoices.get(ref.environmentId, ref.id);
    const pending = i?.payment?.cancel;
    if (!i || !ended(i)) return false;
    if (!pending) {
      if (i.nextPaymentAttempt) await this.notDue(i);
      return false;
    }
    const provider = await this.providerFor(i.environmentId);
    // No provider (its settings changed since) or one that cannot cancel: nothing to do there, the cancel dropped.
    const answer = provider?.cancel ? await provider.cancel(pending.reference, pending.key) : undefined;
    if (answer === "open") {
      await this.later(i);
      return false;
    }
    const refund = answer === "succeeded" && provider ? await this.refund(provider, i, pending.reference) : undefined;
    await this.record(i, pending.reference, answer === "canceled" ? pending.reference : null, refund);
    return true;
  }

  /**
   * Refunds payment `reference` in full: what is left of it at the provider (no amount asked), not
   * the invoice's amount due (a credit note may have lowered it since the payment was made). A
   * refusal is final (recorded as refused); a provider that cannot be reached throws.
   */
  private async refund(provider: PaymentProvider, i: Invoice, reference: string): Promise<RefundAfterEnd> {
    const out = await provider.refund(chargeKey(i.id, Math.max(i.attemptCount ?? 1, 1)), null, i.currency, refundAfterEndKey(i.id, reference), {
      reference,
      invoiceRefund: { invoiceId: i.id, kind: "after_end" },
    });
    if (out.ok) return { reference, refundId: out.refundId, amount: out.amount ?? null, ...pendingOf(out) };
    this.warn(i.id, `the provider refused for good to refund payment ${reference} of invoice ${i.id}, which had ended (not asked again): ${out.message}`);
    return { reference, refundId: out.refundId ?? null, amount: null, refused: out.message };
  }

  /**
   * Under the invoice's row lock: the cancel of `reference` done (no longer pending, nor due) with
   * what came of it, the payment cancelled or the refund made. A repeat changes nothing.
   */
  private record(ref: Ref, reference: string, cancelled: string | null, refund: RefundAfterEnd | undefined): Promise<void> {
    return this.rewrite(ref, (cur) => {
      const p = cur.payment ?? {};
      const clears = p.cancel?.reference === reference;
      const refunds = p.refundedAfterEnd ?? [];
      // One refund per payment (its key is the invoice's and the payment's), made or refused.
      const adds = refund !== undefined && !refunds.some((r) => r.reference === refund.reference);
      if (!clears && !adds) return undefined;
      const payment: InvoicePayment = {
        ...p,
        ...(clears ? { cancel: null } : {}),
        ...(cancelled ? { cancelled } : {}),
        ...(adds ? { refundedAfterEnd: [...refunds, refund] } : {}),
      };
      return { next: payment.cancel ? (cur.nextPaymentAttempt ?? null) : null, payment };
    });
  }

  /** The pending cancel of the invoice (the provider unreachable, the payment still processing) asked again by the sweep CANCEL_RETRY_MS from now, as a waiting payment's cancel before a new charge is. */
  private later(ref: Ref): Promise<void> {
    return this.rewrite(ref, (cur) => (cur.payment?.cancel ? { next: new Date(this.now().getTime() + CANCEL_RETRY_MS), payment: cur.payment } : undefined));
  }

  /** An ended invoice with no cancel pending is never due (a retry planned before it was voided is dropped). */
  private notDue(ref: Ref): Promise<void> {
    return this.rewrite(ref, (cur) => (!cur.payment?.cancel && cur.nextPaymentAttempt ? { next: null, payment: cur.payment ?? {} } : undefined));
  }

  /** Rewrites the payment state and retry time of the ended invoice `ref` as `change` says (undefined: nothing), under its row lock. */
  private async rewrite(ref: Ref, change: (cur: Invoice) => { next: Date | null; payment: InvoicePayment } | undefined): Promise<void> {
    await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        const w = writes(tx);
        const cur = await w.claim(ref.environmentId, ref.id);
        const c = cur && ended(cur) ? change(cur) : undefined;
        if (!cur || !c) return;
        await w.recordAttempts(cur.environmentId, [{ id: cur.id, attempt: { attemptCount: cur.attemptCount ?? 0, nextPaymentAttempt: c.next, payment: c.payment } }], this.now());
      }),
    );
  }
}

function writes(tx: { dunning?: DunningWrites }): DunningWrites {
  if (!tx.dunning) throw new Error("this store keeps no dunning state");
  return tx.dunning;
}
