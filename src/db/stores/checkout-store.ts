/** Storage of hosted checkout sessions. */
import type { EntityManager } from "typeorm";
import type { CheckoutStore, CheckoutWrites } from "../../billing/subscriptions/ports.js";
import type { CheckoutSession, CheckoutStatus } from "../../billing/subscriptions/types.js";
import type { CheckoutRow, Entities } from "../entities/index.js";
import { dbTime } from "../raw.js";
import { type Sql, rowLock } from "../sql.js";

/** Row → domain. */
export function checkoutFromRow(r: CheckoutRow): CheckoutSession {
  return {
    id: r.id,
    environmentId: r.environment_id,
    token: r.token,
    subjectId: r.subject_id,
    kind: r.kind as CheckoutSession["kind"],
    payload: r.payload,
    successUrl: r.success_url,
    cancelledUrl: r.cancelled_url,
    status: r.status as CheckoutStatus,
    amountDue: r.amount_due,
    currency: r.currency,
    description: r.description,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
  };
}

/** Domain → row. */
export function checkoutToRow(c: CheckoutSession): CheckoutRow {
  return {
    id: c.id,
    environment_id: c.environmentId,
    token: c.token,
    subject_id: c.subjectId,
    kind: c.kind,
    payload: c.payload as never,
    success_url: c.successUrl,
    cancelled_url: c.cancelledUrl,
    status: c.status,
    amount_due: c.amountDue,
    currency: c.currency,
    description: c.description.slice(0, 500),
    expires_at: c.expiresAt,
    created_at: c.createdAt,
  };
}

/** The checkout writes of a billing transaction on `em`. */
export function checkoutWrites(em: EntityManager, sql: Sql, E: Entities): CheckoutWrites {
  return {
    lockCheckout: async (token) => {
      const r = await em.findOne(E.Checkout, { where: { token }, lock: rowLock(sql.dialect) });
      return r ? checkoutFromRow(r) : undefined;
    },
    updateCheckoutStatus: async (id, status, environmentId, payload) => {
      await em.update(E.Checkout, { environment_id: environmentId, id }, payload ? { status, payload: payload as never } : { status });
    },
  };
}

export class SqlCheckoutStore implements CheckoutStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(c: CheckoutSession): Promise<void> {
    await this.sql.write((em) => em.insert(this.entities.Checkout, { ...checkoutToRow(c), payload: c.payload as never }));
  }

  async get(token: string): Promise<CheckoutSession | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Checkout, { token }));
    return r ? checkoutFromRow(r) : undefined;
  }

  /**
   * Open checkouts whose expiry passed by `before`, of subjects on real time (a test clock's
   * expire on its time, when read), oldest expiry first, at most `limit`: across environments,
   * for the scheduler's sweep (checkout-expiry.ts).
   */
  async expiredOpen(before: Date, limit: number): Promise<CheckoutSession[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Checkout, "c")
        .where("c.status = 'open' AND c.expires_at <= :before", { before: dbTime(before) })
        .andWhere("NOT EXISTS (SELECT 1 FROM subjects s WHERE s.environment_id = c.environment_id AND s.id = c.subject_id AND s.test_clock_id IS NOT NULL)")
        .orderBy("c.expires_at", "ASC")
        .limit(Math.max(1, Math.floor(limit)))
        .getMany(),
    );
    return rows.map(checkoutFromRow);
  }
}
