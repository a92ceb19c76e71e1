/**
 * Stripe's side of this service (DESIGN §16), no API key (Stripe's signature, or the customer's
 * browser coming back from Stripe):
 *
 *   POST /providers/stripe/webhooks/{environment_id}   Stripe's webhooks: checked with the library
 *        (constructEvent, the environment's signing secret; unknown environment or bad signature:
 *        400, nothing changes), then handled once per event id (ProviderEvents): 200; a refund event
 *        that comes before the credit note its refund names is written (the refund is made inside
 *        the note's transaction), or before the refund of an invoice's payment is recorded on it:
 *        409, nothing recorded, and Stripe delivers it again later.
 *   GET  /providers/stripe/return/{environment_id}?ref=…&session_id=…   where Stripe Checkout
 *        sends the customer back: completes the card setup (if the webhook did not already), then
 *        on to the checkout's success URL or the portal.
 *
 * Handled events: checkout.session.completed (setup: the card saved, the checkout completed;
 * payment, an invoice's pay link: the invoice paid, the card used kept),
 * payment_intent.succeeded (the invoice paid), payment_intent.payment_failed (recorded; dunning
 * decides), refund.updated and refund.failed (the credit note of that refund in this environment
 * takes its status: pending, succeeded or failed, only forward; a failure is announced with
 * `credit_note.refund_failed` and logged as a warning; a refund of a payment that succeeded on an
 * ended invoice, or of an excess, is recorded failed on its invoice, announced with
 * `invoice.refund_failed` and logged as a warning), and setup_intent.succeeded,
 * payment_method.attached, charge.refunded, refund.created acknowledged (their effect is another
 * event's, or the refund's answer). Any other type: 200, ignored.
 */
import Stripe from "stripe";
import type { ProviderEventRef, ProviderEvents } from "../../billing/payments/provider-events.js";
import type { RefundUpdate } from "../../billing/payments/types.js";
import type { ProviderSettingsSource } from "../../billing/subscriptions/payments.js";
import type { Logger } from "../../log.js";
import { messagePage, type Req, type Res } from "../../pages/shell.js";
import { receivedOf } from "./pay-link.js";
import type { StripeProvider } from "./provider.js";

/** The largest webhook body read (Stripe's events are far smaller). */
const MAX_WEBHOOK_BYTES = 1024 * 1024;

const ACKNOWLEDGED = new Set([
  "setup_intent.succeeded",
  "setup_intent.setup_failed",
  "payment_method.attached",
  "charge.refunded",
  "refund.created",
  "charge.succeeded",
  "charge.failed",
  "payment_intent.created",
  "payment_intent.requires_action",
]);

/** Stripe's refund status as a credit note keeps it: requires_action is still pending, canceled is failed. */
function refundStatusOf(status: string | null): "pending" | "succeeded" | "failed" {
  if (status === "succeeded") return "succeeded";
  return status === "failed" || status === "canceled" ? "failed" : "pending";
}

/** The invoice and kind a refund of an invoice's payment names in `env` (provider.ts refund), if it does. */
function invoiceRefundOf(env: string, refund: Stripe.Refund): RefundUpdate["invoiceRefund"] {
  const m = refund.metadata;
  const kind = m?.refund_kind;
  return m?.environment_id === env && m.invoice_id && (kind === "after_end" || kind === "excess") ? { invoiceId: m.invoice_id, kind } : null;
}

/**
 * Stripe's refund.updated / refund.failed: the credit note of that refund in `env` takes its status,
 * or the invoice whose payment it gives back (payments/refund-failures.ts); a failure is logged as a
 * warning. A refund names its note or invoice and environment (provider.ts refund): in this
 * environment, its event waits for the note, or for the refund recorded on the invoice ("refund_early").
 */
async function refundEvent(ev: ProviderEvents, log: Logger, env: string, refund: Stripe.Refund, ref: ProviderEventRef): Promise<string> {
  const creditNoteId = refund.metadata?.environment_id === env ? (refund.metadata.credit_note_id ?? null) : null;
  const failureReason = refund.failure_reason ?? (refund.status === "canceled" ? "canceled" : null);
  const update: RefundUpdate = { refundId: refund.id, status: refundStatusOf(refund.status), failureReason, creditNoteId, invoiceRefund: invoiceRefundOf(env, refund) };
  const out = await ev.refundUpdated(env, update, ref);
  if (out.outcome === "failed" && out.creditNoteId) {
    log.warn("stripe refund of a credit note failed: the money did not go back", { environment_id: env, credit_note_id: out.creditNoteId, refund_id: refund.id, failure_reason: failureReason });
  } else if (out.outcome === "failed") {
    const named = update.invoiceRefund;
    log.warn("stripe refund of an invoice's payment failed: the money did not go back", {
      environment_id: env,
      invoice_id: named?.invoiceId,
      kind: named?.kind,
      refund_id: refund.id,
      failure_reason: failureReason,
    });
  }
  return `refund_${out.outcome}`;
}

export interface StripeEndpointsDeps {
  settings: ProviderSettingsSource;
  /** The environment's Stripe provider for its key (the same factory the providers use). */
  stripeFor: (secretKey: string, environmentId: string) => StripeProvider;
  events: ProviderEvents;
  log: Logger;
}

function json(res: Res, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
  res.end(text);
}

/** The body, whole, or undefined past `max` bytes. */
async function rawBody(req: Req, max: number): Promise<Buffer | undefined> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) return undefined;
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

export function createStripeEndpoints(deps: StripeEndpointsDeps) {
  const { log } = deps;

  async function providerOf(environmentId: string): Promise<{ provider: StripeProvider; webhookSecret: string | null } | undefined> {
    const s = await deps.settings.providerOf(environmentId).catch(() => undefined);
    if (s?.provider !== "stripe" || !s.stripeSecretKey) return undefined;
    return { provider: deps.stripeFor(s.stripeSecretKey, environmentId), webhookSecret: s.stripeWebhookSecret };
  }

  async function handleEvent(env: string, provider: StripeProvider, event: Stripe.Event): Promise<string> {
    const ref: ProviderEventRef = { provider: "stripe", eventId: event.id, eventType: event.type };
    const ev = deps.events;
    switch (event.type) {
      case "checkout.session.completed": {
        const session = event.data.object as Stripe.Checkout.Session;
        if (session.mode === "payment") {
          // An invoice's pay link (pay-link.ts), paid: the invoice paid once, the card kept.
          const paid = session.payment_status === "paid" ? await provider.completedPayment(session.id) : undefined;
          if (!paid) return (await ev.acknowledge(env, ref)) ? "acknowledged" : "repeat";
          return ev.paidOnPage(env, paid.invoiceId, paid.reference, paid.card, ref, paid.sessionId, paid.received);
        }
        const done = session.mode === "setup" ? await provider.completedSetup(session.id) : undefined;
        if (!done) return (await ev.acknowledge(env, ref)) ? "acknowledged" : "repeat";
        const { redirect } = await ev.cardSaved(env, done.reference, done.card, ref, done.sessionId);
        // No checkout or portal session of this environment by that reference (unknown, or another environment's): nothing saved.
        if (!redirect) log.warn("stripe card setup completes nothing in this environment", { environment_id: env, session_id: done.sessionId, reference: done.reference });
        return redirect ? "card_saved" : "card_setup_ignored";
      }
      case "payment_intent.succeeded": {
        const pi = event.data.object as Stripe.PaymentIntent;
        const invoiceId = pi.metadata?.invoice_id;
        if (!invoiceId || pi.metadata?.environment_id !== env) return (await ev.acknowledge(env, ref)) ? "acknowledged" : "repeat";
        // What it took: more than the amount due (a pay link opened before a credit note), the difference is refunded.
        return ev.paymentSucceeded(env, invoiceId, pi.id, ref, receivedOf(pi));
      }
      case "payment_intent.payment_failed": {
        const pi = event.data.object as Stripe.PaymentIntent;
        const invoiceId = pi.metadata?.invoice_id;
        if (!invoiceId || pi.metadata?.environment_id !== env) return (await ev.acknowledge(env, ref)) ? "acknowledged" : "repeat";
        const e = pi.last_payment_error;
        // The off-session charge asking for the customer's authentication: what made the invoice wait, not its outcome.
        if (e?.code === "authentication_required") return (await ev.acknowledge(env, ref)) ? "acknowledged" : "repeat";
        return ev.paymentFailed(env, invoiceId, pi.id, { message: e?.message ?? "The payment failed.", code: e?.decline_code ?? e?.code ?? null }, ref);
      }
      case "refund.updated":
      case "refund.failed":
        return refundEvent(deps.events, log, env, event.data.object as Stripe.Refund, ref);
      default:
        if (ACKNOWLEDGED.has(event.type)) return (await ev.acknowledge(env, ref)) ? "acknowledged" : "repeat";
        return "ignored";
    }
  }

  async function webhook(req: Req, res: Res, env: string): Promise<void> {
    const body = await rawBody(req, MAX_WEBHOOK_BYTES);
    if (!body) return json(res, 413, { error: "payload too large" });
    const found = await providerOf(env);
    // Unknown environment, or one not on Stripe, or without a signing secret: nothing to check against.
    if (!found?.webhookSecret) return json(res, 400, { error: "this environment receives no Stripe webhooks" });
    let event: Stripe.Event;
    try {
      event = Stripe.webhooks.constructEvent(body, String(req.headers["stripe-signature"] ?? ""), found.webhookSecret);
    } catch {
      return json(res, 400, { error: "the Stripe-Signature header does not verify" });
    }
    const outcome = await handleEvent(env, found.provider, event);
    log.debug("stripe webhook", { environment_id: env, event_id: event.id, type: event.type, outcome });
    // The credit note of that refund not committed yet: not handled, Stripe retries (with backoff, for days).
    if (outcome === "refund_early") return json(res, 409, { error: "the credit note (or invoice record) of this refund is not written yet; deliver it again later" });
    json(res, 200, { received: true });
  }

  async function returned(req: Req, res: Res, env: string): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const sessionId = url.searchParams.get("session_id") ?? "";
    const ref = url.searchParams.get("ref") ?? "";
    const found = await providerOf(env);
    const done = found && sessionId.startsWith("cs_") ? await found.provider.completedSetup(sessionId) : undefined;
    if (!done || done.reference !== ref) return messagePage(res, 404, "Not found", "This card setup is not known", "Go back to the application and try again.");
    const { redirect } = await deps.events.cardSaved(env, done.reference, done.card, null, done.sessionId);
    if (!redirect) {
      log.warn("stripe card setup completes nothing in this environment", { environment_id: env, session_id: done.sessionId, reference: done.reference });
      return messagePage(res, 410, "Gone", "This checkout is no longer available");
    }
    res.writeHead(303, { location: redirect, "cache-control": "no-store" });
    res.end();
  }

  /** The page handler: true when it answers the request (its path is under /providers/stripe/). */
  return (req: Req, res: Res): boolean => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    const m = /^\/providers\/stripe\/(webhooks|return)\/([0-9A-Za-z_-]{1,64})$/.exec(path);
    if (!m) return false;
    const [, kind, env] = m as unknown as [string, string, string];
    const method = kind === "webhooks" ? "POST" : "GET";
    if (req.method !== method) {
      res.writeHead(405, { allow: method });
      res.end();
      return true;
    }
    (kind === "webhooks" ? webhook(req, res, env) : returned(req, res, env)).catch((err: unknown) => {
      // A failure to handle is a 500: Stripe delivers the event again later (nothing was recorded).
      log.error("stripe endpoint failed", { path, err });
      if (!res.headersSent) json(res, 500, { error: "internal" });
      else res.end();
    });
    return true;
  };
}
