/**
 * Stripe (DESIGN §16) wired: the factory each environment's Stripe provider is built with (its
 * API host from STRIPE_API_BASE, its customers in provider_customers), and Stripe's endpoints
 * (webhooks, the customer's return from Checkout) over the domain's ProviderEvents.
 */
import type { Dunning } from "../billing/payments/attempts.js";
import { ProviderEvents } from "../billing/payments/provider-events.js";
import type { PaymentSettingsService } from "../billing/payments/settings.js";
import type { BillingStores } from "../billing/subscriptions/ports.js";
import type { HostedCheckout } from "../billing/subscriptions/hosted-checkout.js";
import type { StripeFactory } from "../billing/subscriptions/payments.js";
import type { CustomerPortal } from "../billing/subscriptions/portal.js";
import type { PaymentProvider } from "../billing/subscriptions/types.js";
import type { Config } from "../config.js";
import type { Database } from "../db/datasource.js";
import { SqlProviderStore } from "../db/stores/provider-store.js";
import type { Logger } from "../log.js";
import { type StripeProvider, stripeFactory } from "../providers/stripe/provider.js";
import { createStripeEndpoints } from "../providers/stripe/webhooks.js";

/** The Stripe factory of this server's configuration. */
export function wireStripeFactory(db: Database, config: Pick<Config, "stripeApi" | "testDieAfterCharge">, publicBaseUrl: () => string): StripeFactory {
  return stripeFactory({ store: new SqlProviderStore(db.sql, db.entities), api: config.stripeApi, publicBaseUrl, dieAfterCharge: config.testDieAfterCharge });
}

function isStripe(p: PaymentProvider): p is StripeProvider {
  return p.kind === "stripe" && typeof (p as Partial<StripeProvider>).completedSetup === "function";
}

export interface StripeEndpointParts {
  stores: BillingStores;
  paymentSettings: PaymentSettingsService;
  hostedCheckout: HostedCheckout;
  portal: CustomerPortal;
  stripe: StripeFactory | undefined;
  now: () => Date;
  log: Logger | undefined;
  publicBaseUrl: () => string;
  /** Dunning: resolves a payment that waited for the customer as Stripe reports it. */
  dunning?: Pick<Dunning, "actionResolved">;
}

/** Stripe's endpoints (/providers/stripe/…) as a page handler, the domain's handling of provider events, and the hosted checkout and portal they complete. */
export function wireStripeEndpoints(p: StripeEndpointParts) {
  // Where Stripe Checkout sends the customer of a hosted checkout back to.
  p.hostedCheckout.publicBaseUrl = p.publicBaseUrl;
  const events = new ProviderEvents(
    p.stores,
    {
      checkout: (token, card, record) => p.hostedCheckout.completeWithSavedCard(token, card, record),
      portal: (token, card, record) => p.portal.saveProviderCard(token, card, record),
    },
    p.now,
  );
  const dunning = p.dunning;
  if (dunning) events.resolveAction = (inv, reference, outcome) => dunning.actionResolved({ environmentId: inv.environmentId, id: inv.id, clockId: inv.clockId }, reference, outcome);
  const factory = p.stripe;
  const stripePages = createStripeEndpoints({
    settings: p.paymentSettings,
    stripeFor: (secretKey, environmentId) => {
      const made = factory?.(secretKey, environmentId);
      if (!made || !isStripe(made)) throw new Error("this server has no Stripe provider built in");
      return made;
    },
    events,
    log: p.log ?? silent,
  });
  return { providerEvents: events, stripePages, hostedCheckout: p.hostedCheckout, portal: p.portal };
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {}, enabled: () => false };
