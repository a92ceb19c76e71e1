/**
 * Outgoing events (DESIGN §10, issue 16): what happened to a resource, written by the use case in
 * the same transaction as the change itself (the outbox), then delivered as signed webhooks and
 * offered on the WatchEvents stream. The domain names the event and hands over the resource as it
 * is after the change; the store gives it an id and a time and freezes the resource's wire JSON
 * (an encoder injected from src/rpc, so this folder never imports the transport).
 */
import type { Coupon, Discount } from "../coupons/types.js";
import type { CreditNote } from "../credit-notes/types.js";
import type { CreditGrant } from "../credits/types.js";
import type { InvoiceRefundKind, RefundAfterEnd } from "../payments/types.js";
import type { Subject } from "../subject-types.js";
import { type CheckoutSession, type Invoice, type Subscription, isInternal } from "../subscriptions/types.js";

/** Every event type, in the order the README's table lists them. */
export const EVENT_TYPES = [
  "subject.created",
  "subject.updated",
  "subject.deleted",
  "subscription.created",
  "subscription.activated",
  "subscription.updated",
  "subscription.cancelled",
  "subscription.paused",
  "subscription.resumed",
  "subscription.rate_card_changed",
  "checkout.completed",
  "checkout.failed",
  "invoice.created",
  "invoice.finalized",
  "invoice.paid",
  "invoice.payment_failed",
  "invoice.payment_action_required",
  "invoice.voided",
  "invoice.marked_uncollectible",
  "invoice.refund_failed",
  "usage.threshold_crossed",
  "credit_grant.created",
  "credit_grant.activated",
  "credit_grant.voided",
  "credit_grant.expired",
  "credit.balance_low",
  "credit.depleted",
  "credit_note.created",
  "credit_note.refund_failed",
  "coupon.redeemed",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export function isEventType(s: string): s is EventType {
  return (EVENT_TYPES as readonly string[]).includes(s);
}

/** A usage rate of a subscription crossing a percentage of its included units in one period. */
export interface UsageThreshold {
  subscriptionId: string;
  subjectId: string;
  rateCode: string;
  /** The percentage of the included units crossed (e.g. 80). */
  percent: number;
  includedUnits: string;
  usedUnits: string;
  periodStart: Date;
  periodEnd: Date;
}

/** A subject's credit in one currency as `credit.balance_low` and `credit.depleted` carry it. */
export interface CreditAlertPayload {
  subjectId: string;
  currency: string;
  /** Canonical decimals in the currency's smallest unit. */
  balance: string;
  available: string;
  /** The low-balance threshold (credit.balance_low), or null. */
  threshold: string | null;
}

/** The resource an event carries, as the domain has it after the change. */
export type EventResource =
  | { kind: "subject"; subject: Subject }
  | { kind: "subscription"; subscription: Subscription }
  | { kind: "invoice"; invoice: Invoice }
  | { kind: "checkout"; checkout: CheckoutSession; subscriptionId: string | null; failure: string | null }
  | { kind: "usage_threshold"; threshold: UsageThreshold }
  | { kind: "credit_note"; creditNote: CreditNote }
  | { kind: "invoice_refund"; invoice: Invoice; refund: RefundAfterEnd; refundKind: InvoiceRefundKind }
  | { kind: "credit_grant"; grant: CreditGrant }
  | { kind: "credit_alert"; alert: CreditAlertPayload }
  | { kind: "discount"; discount: Discount; coupon: Coupon };

/** An event as a use case emits it; the store adds its id and time. */
export interface NewEvent {
  /** Given when the caller must know it beforehand (else the store makes one). */
  id?: string;
  type: EventType;
  environmentId: string;
  resource: EventResource;
}

/** An event as stored: `data` is the resource's JSON text as the REST API returns it. */
export interface StoredEvent {
  /** The stream cursor (an increasing number); the public cursor is `id`. */
  seq: number;
  id: string;
  environmentId: string;
  type: EventType;
  createdAt: Date;
  data: string;
}

/** What a transaction may write besides the change: its events. */
export interface EventWrites {
  emit(events: NewEvent[]): Promise<void>;
}

/** The resource to wire JSON text (REST form), injected into the store from src/rpc. */
export type EventEncoder = (resource: EventResource) => string;

export const subjectEvent = (type: EventType, subject: Subject): NewEvent => ({ type, environmentId: subject.environmentId, resource: { kind: "subject", subject } });
export const subscriptionEvent = (type: EventType, subscription: Subscription): NewEvent => ({
  type,
  environmentId: subscription.environmentId,
  resource: { kind: "subscription", subscription },
});
export const invoiceEvent = (type: EventType, invoice: Invoice): NewEvent => ({ type, environmentId: invoice.environmentId, resource: { kind: "invoice", invoice } });

export const creditGrantEvent = (type: EventType, grant: CreditGrant): NewEvent => ({ type, environmentId: grant.environmentId, resource: { kind: "credit_grant", grant } });

/**
 * A newly written invoice: created, and finalized too when it is open from the start (no grace
 * period). None for an empty invoice kept internal (DESIGN §15): it is announced when a line lands
 * on it, at its finalization (see Drafts).
 */
export function newInvoiceEvents(invoice: Invoice): NewEvent[] {
  if (isInternal(invoice)) return [];
  const out = [invoiceEvent("invoice.created", invoice)];
  if (invoice.status === "open") out.push(invoiceEvent("invoice.finalized", invoice));
  return out;
}
