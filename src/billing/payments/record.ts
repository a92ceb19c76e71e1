/**
 * Recording what came of payment attempts (DESIGN §16), in the transaction that made them under
 * their invoices' row locks (attempts.ts): the attempts, the status moves and the events, and the
 * debit carried to the next invoice of an invoice paid so (below the minimum charge, carries.ts).
 */
import { purchasesMoved } from "../credits/purchase-states.js";
import { type EventType, type NewEvent, invoiceEvent } from "../events/types.js";
import { checkTransition, transitionEvents } from "../subscriptions/invoice-states.js";
import type { BillingStores } from "../subscriptions/ports.js";
import type { Invoice } from "../subscriptions/types.js";
import { type AttemptDecision, CANCEL_GRACE_MS, type DunningWrites } from "./dunning.js";

/** A billing transaction. */
export type Tx = Parameters<Parameters<BillingStores["transaction"]>[0]>[0];

/** A decision as recorded, with the invoice after it. */
export type AttemptResult = { decision: AttemptDecision; invoice: Invoice };

/**
 * Writes decisions in the attempts' transaction (all of one environment): the attempts, the
 * status moves and the events, in the order given. The last failure with a policy for the
 * subscription (cancel or pause) keeps the invoice open and due at `at` with the policy pending
 * (InvoicePayment.pendingPolicy): the policy runs after this commit, in transactions of its own,
 * and finishLast then ends the invoice; a process that dies in between leaves it for dunning's
 * next run. Its invoice.payment_failed announces the failure as decided (no next attempt;
 * uncollectible if so configured), which finishLast makes so.
 */
export async function recordDecisions(tx: Tx, writes: DunningWrites, realNow: Date, items: readonly { i: Invoice; d: AttemptDecision; at: Date }[]): Promise<AttemptResult[]> {
  if (items.length === 0) return [];
  const environmentId = (items[0] as { i: Invoice }).i.environmentId;
  const stored = items.map(({ i, d, at }) => {
    const pendingPolicy = d.afterLast === "cancel" || d.afterLast === "pause" ? { policy: d.afterLast, markUncollectible: d.status === "uncollectible" } : null;
    // An invoice ended with a payment to cancel (a purchase whose charge waits for the customer): the sweep's retry time (payments/cancels.ts).
    const cancelBy = d.status !== "open" && d.payment.cancel ? { nextPaymentAttempt: new Date(realNow.getTime() + CANCEL_GRACE_MS) } : {};
    return { i, d, at, pendingPolicy, s: pendingPolicy ? { ...d, status: "open" as const, nextPaymentAttempt: at, payment: { ...d.payment, pendingPolicy } } : { ...d, ...cancelBy } };
  });
  await writes.recordAttempts(
    environmentId,
    stored.map(({ i, s }) => ({ id: i.id, attempt: { attemptCount: s.attemptCount, nextPaymentAttempt: s.nextPaymentAttempt, payment: s.payment } })),
    realNow,
  );
  const moved = new Set<string>();
  for (const to of new Set(stored.map(({ s }) => s.status).filter((x) => x !== "open"))) {
    const move = checkTransition("open", to);
    for (const id of await tx.moveInvoices(
      stored.filter(({ s }) => s.status === to).map(({ i }) => i.id),
      move.from,
      move.to,
      realNow,
      environmentId,
    ))
      moved.add(id);
  }
  const events: NewEvent[] = [];
  const results: AttemptResult[] = [];
  for (const { i, d, s, pendingPolicy, at } of stored) {
    let after: Invoice = { ...i, attemptCount: s.attemptCount, nextPaymentAttempt: s.nextPaymentAttempt, payment: s.payment };
    let moves: ReturnType<typeof transitionEvents> = [];
    if (s.status !== "open" && moved.has(i.id)) {
      after = { ...after, status: s.status };
      moves = transitionEvents(checkTransition("open", s.status), [after]);
      // Paid by carrying its amount due to the subject's next invoice (below the minimum charge): the debit, once (its key).
      if (s.status === "paid" && s.payment.carried) await tx.carries?.carry(i, s.payment.carried, realNow);
    }
    // invoice.paid comes with its move; a failure or a wait for the customer is announced first,
    // then the move it caused (the last failure's invoice maybe uncollectible).
    const announced = pendingPolicy ? { ...after, status: d.status, nextPaymentAttempt: null } : after;
    // A charge that waits for the customer is a failure announced with its pay link after it.
    const also = d.also ? [invoiceEvent(d.also as EventType, announced)] : [];
    // Neither paid nor failed (dunning.ts settling): nothing announced.
    events.push(...(d.event === "invoice.paid" || d.event === null ? moves : [invoiceEvent(d.event as EventType, announced), ...also, ...moves]));
    // A credit purchase's grant follows its invoice (credits/purchase-states.ts).
    if (after.status !== "open") events.push(...(await purchasesMoved(tx, [after], after.status, at)));
    results.push({ decision: d, invoice: after });
  }
  if (events.length > 0) await tx.emit(events);
  return results;
}
