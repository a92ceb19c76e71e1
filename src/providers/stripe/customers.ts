/**
 * A Stripe customer per subject (DESIGN §16): created on first need with an idempotency key
 * derived from the environment and the subject (two servers asking at once get the same
 * customer), stored in provider_customers, and kept in sync with the subject's name, email and
 * billing address before each card setup (not before a charge: charges run inside dunning's
 * transaction, where no other storage call may wait): a sync is skipped when nothing changed
 * since this process last sent it, so a subject's change reaches Stripe by its next card setup.
 * A subject's update of its name, email or billing details syncs its customer at once too, when it
 * has one (syncExisting, wired in src/wiring/stripe.ts stripeCustomerSync).
 */
import { createHash } from "node:crypto";
import type Stripe from "stripe";
import type { CustomerDetails } from "../../db/stores/provider-store.js";

/** What the customers need of storage (src/db/stores/provider-store.ts SqlProviderStore). */
export interface StripeCustomerStore {
  customerRef(environmentId: string, subjectId: string, provider: string): Promise<string | undefined>;
  saveCustomerRef(environmentId: string, subjectId: string, provider: string, ref: string, at: Date): Promise<string>;
  customerDetails(environmentId: string, subjectId: string): Promise<CustomerDetails | undefined>;
}

/** What Stripe is told about a subject. */
export function customerParams(d: CustomerDetails | undefined): Stripe.CustomerUpdateParams {
  const a = d?.address;
  return {
    name: d?.name ?? "",
    email: d?.email ?? "",
    address: a ? { line1: a.line1 ?? "", line2: a.line2 ?? "", city: a.city ?? "", postal_code: a.postalCode ?? "", state: a.state ?? "", country: a.country } : "",
  } as Stripe.CustomerUpdateParams;
}

export class StripeCustomers {
  /** The last details sent for each customer (by this process): a fingerprint of customerParams. */
  private readonly synced = new Map<string, string>();

  constructor(
    private readonly stripe: Stripe,
    private readonly store: StripeCustomerStore,
    private readonly environmentId: string,
  ) {}

  /** Brings the subject's customer, if it has one, up to date (none: nothing to do); its ID, or undefined. */
  async syncExisting(subjectId: string): Promise<string | undefined> {
    const ref = await this.store.customerRef(this.environmentId, subjectId, "stripe");
    if (ref === undefined) return undefined;
    await this.stripe.customers.update(ref, customerParams(await this.store.customerDetails(this.environmentId, subjectId)));
    return ref;
  }

  /** The subject's customer, created (and stored) on first need, its details brought up to date. */
  async forSubject(subjectId: string): Promise<string> {
    const details = customerParams(await this.store.customerDetails(this.environmentId, subjectId));
    const fingerprint = createHash("sha256").update(JSON.stringify(details)).digest("hex");
    let ref = await this.store.customerRef(this.environmentId, subjectId, "stripe");
    if (ref === undefined) {
      const created = await this.stripe.customers.create(
        { ...(details as Stripe.CustomerCreateParams), metadata: { environment_id: this.environmentId, subject_id: subjectId } },
        { idempotencyKey: `customer:${this.environmentId}:${subjectId}` },
      );
      ref = await this.store.saveCustomerRef(this.environmentId, subjectId, "stripe", created.id, new Date());
      if (ref === created.id) this.synced.set(ref, fingerprint);
    }
    if (this.synced.get(ref) !== fingerprint) {
      await this.stripe.customers.update(ref, details);
      if (this.synced.size > 10_000) this.synced.clear();
      this.synced.set(ref, fingerprint);
    }
    return ref;
  }
}
