/**
 * Dunning (DESIGN §16) wired over the billing engine: settlement charges each invoice as an
 * attempt of its own, the scheduler (and so every test-clock advance) runs the retries due, the
 * portal retries open invoices with a new card, and the hosted invoice page completes a charge
 * that waited for the customer; a payment left waiting on an invoice that ended is cancelled
 * (payments/cancels.ts). The settings are the environment's payment settings (the store
 * PATCH /payment-settings writes; none stored: the defaults, 3/5/7 days and leave active).
 */
import { BillingError } from "../billing/errors.js";
import { Dunning } from "../billing/payments/attempts.js";
import { PaymentCancels } from "../billing/payments/cancels.js";
import type { BillingEngine } from "../billing/subscriptions/engine.js";
import type { Database } from "../db/datasource.js";
import { SqlDunningStore } from "../db/stores/dunning-store.js";
import { SqlPaymentSettingsStore } from "../db/stores/payment-settings-store.js";
import { defaultPaymentSettings } from "../billing/payments/types.js";
import type { Logger } from "../log.js";
import type { SubscriptionChanges } from "../billing/subscriptions/changes.js";
import type { Pauses } from "../billing/subscriptions/pauses.js";
import type { CustomerPortal } from "../billing/subscriptions/portal.js";
import type { Scheduler } from "../billing/subscriptions/scheduler.js";
import type { Invoices } from "../billing/subscriptions/invoices.js";

/** The payment-failure policy's reason on a subscription it cancels. */
export const DUNNING_CANCEL_REASON = "payment_failed";

export function wireDunning(
  db: Database,
  engine: BillingEngine,
  subs: { changes: SubscriptionChanges; pauses: Pauses; portal: CustomerPortal; scheduler: Scheduler; invoices: Invoices },
  log?: Logger,
): Dunning {
  const settings = new SqlPaymentSettingsStore(db.sql, db.entities);
  const store = new SqlDunningStore(db.sql);
  const dunning = new Dunning(
    engine.stores,
    engine.reads,
    store,
    { settingsOf: async (environmentId) => (await settings.get(environmentId)) ?? defaultPaymentSettings(environmentId, engine.now()) },
    {
      cancelNow: (caller, id) => subs.changes.cancel(caller, id, { reason: DUNNING_CANCEL_REASON }),
      pause: (caller, id) => subs.pauses.pause(caller, id, {}),
    },
    engine.now,
    {
      settleFailed: (invoice, err) => log?.error("a payment attempt of an invoice failed; it stays open", { invoice, ...(err instanceof BillingError ? { error: err.message } : { err }) }),
    },
  );
  engine.settlement.attempts = dunning;
  subs.scheduler.dunning = dunning;
  subs.scheduler.dunningDue = store;
  subs.portal.dunning = dunning;
  // Payments left waiting for the customer on invoices that ended: cancelled after the commit, the sweep on real time retries.
  const cancels = new PaymentCancels(
    engine.stores,
    (environmentId) => engine.reads.providerFor(environmentId),
    store,
    engine.now,
    (invoice, err) =>
      log?.error("cancelling (or refunding) the payment of an ended invoice failed; tried again later", { invoice, ...(err instanceof BillingError ? { error: err.message } : { err }) }),
    (invoice, message) => log?.warn(message, { invoice }),
  );
  dunning.cancels = cancels;
  subs.invoices.cancels = cancels;
  subs.scheduler.realTimeSweeps.push(cancels);
  return dunning;
}
