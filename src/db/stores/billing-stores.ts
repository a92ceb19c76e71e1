/**
 * Billing's storage on SQL: its stores, one per aggregate, and the transaction that spans them
 * (each aggregate's writes on one entity manager).
 */
import { providerEventWrites } from "./provider-store.js";
import { AbortedError } from "../../billing/errors.js";
import type { EventEncoder } from "../../billing/events/types.js";
import { outsideChangeScope } from "../change-scope.js";
import type { BillingDirectory, BillingStores, BillingTx } from "../../billing/subscriptions/ports.js";
import type { BillingSubject, SubjectProfile } from "../../billing/subscriptions/types.js";
import type { EnvironmentMode } from "../../billing/tenancy.js";
import type { Entities } from "../entities/index.js";
import { isTransient } from "../errors.js";
import { findSubjectRow } from "../raw.js";
import type { Sql } from "../sql.js";
import { bookingWrites } from "./booking-store.js";
import { couponWrites } from "./coupon-store.js";
import { SqlCheckoutStore, checkoutWrites } from "./checkout-store.js";
import { reinstateWrites } from "./credit-reinstate.js";
import { creditNoteWrites } from "./credit-note-store.js";
import { creditWrites } from "./credit-store.js";
import { dunningWrites } from "./dunning-store.js";
import { carryReads, carryWrites } from "./carry-store.js";
import { SqlTestClockStore } from "./clock-store.js";
import { SqlInvoiceStore, invoiceWrites } from "./invoice-store.js";
import { SqlPaymentMethodStore, paymentMethodWrites } from "./payment-method-store.js";
import { SqlPortalSessionStore } from "./portal-session-store.js";
import { SqlSubscriptionStore, subscriptionWrites } from "./subscription-store.js";
import { SqlTimelineStore, timelineWrites } from "./timeline-store.js";
import { eventWrites } from "./outbox.js";

/** Subjects and environments as billing reads them. */
export class SqlBillingDirectory implements BillingDirectory {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async subject(environmentId: string, key: string): Promise<BillingSubject | undefined> {
    const r = await findSubjectRow<{ id: string; environment_id: string; test_clock_id: string | null; payment_method_id: string | null }>(
      this.sql,
      environmentId,
      key,
      "id, environment_id, test_clock_id, payment_method_id",
    );
    return r ? { id: r.id, environmentId: r.environment_id, testClockId: r.test_clock_id, paymentMethodId: r.payment_method_id } : undefined;
  }

  async profile(environmentId: string, subjectId: string): Promise<SubjectProfile | undefined> {
    const [r] = await this.sql.query<{ name: string | null; email: string | null }[]>("SELECT name, email FROM subjects WHERE environment_id = ? AND id = ? AND deleted_at IS NULL LIMIT 1", [
      environmentId,
      subjectId,
    ]);
    return r ? { name: r.name, email: r.email } : undefined;
  }

  async environmentMode(environmentId: string): Promise<EnvironmentMode | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Environment, { id: environmentId }));
    return r ? (r.mode as EnvironmentMode) : undefined;
  }

  async invoiceGraceSeconds(environmentId: string): Promise<number> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Environment, { id: environmentId }));
    return Number(r?.invoice_grace_seconds ?? 3600);
  }
}

/** `encode` freezes each event's resource as wire JSON; `now` stamps events (real time). */
export function sqlBillingStores(sql: Sql, entities: Entities, encode: EventEncoder, now: () => Date = () => new Date()): BillingStores {
  return {
    subscriptions: new SqlSubscriptionStore(sql, entities),
    invoices: new SqlInvoiceStore(sql, entities),
    paymentMethods: new SqlPaymentMethodStore(sql, entities),
    checkouts: new SqlCheckoutStore(sql, entities),
    portals: new SqlPortalSessionStore(sql, entities),
    timelines: new SqlTimelineStore(sql, entities),
    clocks: new SqlTestClockStore(sql, entities),
    directory: new SqlBillingDirectory(sql, entities),
    carried: carryReads(sql, entities),
    asScheduler: outsideChangeScope,
    transaction<T>(fn: (tx: BillingTx) => Promise<T>): Promise<T> {
      const run = sql.transaction((em) =>
        fn({
          ...subscriptionWrites(em, sql, entities),
          ...invoiceWrites(em, entities),
          ...checkoutWrites(em, sql, entities),
          ...paymentMethodWrites(em, entities),
          ...timelineWrites(em, sql, entities),
          ...eventWrites(em, encode, now, sql.dialect),
          credits: { ...creditWrites(em, sql, entities), ...reinstateWrites(em, sql, entities) },
          booking: bookingWrites(em, sql),
          coupons: couponWrites(em, sql, entities),
          dunning: dunningWrites(em, entities),
          carries: carryWrites(em, entities),
          providerEvents: providerEventWrites(em, entities),
          creditNotes: creditNoteWrites(em, sql, entities),
        }),
      );
      return run.catch((err: unknown) => {
        if (isTransient(err)) throw new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one (deadlock or lock wait timeout); try again");
        throw err;
      });
    },
  };
}
