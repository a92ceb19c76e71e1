/**
 * A billing world in memory: the real engine and subscription use cases (wired as app.ts wires
 * them) over the fakes of their ports, on a clock the test moves. No database, no server.
 */
import { wireSubscriptions } from "../../src/wiring/services.js";
import type { FixedRate, PricingMetric, RateCard, UsageRate } from "../../src/billing/catalog/types.js";
import { BillingEngine } from "../../src/billing/subscriptions/engine.js";
import { builtInPaymentProviders } from "../../src/billing/subscriptions/payments.js";
import type { BillingFailure, BillingSubject, Subscription } from "../../src/billing/subscriptions/types.js";
import { type Caller, systemCaller } from "../../src/billing/tenancy.js";
import { FakeBillingStores } from "./billing-stores.js";
import { FakeCatalog, FakeUsage } from "./catalog.js";

export const ENV = "env_unit";

export function fixedRate(code: string, value: string): FixedRate {
  return { id: `rate_${code}`, code, name: code, description: null, price: { kind: "flat", amount: { currency: "USD", value } } };
}

export function usageRate(code: string, metricId: string, value: string, includedUnits = "0"): UsageRate {
  return {
    id: `rate_${code}`,
    code,
    name: code,
    description: null,
    pricingMetricId: metricId,
    includedUnits,
    minimumAmount: null,
    maximumAmount: null,
    type: "simple",
    price: { kind: "flat", amount: { currency: "USD", value } },
  };
}

export function world(start: Date) {
  let now = start;
  const stores = new FakeBillingStores();
  const catalog = new FakeCatalog();
  const usage = new FakeUsage();
  const setAside: { subscription: Subscription; failure: BillingFailure }[] = [];
  stores.state.environments.set(ENV, "test");
  const engine = new BillingEngine(stores, catalog, usage, builtInPaymentProviders(), () => now, { setAside: (s, failure) => setAside.push({ subscription: s, failure }) });
  const cases = wireSubscriptions(engine, catalog.cards, () => "http://billing.test");
  const caller: Caller = systemCaller(ENV);

  return {
    stores,
    catalog,
    usage,
    engine,
    caller,
    setAside,
    ...cases,
    now: () => now,
    moveTo(t: Date) {
      now = t;
    },
    metric(id: string): PricingMetric {
      const m: PricingMetric = { id, environmentId: ENV, eventName: id, name: id, unit: "unit", dimensions: [], aggregation: { type: "sum", valueField: "n" }, createdAt: start, archivedAt: null };
      catalog.metricsById.set(id, m);
      return m;
    },
    card(id: string, fixedRates: FixedRate[], usageRates: UsageRate[] = []): RateCard {
      const card: RateCard = {
        id,
        environmentId: ENV,
        name: id,
        description: null,
        billingInterval: "monthly",
        metadata: {},
        rateCatalogId: null,
        fixedRates,
        usageRates,
        currency: "USD",
        createdAt: start,
        updatedAt: start,
        archivedAt: null,
      };
      catalog.cardsById.set(id, card);
      return card;
    },
    /** A subject; with `card`, a saved card whose charges succeed ("succeeds") or fail. */
    subject(id: string, card?: "succeeds" | "charge_fails"): BillingSubject {
      const pm = card ? `pm_${id}` : null;
      if (pm) stores.state.paymentMethods.set(pm, { id: pm, environmentId: ENV, subjectId: id, brand: "visa", last4: "4242", behavior: card as "succeeds", createdAt: start });
      const s: BillingSubject = { id, environmentId: ENV, testClockId: null, paymentMethodId: pm };
      stores.state.subjects.set(id, s);
      return s;
    },
    /** Subscribes `subjectId` to `cardId` now; fails the test's expectations if a checkout is needed. */
    async subscribe(subjectId: string, cardId: string, fixedRateQuantities: Record<string, string> = {}): Promise<Subscription> {
      const r = await cases.subscriptions.create(caller, { rateCardId: cardId, subjectId, createCheckoutSession: "", fixedRateQuantities, rateMultipliers: {}, metadata: {}, timelineId: "" });
      if (r.kind !== "success") throw new Error(`subscribing needed a checkout: ${r.checkoutUrl}`);
      return r.subscription;
    },
    invoicesOf(subscriptionId: string) {
      return [...stores.state.invoices.values()]
        .filter((i) => i.subscriptionId === subscriptionId)
        .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.periodKey.localeCompare(b.periodKey));
    },
    subscription(id: string): Subscription {
      return stores.state.subscriptions.get(id) as Subscription;
    },
  };
}
