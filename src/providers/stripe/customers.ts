/**
 * A Stripe customer per subject (DESIGN §16): created on first need with an idempotency key
 * derived from the environment and the subject (two servers asking at once get the same
 * customer), stored in provider_customers, and kept in sync with the subject's name, email and
 * billing address before each card setup (not before a charge: charges run inside dunning's
 * transaction, where no other storage call may wait): a sync is skipped when nothing changed
 * since this process last sent it, so a subject's change reaches Stripe by its next card setup.
 * A subject's update of its name, email or billing details syncs its customer at once too, when it
 * has one (syncExisting, wired in src/wiring/stripe.ts stripeCustomerSync). A stored customer
 * Stripe does not know under the environment's key (its key changed to another Stripe account, or
 * the customer was deleted at Stripe) is replaced by a new one at the subject's next card setup.
 */
import { createHash } from "node:crypto";
import Stripe from "stripe";
import type { CustomerDetails } from "../../db/stores/provider-store.js";

/** What the customers need of storage (src/db/stores/provider-store.ts SqlProviderStore). */
export interface StripeCustomerStore {
  customerRef(environmentId: string, subjectId: string, provider: string): Promise<string | undefined>;
  saveCustomerRef(environmentId: string, subjectId: string, provider: string, ref: string, at: Date): Promise<string>;
  /** Stores `ref` in place of `replaced` if that is still the one stored; answers the one stored. */
  replaceCustomerRef(environmentId: string, subjectId: string, provider: string, replaced: string, ref: string, at: Date): Promise<string>;
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

  /**
   * Brings the subject's customer, if it has one, up to date (none: nothing to do); its ID, or
   * undefined. A customer Stripe does not know under this key (another account's, or deleted) is
   * left for the next card setup to replace (forSubject): undefined.
   */
  async syncExisting(subjectId: string): Promise<string | undefined> {
    const ref = await this.store.customerRef(this.environmentId, subjectId, "stripe");
    if (ref === undefined) return undefined;
    try {
      await this.stripe.customers.update(ref, customerParams(await this.store.customerDetails(this.environmentId, subjectId)));
    } catch (err) {
      if (isMissingCustomer(err)) return undefined;
      throw err;
    }
    return ref;
  }

  /**
   * The subject's customer, created (and stored) on first need, its details brought up to date.
   * One stored that Stripe does not know under this key (404 resource_missing: the environment's
   * key now belongs to another Stripe account, or the customer was deleted) is replaced by a new
   * one in the key's account, so a card can be saved again.
   */
  async forSubject(subjectId: string): Promise<string> {
    const details = customerParams(await this.store.customerDetails(this.environmentId, subjectId));
    const fingerprint = createHash("sha256").update(JSON.stringify(details)).digest("hex");
    const ref = await this.store.customerRef(this.environmentId, subjectId, "stripe");
    if (ref === undefined) return this.create(subjectId, details, fingerprint, undefined);
    if (this.synced.get(ref) === fingerprint) return ref;
    try {
      await this.stripe.customers.update(ref, details);
    } catch (err) {
      if (!isMissingCustomer(err)) throw err;
      return this.create(subjectId, details, fingerprint, ref);
    }
    this.remember(ref, fingerprint);
    return ref;
  }

  /** Forgets that `ref` was synced: its next forSubject asks Stripe again (and replaces it if Stripe no longer knows it). */
  forget(ref: string): void {
    this.synced.delete(ref);
  }

  /**
   * A new customer for the subject, stored: the first (`replacing` undefined; the first stored
   * wins) or in place of `replacing`, a customer Stripe does not know under this key. The
   * idempotency key names the customer replaced, so Stripe never answers the first creation's
   * customer again, while two servers replacing the same one at once get the same new customer.
   */
  private async create(subjectId: string, details: Stripe.CustomerUpdateParams, fingerprint: string, replacing: string | undefined): Promise<string> {
    const created = await this.stripe.customers.create(
      { ...(details as Stripe.CustomerCreateParams), metadata: { environment_id: this.environmentId, subject_id: subjectId } },
      { idempotencyKey: `customer:${this.environmentId}:${subjectId}${replacing === undefined ? "" : `:replacing:${replacing}`}` },
    );
    const at = new Date();
    const ref =
      replacing === undefined
        ? await this.store.saveCustomerRef(this.environmentId, subjectId, "stripe", created.id, at)
        : await this.store.replaceCustomerRef(this.environmentId, subjectId, "stripe", replacing, created.id, at);
    if (ref === created.id) this.remember(ref, fingerprint);
    return ref;
  }

  private remember(ref: string, fingerprint: string): void {
    if (this.synced.size > 10_000) this.synced.clear();
    this.synced.set(ref, fingerprint);
  }
}

/** Stripe's answer for a customer it does not know under the key asked with (404 resource_missing). */
export function isMissingCustomer(err: unknown): boolean {
  return err instanceof Stripe.errors.StripeInvalidRequestError && err.code === "resource_missing" && err.statusCode === 404;
}
