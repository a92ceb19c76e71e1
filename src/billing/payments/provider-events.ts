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
import { invoiceEvent } from "../events/types.js";
import { checkTransition, transitionEvents } from "../subscriptions/invoice-states.js";
import type { BillingStores, BillingTx } from "../subscriptions/ports.js";
import { retryingRaces } from "../subscriptions/races.js";
import type { Invoice } from "../subscriptions/types.js";
import type { ProviderEventRef } from "./event-writes.js";
import type { ProviderKind } from "./types.js";

export type { ProviderEventRef, ProviderEventWrites } from "./event-writes.js";

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
 * the customer goes without saving the card again.
 */
export interface CardSetupTargets {
  checkout(token: string, card: SavedCard, record: (tx: BillingTx) => Promise<boolean>): Promise<{ redirect: string | null }>;
  portal(token: string, card: SavedCard, record: (tx: BillingTx) => Promise<boolean>): Promise<{ redirect: string | null }>;
}

/** The hook of dunning (DESIGN §16) for a payment that failed after the charge call; absent: the failure is announced. */
export type PaymentFailedHook = (environmentId: string, invoice: Invoice, failure: { message: string; code: string | null }) => Promise<void>;

export class ProviderEvents {
  /** Set by the wiring once dunning exists. */
  onPaymentFailed: PaymentFailedHook | undefined = undefined;

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
   * (`event`) or the customer's return (no event) comes first, even both at once.
   */
  async cardSaved(environmentId: string, reference: string, card: SavedCard, event: ProviderEventRef | null, setupId: string): Promise<{ redirect: string | null }> {
    const [kind, token] = splitReference(reference);
    const record = this.recorder(environmentId, event, { provider: card.provider, id: setupId });
    const out = kind === "checkout" ? await this.targets.checkout(token, card, record) : kind === "portal" ? await this.targets.portal(token, card, record) : { redirect: null };
    // Completed already (by the return URL): the webhook is still recorded, so its repeat is one too.
    if (event) await this.acknowledge(environmentId, event);
    return out;
  }

  /** A payment of `invoiceId` succeeded at the provider: the invoice is paid (`invoice.paid`) if still open; else nothing. */
  async paymentSucceeded(environmentId: string, invoiceId: string, event: ProviderEventRef): Promise<"paid" | "unchanged"> {
    const invoice = await this.stores.invoices.get(environmentId, invoiceId);
    const pay = checkTransition("open", "paid");
    return retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        if (!(await this.recorder(environmentId, event)(tx))) return "unchanged" as const;
        if (invoice?.status !== "open") return "unchanged" as const;
        const moved = await tx.moveInvoices([invoice.id], pay.from, pay.to, this.now());
        if (moved.length === 0) return "unchanged" as const;
        await tx.emit(transitionEvents(pay, [invoice]));
        return "paid" as const;
      }),
    );
  }

  /**
   * A payment of `invoiceId` failed at the provider (after the customer's authentication, say):
   * dunning's hook decides what follows; without it `invoice.payment_failed` is announced. An
   * invoice no longer open (paid by an earlier or later success) changes nothing.
   */
  async paymentFailed(environmentId: string, invoiceId: string, failure: { message: string; code: string | null }, event: ProviderEventRef): Promise<"failed" | "unchanged"> {
    const invoice = await this.stores.invoices.get(environmentId, invoiceId);
    const hook = this.onPaymentFailed;
    const fresh = await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        if (!(await this.recorder(environmentId, event)(tx))) return false;
        if (invoice?.status !== "open") return false;
        if (!hook) await tx.emit([invoiceEvent("invoice.payment_failed", invoice)]);
        return true;
      }),
    );
    if (!fresh || !invoice) return "unchanged";
    if (hook) await hook(environmentId, invoice, failure);
    return "failed";
  }
}

/** A card setup's reference: `checkout:<token>` or `portal:<token>`. */
export function cardSetupReference(kind: "checkout" | "portal", token: string): string {
  return `${kind}:${token}`;
}

function splitReference(reference: string): [string, string] {
  const at = reference.indexOf(":");
  return at < 0 ? ["", reference] : [reference.slice(0, at), reference.slice(at + 1)];
}
