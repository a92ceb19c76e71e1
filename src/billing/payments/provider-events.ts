/**
 * What a payment provider tells us (DESIGN §16), as the domain handles it: a card saved on the
 * provider's own page, a payment that succeeded or failed later (after the customer's
 * authentication), or anything else to acknowledge. The provider's adapter (src/providers/…)
 * verifies and translates its webhooks; this file never imports a provider's library.
 *
 * Each provider event is recorded (environment, provider, event id) in the same transaction as
 * its effect: a repeat changes nothing. Effects move state only forward (an invoice already paid
 * stays paid whatever arrives after), so events may arrive in any order.
 */
import { purchasesMoved } from "../credits/purchase-states.js";
import { AbortedError } from "../errors.js";
import { newId } from "../ids.js";
import { dec, formatDecimal } from "../money.js";
import { checkTransition, transitionEvents } from "../subscriptions/invoice-states.js";
import type { BillingStores, BillingTx } from "../subscriptions/ports.js";
import { retryingRaces } from "../subscriptions/races.js";
import { type Invoice, amountDueOf } from "../subscriptions/types.js";
import type { ProviderEventRef } from "./event-writes.js";
import type { ChargeOutcome, ProviderKind, RefundUpdate, RefundUpdated } from "./types.js";

export type { ProviderEventRef, ProviderEventWrites } from "./event-writes.js";

/** What a provider's payment took, as the provider reports it: the amount in the currency's smallest unit (exact decimal text), and the currency. */
export interface Received {
  amount: string;
  currency: string;
}

/** A card saved on a provider's page, for our PaymentMethod. */
export interface SavedCard {
  provider: ProviderKind;
  brand: string;
  last4: string;
  /** The provider's id of the card (Stripe `pm_…`) and of the subject's customer there (`cus_…`). */
  providerRef: string;
  customerRef: string;
}

/**
 * What a saved card completes: the hosted checkout (`checkout:<token>`) or the portal's card
 * replacement (`portal:<token>`), set by the wiring. Each completes once; a repeat answers where
 * the customer goes without saving the card again. `environmentId` is the environment the
 * provider's event or the customer's return came in on: a checkout or portal session of another
 * environment is left as it is, answered `redirect: null` as an unknown token (DESIGN §3).
 */
export interface CardSetupTargets {
  checkout(environmentId: string, token: string, card: SavedCard, record: (tx: BillingTx) => Promise<boolean>): Promise<{ redirect: string | null }>;
  portal(environmentId: string, token: string, card: SavedCard, record: (tx: BillingTx) => Promise<boolean>): Promise<{ redirect: string | null }>;
}

/**
 * Dunning's resolution of a charge that waited for the customer (DESIGN §16), as the provider
 * reports how it ended: paid, or failed with the next attempt planned. It acts only while the
 * invoice still waits for that payment (`reference`), so a repeat changes nothing.
 */
export type ActionResolver = (invoice: Invoice, reference: string, outcome: ChargeOutcome) => Promise<unknown>;

export class ProviderEvents {
  /** Dunning's resolution of a payment that waited for the customer (set by the wiring). */
  resolveAction: ActionResolver | undefined = undefined;
  /**
   * The refund of a payment that succeeded on a void or uncollectible invoice, or on one paid by
   * another payment (PaymentCancels.paidAfterEnd, set by the wiring); false: not such a payment.
   */
  refundAfterEnd: ((invoice: Invoice, reference: string) => Promise<boolean>) | undefined = undefined;
  /**
   * A provider's refund event, recorded with its effect: the credit note of that refund (in that
   * environment) moves forward to its status (credit-notes/refund-status.ts, set by the wiring).
   */
  refunds: ((environmentId: string, update: RefundUpdate, event: ProviderEventRef) => Promise<RefundUpdated>) | undefined = undefined;
  /**
   * A provider's event of a refund that names an invoice (a payment refunded after its invoice
   * ended, or an excess): recorded on that invoice with its effect (PaymentCancels.refundUpdated,
   * set by the wiring; payments/refund-failures.ts).
   */
  invoiceRefunds: ((environmentId: string, update: RefundUpdate, event: ProviderEventRef) => Promise<RefundUpdated>) | undefined = undefined;

  constructor(
    private readonly stores: BillingStores,
    private readonly targets: CardSetupTargets,
    private readonly now: () => Date,
  ) {}

  /**
   * Records `event` (false: a repeat) and then, for a card setup, its completion (`completion`: the
   * provider's id of the setup; false: completed already, by the webhook or the return, whichever
   * came first). The event first: a new event of a setup completed already is still recorded.
   */
  private recorder(environmentId: string, event: ProviderEventRef | null, completion?: { provider: ProviderKind; id: string }): (tx: BillingTx) => Promise<boolean> {
    return async (tx) => {
      const w = tx.providerEvents;
      if (!w) return true;
      if (event && !(await w.recordProviderEvent(environmentId, event, this.now()))) return false;
      if (!completion) return true;
      return w.recordProviderEvent(environmentId, { provider: completion.provider, eventId: `setup_completed:${completion.id}`, eventType: "setup.completed" }, this.now());
    };
  }

  /** Records an event with no effect of its own (or whose effect is another event's); false: a repeat. */
  async acknowledge(environmentId: string, event: ProviderEventRef): Promise<boolean> {
    return retryingRaces(() => this.stores.transaction((tx) => this.recorder(environmentId, event)(tx)));
  }

  /**
   * A card saved on the provider's page for `reference` (`checkout:<token>` or `portal:<token>`)
   * by its setup `setupId` (Stripe's Checkout Session): completes it once, whether the webhook
   * (`event`) or the customer's return (no event) comes first, even both at once. Only a checkout
   * or portal session of `environmentId` (where the event or return came in) is completed; one of
   * another environment, like an unknown token, is left as it is (`redirect: null`).
   */
  async cardSaved(environmentId: string, reference: string, card: SavedCard, event: ProviderEventRef | null, setupId: string): Promise<{ redirect: string | null }> {
    const [kind, token] = splitReference(reference);
    const record = this.recorder(environmentId, event, { provider: card.provider, id: setupId });
    const out =
      kind === "checkout" ? await this.targets.checkout(environmentId, token, card, record) : kind === "portal" ? await this.targets.portal(environmentId, token, card, record) : { redirect: null };
    // Completed already (by the return URL): the webhook is still recorded, so its repeat is one too.
    if (event) await this.acknowledge(environmentId, event);
    return out;
  }

  /**
   * The provider's payment `reference` of `invoiceId` succeeded. An invoice waiting for the
   * customer (on that payment, or on the one the pay link's payment replaced) is resolved by
   * dunning (paid, with its attempt, `reference` its payment now); any other invoice
   * still open is paid (`invoice.paid`, `reference` its payment): its charge's answer was lost, a
   * crash say. An invoice paid already stays as it is, and so does a void or uncollectible one; a
   * payment other than the one that paid it is refunded, also when the invoice ended while this
   * event was handled (read again after the locked step). An event recorded already (a repeat)
   * changes nothing, checked first: the redelivery of the payment that paid it is never refunded.
   * Dunning's resolution (and the refund) acts once; the event is recorded after it, so a refund
   * that failed (the provider unreachable) is made at the provider's next delivery.
   */
  async paymentSucceeded(environmentId: string, invoiceId: string, reference: string, event: ProviderEventRef, received?: Received): Promise<"paid" | "unchanged" | "refunded"> {
    const out = await this.succeeded(environmentId, invoiceId, reference, event);
    // Also on a repeat: a refund of the difference that failed is made at the provider's next delivery.
    if (received && out !== "refunded") await this.overpaid(environmentId, invoiceId, reference, received);
    return out;
  }

  /**
   * The invoice paid by payment `reference`, which took `received`: more than its amount due (a
   * pay link opened before a credit note lowered it), the difference is written on it
   * (InvoicePayment.excess) and refunded once, keyed by the invoice and the payment
   * (PaymentCancels.paidAfterEnd). A refund that fails throws: the provider delivers the event
   * again, and the excess still written is refunded then.
   */
  private async overpaid(environmentId: string, invoiceId: string, reference: string, received: Received): Promise<void> {
    const refund = this.refundAfterEnd;
    const seen = await this.stores.invoices.get(environmentId, invoiceId);
    if (!refund || !seen || !(seen.payment?.excess?.reference === reference || excessOf(seen, reference, received))) return;
    await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        const cur = tx.dunning ? await tx.dunning.claim(environmentId, invoiceId) : undefined;
        const excess = cur && cur.payment?.excess?.reference !== reference ? excessOf(cur, reference, received) : undefined;
        if (!cur || !excess || !tx.dunning) return;
        const attempt = { attemptCount: cur.attemptCount ?? 0, nextPaymentAttempt: cur.nextPaymentAttempt ?? null, payment: { ...cur.payment, excess } };
        await tx.dunning.recordAttempts(environmentId, [{ id: cur.id, attempt }], this.now());
      }),
    );
    const cur = await this.stores.invoices.get(environmentId, invoiceId);
    if (cur?.payment?.excess?.reference === reference) await refund(cur, reference);
  }

  private async succeeded(environmentId: string, invoiceId: string, reference: string, event: ProviderEventRef): Promise<"paid" | "unchanged" | "refunded"> {
    if (await this.recorded(environmentId, event)) return "unchanged";
    const invoice = await this.stores.invoices.get(environmentId, invoiceId);
    // Paid after it was voided or marked uncollectible, or a second time (a cancel that lost the
    // race, a pay link paid meanwhile): the money is refunded, once, and the invoice stays as it
    // is, no second invoice.paid (payments/cancels.ts).
    if (!invoice || ended(invoice)) return this.afterEnd(environmentId, invoiceId, reference, event);
    // Waiting on that payment, or on the one its pay link replaced (Stripe Checkout's own PaymentIntent).
    const waiting = waitingReference(invoice);
    if (this.resolveAction && waiting) {
      await this.resolveAction(invoice, waiting, { ok: true, reference });
      await this.stillOpen(environmentId, invoiceId, reference);
      // Paid by another payment or voided meanwhile, this one not taken: refunded (afterEnd).
      return (await this.afterEnd(environmentId, invoiceId, reference, event)) === "refunded" ? "refunded" : "paid";
    }
    const pay = checkTransition("open", "paid");
    const out = await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        // Under its row lock: the payment that paid it recorded, so that only another one is a duplicate.
        const cur = tx.dunning ? await tx.dunning.claim(environmentId, invoiceId) : invoice;
        // Ended since the read above (another payment paid it, or it was voided): refunded below, nothing written here.
        if (cur && ended(cur)) return "ended" as const;
        if (!(await this.recorder(environmentId, event)(tx))) return "unchanged" as const;
        if (cur?.status !== "open") return "unchanged" as const;
        const moved = await tx.moveInvoices([cur.id], pay.from, pay.to, this.now(), cur.environmentId);
        if (moved.length === 0) return "ended" as const;
        if (tx.dunning) await tx.dunning.recordAttempts(environmentId, [{ id: cur.id, attempt: paidWith(cur, reference) }], this.now());
        await tx.emit([...transitionEvents(pay, [cur]), ...(await purchasesMoved(tx, [cur], pay.to, this.now()))]);
        return "paid" as const;
      }),
    );
    return out === "ended" ? this.afterEnd(environmentId, invoiceId, reference, event) : out;
  }

  /**
   * After dunning's resolution of a waiting invoice: still open means it took nothing (no longer
   * waiting on that payment when it held the row lock: its payment cancelled for a new charge,
   * say). Throws, the event not recorded, so the provider delivers it again and the next delivery
   * takes the invoice as it is then (open: paid with it; ended: refunded). Never acknowledged and kept.
   */
  private async stillOpen(environmentId: string, invoiceId: string, reference: string): Promise<void> {
    const cur = await this.stores.invoices.get(environmentId, invoiceId);
    if (cur?.status !== "open") return;
    throw new AbortedError(
      "INVOICE_PAYMENT_CHANGED",
      `payment ${reference} succeeded on invoice ${invoiceId}, whose waiting payment changed while it was handled; not recorded, to be delivered again`,
      {
        invoice_id: invoiceId,
      },
    );
  }

  /** Whether the provider's event was recorded already (a repeat: nothing to do). */
  private recorded(environmentId: string, event: ProviderEventRef): Promise<boolean> {
    return this.stores.transaction(async (tx) => (await tx.providerEvents?.providerEventRecorded(environmentId, event)) ?? false);
  }

  /**
   * Payment `reference` succeeded on an invoice that ended (read again now): refunded unless it is
   * the payment that paid it (PaymentCancels.paidAfterEnd; keyed by the invoice and the payment, a
   * repeat refunds nothing more), then the event recorded. A refund that fails throws before.
   */
  private async afterEnd(environmentId: string, invoiceId: string, reference: string, event: ProviderEventRef): Promise<"unchanged" | "refunded"> {
    const cur = await this.stores.invoices.get(environmentId, invoiceId);
    const refunded = cur !== undefined && ended(cur) && this.refundAfterEnd !== undefined && (await this.refundAfterEnd(cur, reference));
    await this.acknowledge(environmentId, event);
    return refunded ? "refunded" : "unchanged";
  }

  /**
   * The invoice was paid on the provider's pay link page (Stripe Checkout in payment mode, its
   * session `pageId`): the card used becomes the subject's payment method when it is another
   * (once per page: dunning's next charges use it), then the invoice is paid as by paymentSucceeded.
   */
  async paidOnPage(
    environmentId: string,
    invoiceId: string,
    reference: string,
    card: SavedCard | undefined,
    event: ProviderEventRef,
    pageId: string,
    received?: Received,
  ): Promise<"paid" | "unchanged" | "refunded"> {
    const invoice = await this.stores.invoices.get(environmentId, invoiceId);
    if (card && invoice) await this.keepCard(environmentId, invoice.subjectId, card, pageId);
    return this.paymentSucceeded(environmentId, invoiceId, reference, event, received);
  }

  private async keepCard(environmentId: string, subjectId: string, card: SavedCard, pageId: string): Promise<void> {
    const current = (await this.stores.paymentMethods.ofSubjects([subjectId], environmentId)).get(subjectId);
    if (current?.provider === card.provider && current.providerRef === card.providerRef) return;
    const record = this.recorder(environmentId, null, { provider: card.provider, id: pageId });
    await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        if (!(await record(tx))) return;
        const id = newId("pm_card");
        const { provider, brand, last4, providerRef, customerRef } = card;
        await tx.insertPaymentMethod({ id, environmentId, subjectId, brand, last4, behavior: "succeeds", createdAt: this.now(), provider, providerRef, customerRef });
        await tx.setSubjectPaymentMethod(subjectId, id, environmentId);
      }),
    );
  }

  /**
   * The provider's refund `update.refundId` changed (Stripe's refund.updated / refund.failed): the
   * credit note of that refund in `environmentId` moves forward to its status, a failure announced
   * (`credit_note.refund_failed`), once per event; a refund naming an invoice, that invoice's record
   * of it (`invoice.refund_failed`); without credit notes wired, only recorded.
   */
  async refundUpdated(environmentId: string, update: RefundUpdate, event: ProviderEventRef): Promise<RefundUpdated> {
    if (update.invoiceRefund && !update.creditNoteId && this.invoiceRefunds) return this.invoiceRefunds(environmentId, update, event);
    if (this.refunds) return this.refunds(environmentId, update, event);
    return { outcome: (await this.acknowledge(environmentId, event)) ? "unknown" : "repeat" };
  }

  /**
   * The provider's payment `reference` of `invoiceId` failed. Only a payment the invoice waits on
   * (the customer's authentication failed, or a processing bank debit bounced) changes anything: dunning records the failure and plans
   * the next attempt. Any other failure was answered to the charge itself, and dunning recorded it
   * then (announcing it again would be a second `invoice.payment_failed`); a paid invoice stays paid.
   * Read without a lock: a bank debit's payment_failed that arrives before the charge's transaction
   * committed its processing state finds nothing waiting on it and is acknowledged unchanged; that
   * failure is not lost, dunning's look-up of the processing debit (payments/processing.ts, planned
   * with it) reads it from the provider and records it then, as it does when the webhook never comes.
   */
  async paymentFailed(environmentId: string, invoiceId: string, reference: string, failure: { message: string; code: string | null }, event: ProviderEventRef): Promise<"failed" | "unchanged"> {
    const invoice = await this.stores.invoices.get(environmentId, invoiceId);
    const waiting = this.resolveAction !== undefined && invoice !== undefined && waitsOn(invoice, reference);
    if (waiting && invoice) await this.resolveAction?.(invoice, reference, { ok: false, message: failure.message, ...(failure.code ? { code: failure.code } : {}) });
    await this.acknowledge(environmentId, event);
    return waiting ? "failed" : "unchanged";
  }
}

/**
 * What the invoice `i`, paid by payment `reference`, is to refund of what it took (`received`):
 * the amount beyond its amount due, in the currency's smallest unit; undefined when it took no
 * more (or in another currency), when another payment paid it, or once refunded.
 */
export function excessOf(i: Invoice, reference: string, received: Received): { reference: string; amount: string } | undefined {
  const p = i.payment;
  if (i.status !== "paid" || p?.reference !== reference || p.paidBy === "credit_note") return undefined;
  if (received.currency.toUpperCase() !== i.currency.toUpperCase() || p.refundedExcess?.some((r) => r.reference === reference)) return undefined;
  const over = dec(received.amount).minus(dec(amountDueOf(i)));
  return over.gt(0) ? { reference, amount: formatDecimal(over) } : undefined;
}

/** What an open invoice records when the provider's payment `reference` paid it. */
function paidWith(i: Invoice, reference: string) {
  const { processing: _, belowMinimum: _b, ...payment } = i.payment ?? {};
  return { attemptCount: i.attemptCount ?? 0, nextPaymentAttempt: null, payment: { ...payment, reference, actionRequired: false, actionUrl: null, lastError: null } };
}

/** Whether an invoice has ended: paid, void or uncollectible (never charged again). */
function ended(i: Pick<Invoice, "status">): boolean {
  return i.status === "paid" || i.status === "void" || i.status === "uncollectible";
}

/** The provider's payment an open invoice waits for the customer on, if it does. */
function waitingReference(i: Invoice): string | undefined {
  return i.status === "open" && i.payment?.actionRequired === true ? (i.payment.reference ?? undefined) : undefined;
}

/** Whether the invoice is open and waits on the provider's payment `reference`: for the customer, or processing (a bank debit). */
function waitsOn(i: Invoice, reference: string): boolean {
  return i.status === "open" && (i.payment?.actionRequired === true || i.payment?.processing === true) && i.payment.reference === reference;
}

/** A card setup's reference: `checkout:<token>` or `portal:<token>`. */
export function cardSetupReference(kind: "checkout" | "portal", token: string): string {
  return `${kind}:${token}`;
}

function splitReference(reference: string): [string, string] {
  const at = reference.indexOf(":");
  return at < 0 ? ["", reference] : [reference.slice(0, at), reference.slice(at + 1)];
}
