/**
 * A refund of an invoice's payment that the provider fails after making it (DESIGN §16): a payment
 * that succeeded on an ended invoice (refundedAfterEnd) or what a payment took beyond the amount
 * due (refundedExcess), both refunded in payments/cancels.ts. Stripe may answer such a refund
 * `pending` and tell days later, by webhook (refund.failed, refund.updated), that it failed (a
 * closed card, say): the customer did not get the money back. As a credit note's refund
 * (credit-notes/refund-status.ts), the refund names what it is for (Stripe: its metadata, the
 * invoice and the kind), and its events move the invoice's record of it forward only, each event
 * recorded in the same transaction as its effect (a repeat changes nothing):
 * - succeeded: no longer pending;
 * - failed (or canceled): recorded failed with the provider's reason, announced once with
 *   `invoice.refund_failed` (the invoice, the payment, the refund, the amount and the reason), and
 *   logged as a warning. Nothing is refunded again on its own, as a credit note's failed refund is
 *   not: the refund's card is the one that failed, and the operator decides how to pay the customer
 *   back (by other means: a bank transfer, say), with the event to act on.
 * An event that comes before the refund is recorded on the invoice (the refund is made before its
 * record's transaction) is "early": nothing recorded, the provider delivers it again.
 */
import type { NewEvent } from "../events/types.js";
import type { BillingStores } from "../subscriptions/ports.js";
import { retryingRaces } from "../subscriptions/races.js";
import type { Invoice } from "../subscriptions/types.js";
import type { DunningWrites } from "./dunning.js";
import type { ProviderEventRef } from "./event-writes.js";
import type { InvoicePayment, InvoiceRefundKind, RefundAfterEnd, RefundUpdate, RefundUpdated } from "./types.js";

/** The `invoice.refund_failed` event of refund `refund` (of kind `refundKind`) of invoice `invoice`'s payment. */
export const invoiceRefundFailedEvent = (invoice: Invoice, refund: RefundAfterEnd, refundKind: InvoiceRefundKind): NewEvent => ({
  type: "invoice.refund_failed",
  environmentId: invoice.environmentId,
  resource: { kind: "invoice_refund", invoice, refund, refundKind },
});

/** Where the invoice's payment state keeps refunds of kind `kind`. */
const listOf = (kind: InvoiceRefundKind) => (kind === "excess" ? "refundedExcess" : "refundedAfterEnd");

/** The refund `r` moved forward to `update`'s status; undefined when it does not move (pending stays; failed is final). */
function moved(r: RefundAfterEnd, update: RefundUpdate): RefundAfterEnd | undefined {
  if (r.failed !== undefined && r.failed !== null) return undefined;
  const { pending: _, ...rest } = r;
  if (update.status === "failed") return { ...rest, failed: update.failureReason ?? "unknown" };
  return update.status === "succeeded" && r.pending ? rest : undefined;
}

/** Records `event` and moves the refund `update.refundId` of the invoice it names forward (see the file's comment). */
export async function invoiceRefundUpdated(stores: BillingStores, environmentId: string, update: RefundUpdate, event: ProviderEventRef, now: Date): Promise<RefundUpdated> {
  const named = update.invoiceRefund;
  if (!named) return { outcome: "unknown" };
  return retryingRaces(() =>
    stores.transaction(async (tx): Promise<RefundUpdated> => {
      const w: DunningWrites | undefined = tx.dunning;
      if (!w) throw new Error("this store keeps no dunning state");
      const i = await w.claim(environmentId, named.invoiceId);
      const list = i?.payment?.[listOf(named.kind)] ?? [];
      const at = list.findIndex((r) => r.refundId === update.refundId);
      // The invoice is there but has not recorded the refund yet (its record commits after the provider's answer).
      if (i && at < 0) return { outcome: "early", invoiceId: i.id };
      if (tx.providerEvents && !(await tx.providerEvents.recordProviderEvent(environmentId, event, now))) return { outcome: "repeat" };
      const r = list[at];
      if (!i || !r) return { outcome: "unknown" };
      const next = moved(r, update);
      if (!next) return { outcome: "unchanged", invoiceId: i.id };
      const payment: InvoicePayment = { ...i.payment, [listOf(named.kind)]: list.map((x, k) => (k === at ? next : x)) };
      await w.recordAttempts(environmentId, [{ id: i.id, attempt: { attemptCount: i.attemptCount ?? 0, nextPaymentAttempt: i.nextPaymentAttempt ?? null, payment } }], now);
      if (update.status === "failed") await tx.emit([invoiceRefundFailedEvent({ ...i, payment }, next, named.kind)]);
      return { outcome: update.status, invoiceId: i.id };
    }),
  );
}
