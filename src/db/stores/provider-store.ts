/**
 * Storage of payment providers' own records (DESIGN §16; migration 30): the subject's customer at
 * a provider (Stripe `cus_…`, one per subject, the first stored wins; replaced by a new one when
 * the provider no longer knows it) and the provider events processed (their writes in a billing
 * transaction: a repeat is told apart by the primary key).
 */
import type { EntityManager } from "typeorm";
import type { ProviderEventWrites } from "../../billing/payments/event-writes.js";
import type { Entities } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import type { Sql } from "../sql.js";

/** What a provider's customer is made of: the subject's name, email and billing address. */
export interface CustomerDetails {
  name: string | null;
  email: string | null;
  address: { line1: string | null; line2: string | null; city: string | null; postalCode: string | null; state: string | null; country: string } | null;
}

/** The provider-event writes of a billing transaction on `em`. */
export function providerEventWrites(em: EntityManager, E: Entities): ProviderEventWrites {
  return {
    async recordProviderEvent(environmentId, event, at) {
      try {
        await em.insert(E.ProviderEvent, { environment_id: environmentId, provider: event.provider, event_id: event.eventId, event_type: event.eventType.slice(0, 100), received_at: at });
        return true;
      } catch (err) {
        // A unique-key violation leaves the transaction usable on both stores: a repeat, nothing to do.
        if (isUniqueViolation(err)) return false;
        throw err;
      }
    },
    async providerEventRecorded(environmentId, event) {
      return (await em.countBy(E.ProviderEvent, { environment_id: environmentId, provider: event.provider, event_id: event.eventId })) > 0;
    },
  };
}

export class SqlProviderStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  /** The subject's customer at `provider`, if one was stored. */
  async customerRef(environmentId: string, subjectId: string, provider: string): Promise<string | undefined> {
    const row = await this.sql.run((em) => em.findOneBy(this.entities.ProviderCustomer, { environment_id: environmentId, subject_id: subjectId, provider }));
    return row?.customer_ref;
  }

  /** Stores the subject's customer unless one is stored already; answers the one stored (the first wins). */
  async saveCustomerRef(environmentId: string, subjectId: string, provider: string, ref: string, at: Date): Promise<string> {
    try {
      // Not a change of the calling request's own (Sql.write): a retry finds the one stored.
      await this.sql.run((em) => em.insert(this.entities.ProviderCustomer, { environment_id: environmentId, subject_id: subjectId, provider, customer_ref: ref, created_at: at }));
      return ref;
    } catch (err) {
      const stored = await this.customerRef(environmentId, subjectId, provider);
      if (stored !== undefined) return stored;
      throw err;
    }
  }

  /**
   * Stores `ref` in place of `replaced` (a customer the provider no longer knows: the environment's
   * Stripe key moved to another account) if that is still the one stored; answers the one stored
   * after (a concurrent replacement's, if it came first).
   */
  async replaceCustomerRef(environmentId: string, subjectId: string, provider: string, replaced: string, ref: string, at: Date): Promise<string> {
    await this.sql.run((em) =>
      em.update(this.entities.ProviderCustomer, { environment_id: environmentId, subject_id: subjectId, provider, customer_ref: replaced }, { customer_ref: ref, created_at: at }),
    );
    return (await this.customerRef(environmentId, subjectId, provider)) ?? this.saveCustomerRef(environmentId, subjectId, provider, ref, at);
  }

  /** The provider's reference an invoice was paid with (its payment_state), if stored. */
  async paymentReference(environmentId: string, invoiceId: string): Promise<string | undefined> {
    const row = await this.sql.run((em) => em.findOneBy(this.entities.Invoice, { environment_id: environmentId, id: invoiceId }));
    return row?.payment_state?.reference ?? undefined;
  }

  /** The subject an invoice bills. */
  async invoiceSubject(environmentId: string, invoiceId: string): Promise<string | undefined> {
    const row = await this.sql.run((em) => em.findOneBy(this.entities.Invoice, { environment_id: environmentId, id: invoiceId }));
    return row?.subject_id;
  }

  /** The subject's name, email and billing address (billing details first), for the provider's customer. */
  async customerDetails(environmentId: string, subjectId: string): Promise<CustomerDetails | undefined> {
    const s = await this.sql.run((em) => em.findOneBy(this.entities.Subject, { environment_id: environmentId, id: subjectId }));
    if (!s) return undefined;
    const bd = s.billing_details ?? null;
    return { name: bd?.legalName ?? s.name, email: bd?.email ?? s.email, address: bd?.address ?? null };
  }
}
