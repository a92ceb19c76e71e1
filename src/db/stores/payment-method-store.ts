/** Storage of saved payment methods, and of which one a subject pays with. */
import type { EntityManager } from "typeorm";
import type { PaymentMethodStore, PaymentMethodWrites } from "../../billing/subscriptions/ports.js";
import type { PaymentMethod } from "../../billing/subscriptions/types.js";
import type { Entities, PaymentMethodRow } from "../entities/index.js";
import { fromDbTime } from "../raw.js";
import type { Sql } from "../sql.js";

/** Row → domain. */
export function paymentMethodFromRow(r: PaymentMethodRow): PaymentMethod {
  const pm: PaymentMethod = {
    id: r.id,
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    brand: r.brand,
    last4: r.last4,
    behavior: r.behavior as PaymentMethod["behavior"],
    createdAt: r.created_at,
  };
  // DESIGN §16: a card saved through a provider's own page (Stripe) keeps its ids there.
  if (r.provider && r.provider !== "test") Object.assign(pm, { provider: r.provider, providerRef: r.provider_ref ?? null, customerRef: r.customer_ref ?? null });
  return pm;
}

/** Domain → row. */
export function paymentMethodToRow(pm: PaymentMethod): PaymentMethodRow {
  return {
    id: pm.id,
    environment_id: pm.environmentId,
    subject_id: pm.subjectId,
    brand: pm.brand,
    last4: pm.last4,
    behavior: pm.behavior,
    created_at: pm.createdAt,
    ...(pm.provider && pm.provider !== "test" ? { provider: pm.provider, provider_ref: pm.providerRef ?? null, customer_ref: pm.customerRef ?? null } : {}),
  };
}

/** The payment-method writes of a billing transaction on `em`. */
export function paymentMethodWrites(em: EntityManager, E: Entities): PaymentMethodWrites {
  return {
    insertPaymentMethod: async (pm) => {
      await em.insert(E.PaymentMethod, paymentMethodToRow(pm));
    },
    setSubjectPaymentMethod: async (subjectId, paymentMethodId, environmentId) => {
      await em.update(E.Subject, { environment_id: environmentId, id: subjectId }, { payment_method_id: paymentMethodId });
    },
  };
}

export class SqlPaymentMethodStore implements PaymentMethodStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async get(id: string, environmentId: string): Promise<PaymentMethod | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.PaymentMethod, { environment_id: environmentId, id }));
    return r ? paymentMethodFromRow(r) : undefined;
  }

  async ofSubjects(subjectIds: string[], environmentId: string): Promise<Map<string, PaymentMethod>> {
    const out = new Map<string, PaymentMethod>();
    if (subjectIds.length === 0) return out;
    const rows: {
      subject_id: string;
      id: string;
      environment_id: string;
      brand: string;
      last4: string;
      behavior: string;
      created_at: unknown;
      provider: string;
      provider_ref: string | null;
      customer_ref: string | null;
    }[] = await this.sql.run((em) =>
      em.query(
        `SELECT s.id AS subject_id, p.id, p.environment_id, p.brand, p.last4, p.behavior, p.created_at, p.provider, p.provider_ref, p.customer_ref FROM subjects s JOIN payment_methods p ON p.environment_id = s.environment_id AND p.id = s.payment_method_id WHERE s.environment_id = ? AND s.id IN (${subjectIds.map(() => "?").join(", ")})`,
        [environmentId, ...subjectIds],
      ),
    );
    for (const r of rows) {
      out.set(r.subject_id, paymentMethodFromRow({ ...r, created_at: fromDbTime(r.created_at) }));
    }
    return out;
  }
}
