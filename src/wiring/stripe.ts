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
import type { SubjectService } from "../billing/subjects.js";
import type { Config } from "../config.js";
import type { Database } from "../db/datasource.js";
import { SqlProviderStore } from "../db/stores/provider-store.js";
import type { Logger } from "../log.js";
import { type StripeProvider, stripeFactory } from "../providers/stripe/provider.js";
import { createStripeEndpoints } from "../providers/stripe/webhooks.js";
import { StripeCustomers } from "../providers/stripe/customers.js";

/** The Stripe factory of this server's configuration. */
export function wireStripeFactory(db: Database, config: Pick<Config, "stripeApi" | "testDieAfterCharge">, publicBaseUrl: () => string): StripeFactory {
  return stripeFactory({ store: new SqlProviderStore(db.sql, db.entities), api: config.stripeApi, publicBaseUrl, dieAfterCharge: config.testDieAfterCharge });
}

/** How long a subject's update waits for its Stripe customer's sync before answering. */
const SYNC_WAIT_MS = 3_000;

/**
 * The subjects' hook (SubjectService.detailsChanged): after a subject's name, email or billing
 * details change, its Stripe customer (if it has one, in an environment on Stripe) is updated.
 * A failure is logged, never thrown: the next card setup syncs the customer again.
 */
export function stripeCustomerSync(db: Database, settings: Pick<PaymentSettingsService, "providerOf">, factory: StripeFactory | undefined, log: Logger | undefined) {
  const store = new SqlProviderStore(db.sql, db.entities);
  const sync = async (environmentId: string, subjectId: string): Promise<void> => {
    try {
      const s = await settings.providerOf(environmentId);
      if (s?.provider !== "stripe" || !s.stripeSecretKey || !factory) return;
      const made = factory(s.stripeSecretKey, environmentId);
      if (!isStripe(made)) return;
      const customer = await new StripeCustomers(made.stripe, store, environmentId).syncExisting(subjectId);
      if (customer) log?.debug("stripe customer synced", { environment_id: environmentId, subject_id: subjectId, customer });
    } catch (err) {
      log?.warn("the subject's Stripe customer could not be updated; its next card setup syncs it", { environment_id: environmentId, subject_id: subjectId, err });
    }
  };
  // The update's answer waits for the sync, but not long: a slow Stripe (the library retries, 30 s
  // each) finishes it after the answer.
  return (environmentId: string, subjectId: string): Promise<void> => Promise.race([sync(environmentId, subjectId), new Promise<void>((resolve) => setTimeout(resolve, SYNC_WAIT_MS).unref())]);
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
  dunning?: Pick<Dunning, "actionResolved" | "cancels">;
  /** The subjects whose Stripe customers are kept in sync (stripeCustomerSync), and the database of their customers. */
  customers?: { db: Database; subjects: Pick<SubjectService, "detailsChanged"> };
}

/** Stripe's endpoints (/providers/stripe/…) as a page handler, the domain's handling of provider events, and the hosted checkout and portal they complete. */
export function wireStripeEndpoints(p: StripeEndpointParts) {
  // Where Stripe Checkout sends the customer of a hosted checkout back to.
  p.hostedCheckout.publicBaseUrl = p.publicBaseUrl;
  const events = new ProviderEvents(
    p.stores,
    {
      checkout: (env, token, card, record) => p.hostedCheckout.completeWithSavedCard(env, token, card, record),
      portal: (env, token, card, record) => p.portal.saveProviderCard(env, token, card, record),
    },
    p.now,
  );
  if (p.customers) p.customers.subjects.detailsChanged = stripeCustomerSync(p.customers.db, p.paymentSettings, p.stripe, p.log);
  const dunning = p.dunning;
  if (dunning) events.resolveAction = (inv, reference, outcome) => dunning.actionResolved({ environmentId: inv.environmentId, id: inv.id, clockId: inv.clockId }, reference, outcome);
  const cancels = dunning?.cancels;
  if (cancels) events.refundAfterEnd = (inv, reference) => cancels.paidAfterEnd(inv, reference);
  if (cancels) events.invoiceRefunds = (env, update, event) => cancels.refundUpdated(env, update, event);
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
