/**
 * The hosted checkout page's use cases: showing a checkout, completing it with a card (which is
 * saved on the subject, then what the checkout was for happens: a subscription, a rate-card
 * change or a timeline start) and cancelling it. Opening one is checkout.ts.
 */
import { NotFoundError } from "../errors.js";
import type { NewEvent } from "../events/types.js";
import { newId } from "../ids.js";
import { type Caller, systemCaller } from "../tenancy.js";
import { NO_PROVIDER_PAGE_MESSAGE } from "./checkout.js";
import type { SubscriptionChanges } from "./changes.js";
import type { Lookups } from "./lookups.js";
import type { CreateSubscriptionInput, Subscriptions } from "./subscribe.js";
import type { TimelineService } from "./timelines.js";
import type { CheckoutSession, Commitment, PaymentProvider } from "./types.js";

/** What completes a credit purchase's checkout (src/billing/credits/purchase.ts), set by the wiring. */
export interface CreditCheckouts {
  /** Whether the purchase can still be paid (its grant still pending payment). */
  pending(environmentId: string, grantId: string): Promise<boolean>;
  completeCheckout(caller: Caller, payload: { grantId: string; invoiceId: string }, paymentMethodId: string, now: Date): Promise<unknown>;
}

export class HostedCheckout {
  /** Credit purchases (checkout kind `credit`); absent: such a checkout cannot be completed. */
  purchases: CreditCheckouts | undefined = undefined;

  constructor(
    private readonly lookups: Lookups,
    private readonly subscriptions: Subscriptions,
    private readonly changes: SubscriptionChanges,
    private readonly timelines: TimelineService,
  ) {}

  private get engine() {
    return this.lookups.engine;
  }

  private get stores() {
    return this.lookups.stores;
  }

  /**
   * A checkout as its page shows it: usable (open, not expired), and the provider it would be
   * paid through — none in a live environment, where it cannot be paid (test cards refused).
   */
  async checkout(token: string): Promise<{ session: CheckoutSession; usable: boolean; now: Date; provider: PaymentProvider | undefined }> {
    const session = await this.stores.checkouts.get(token);
    if (!session) throw new NotFoundError("CHECKOUT_NOT_FOUND", "no such checkout");
    const subject = await this.stores.directory.subject(session.environmentId, session.subjectId);
    const now = subject ? await this.lookups.nowFor(subject) : this.engine.now();
    const provider = await this.engine.reads.providerFor(session.environmentId);
    return { session, usable: session.status === "open" && now.getTime() < session.expiresAt.getTime(), now, provider };
  }

  /**
   * Completes a checkout with a card number: declined cards change nothing; a good one is saved
   * on the subject and what the checkout was for happens. A completed, cancelled or expired
   * checkout cannot be used again.
   */
  async completeCheckout(token: string, cardNumber: string): Promise<{ ok: true; redirect: string } | { ok: false; message: string; gone?: boolean; noProvider?: boolean }> {
    const { session, usable, provider } = await this.checkout(token);
    if (!usable) return { ok: false, gone: true, message: "This checkout is no longer available." };
    // A live environment has no provider: no card is taken (test cards are refused), nothing changes.
    if (!provider) return { ok: false, noProvider: true, message: NO_PROVIDER_PAGE_MESSAGE };
    const card = provider.tokenize(cardNumber);
    if (!card.ok) {
      // A declined card changes nothing but is worth telling: the customer tried and could not pay.
      await this.stores.transaction((tx) => tx.emit([checkoutEvent("checkout.failed", session, card.message)]));
      return { ok: false, message: card.message };
    }
    const caller = systemCaller(session.environmentId, (await this.engine.reads.modeOf(session.environmentId)) ?? "test");
    const subject = await this.stores.directory.subject(session.environmentId, session.subjectId);
    // What the checkout was for must still be possible before the card is taken and the checkout used.
    const stale = { ok: false as const, gone: true, message: "This checkout can no longer be completed: the subscription or plan changed meanwhile." };
    if (!subject) return stale;
    const kind = session.kind;
    if (kind === "credit") {
      const p = session.payload as { grantId: string };
      if (!this.purchases || !(await this.purchases.pending(session.environmentId, p.grantId))) return stale;
    } else if (session.kind === "change") {
      const p = session.payload as { subscriptionId: string; rateCardId: string };
      const sub = await this.stores.subscriptions.get(session.environmentId, p.subscriptionId);
      if (sub?.status !== "active" || sub.rateCardId === p.rateCardId) return stale;
    } else if (session.kind === "timeline") {
      const tl = await this.stores.timelines.get(session.environmentId, (session.payload as { timelineId: string }).timelineId);
      if (tl?.status !== "draft") return stale;
    } else if ((session.payload as { request: CreateSubscriptionInput }).request.timelineId) {
      const tl = await this.stores.timelines.get(session.environmentId, (session.payload as { request: CreateSubscriptionInput }).request.timelineId);
      if (tl?.status !== "draft") return stale;
    }
    const pmId = newId("pm_card");
    const claimed = await this.stores.transaction(async (tx) => {
      const locked = await tx.lockCheckout(token);
      if (locked?.status !== "open") return false;
      await tx.insertPaymentMethod({
        id: pmId,
        environmentId: session.environmentId,
        subjectId: subject.id,
        brand: card.brand,
        last4: card.last4,
        behavior: card.behavior,
        createdAt: this.engine.now(),
      });
      await tx.setSubjectPaymentMethod(subject.id, pmId);
      await tx.updateCheckoutStatus(session.id, "completed");
      await tx.emit([checkoutEvent("checkout.completed", { ...session, status: "completed" }, null)]);
      return true;
    });
    if (!claimed) return { ok: false, gone: true, message: "This checkout is no longer available." };
    if (kind === "credit" && this.purchases) {
      await this.purchases.completeCheckout(caller, session.payload as { grantId: string; invoiceId: string }, pmId, await this.lookups.nowFor(subject));
    } else if (session.kind === "subscribe") {
      // The request as subscribe.ts stored it: its terms, checked then, with the minimum commitment.
      const input = (session.payload as { request: CreateSubscriptionInput & { commitment?: Commitment | null } }).request;
      const withPm = { ...subject, paymentMethodId: pmId };
      const rateCard = await this.lookups.cardOf(caller, input.rateCardId);
      const now = await this.lookups.nowFor(withPm);
      const terms = { quantities: input.fixedRateQuantities, multipliers: input.rateMultipliers, commitment: input.commitment ?? null };
      await this.subscriptions.startNow(caller, withPm, rateCard, terms, input.metadata, input.timelineId || null, now, input.couponId);
    } else if (session.kind === "change") {
      const p = session.payload as { subscriptionId: string; rateCardId: string; behavior: string };
      await this.changes.changeRateCard(caller, p.subscriptionId, { rateCardId: p.rateCardId, behavior: p.behavior });
    } else {
      const p = session.payload as { timelineId: string; effectiveAt: string };
      await this.timelines.begin(caller, p.timelineId, new Date(p.effectiveAt));
    }
    return { ok: true, redirect: session.successUrl };
  }

  /** Cancels an open checkout (a POST from its page; a GET only asks to confirm); returns where to send the customer. */
  async cancelCheckout(token: string): Promise<string> {
    const { session } = await this.checkout(token);
    if (session.status === "open") {
      await this.stores.transaction(async (tx) => {
        const locked = await tx.lockCheckout(token);
        if (locked?.status === "open") await tx.updateCheckoutStatus(session.id, "cancelled");
      });
    }
    return session.cancelledUrl;
  }
}

/**
 * A checkout's event. `subscription_id` is the subscription a change checkout changes; a subscribe
 * checkout's subscription is created after the checkout completes, with its own `subscription.created`.
 */
function checkoutEvent(type: "checkout.completed" | "checkout.failed", c: CheckoutSession, failure: string | null): NewEvent {
  const subscriptionId = c.kind === "change" ? ((c.payload as { subscriptionId?: string }).subscriptionId ?? null) : null;
  return { type, environmentId: c.environmentId, resource: { kind: "checkout", checkout: c, subscriptionId, failure } };
}
