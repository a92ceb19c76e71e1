/**
 * The invoice state machine. A new invoice is a draft while the grace period of the usage window
 * it bills runs (late usage of the window still lands on it), or open at once. A draft becomes
 * open when it is finalized; an open invoice becomes paid, void or uncollectible. Paid, void and
 * uncollectible are final. Every allowed move is a row of INVOICE_TRANSITIONS, with the event
 * that announces it; checkTransition is the one place that judges a move.
 */
import { type EventType, type NewEvent, invoiceEvent } from "../events/types.js";
import { type Invoice, type InvoiceStatus, isInternal } from "./types.js";

/** The statuses a new invoice is written in: a draft during its window's grace period, or open. */
export const INITIAL_INVOICE_STATUSES: readonly InvoiceStatus[] = ["draft", "open"];

/** An allowed move of an invoice's status and the event that announces it (null: none). */
export interface InvoiceTransition {
  from: InvoiceStatus;
  to: InvoiceStatus;
  event: EventType | null;
  /** What makes the move. */
  when: string;
}

export const INVOICE_TRANSITIONS: readonly InvoiceTransition[] = [
  { from: "draft", to: "open", event: "invoice.finalized", when: "its grace period ended, or an operator finalized it early" },
  { from: "open", to: "paid", event: "invoice.paid", when: "its total was charged to a saved payment method, or it had nothing to pay" },
  { from: "open", to: "void", event: "invoice.voided", when: "an operator voided it, or the charge of a credit purchase did not succeed" },
  {
    from: "open",
    to: "uncollectible",
    event: "invoice.marked_uncollectible",
    when: "an operator marked it uncollectible, or dunning after the last failed attempt (if the environment marks uncollectible)",
  },
];

/** The transition from `from` to `to`, or undefined when an invoice cannot move so. */
export function transitionOf(from: InvoiceStatus, to: InvoiceStatus): InvoiceTransition | undefined {
  return INVOICE_TRANSITIONS.find((t) => t.from === from && t.to === to);
}

/** Whether an invoice in `from` may move to `to`. */
export function canTransition(from: InvoiceStatus, to: InvoiceStatus): boolean {
  return transitionOf(from, to) !== undefined;
}

/** The transition from `from` to `to`; throws when the table does not allow it (a programming error, never a caller's). */
export function checkTransition(from: InvoiceStatus, to: InvoiceStatus): InvoiceTransition {
  const t = transitionOf(from, to);
  if (!t) throw new Error(`an invoice cannot move from ${from} to ${to}`);
  return t;
}

/** The events that announce `invoices` moving by `t`, each as it is after the move; none when the move is not announced. */
export function transitionEvents(t: InvoiceTransition, invoices: readonly Invoice[]): NewEvent[] {
  const { event } = t;
  // An empty invoice kept internal is never announced (DESIGN §15).
  return event === null ? [] : invoices.filter((i) => !isInternal(i)).map((i) => invoiceEvent(event, { ...i, status: t.to }));
}
