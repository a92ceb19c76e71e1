/** Storage of subscriptions, invoices, payment methods, checkouts and test clocks. */
import type { EntityManager } from "typeorm";
import { In } from "typeorm";
import { AbortedError, AlreadyExistsError } from "../../billing/errors.js";
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { EnvironmentMode } from "../../billing/tenancy.js";
import type {
  BillingFailure,
  BillingStore,
  BillingSubject,
  BillingTx,
  CheckoutSession,
  CheckoutStatus,
  Invoice,
  InvoiceStatus,
  PaymentMethod,
  Subscription,
  SubscriptionStatus,
  TestClock,
  Timeline,
  TimelineItem,
  TimelineStatus,
} from "../../billing/subscriptions/types.js";
import type { CheckoutRow, Entities, InvoiceLineRow, InvoiceRow, PaymentMethodRow, SubscriptionRow, TestClockRow, TimelineItemRow, TimelineRow } from "../entities/index.js";
import { isTransient, isUniqueViolation } from "../errors.js";
import { dbTime, findSubjectRow, fromDbTime } from "../raw.js";
import { type Sql, chunks } from "../sql.js";

function toSubscription(r: SubscriptionRow): Subscription {
  return {
    id: r.id,
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    rateCardId: r.rate_card_id,
    status: r.status as SubscriptionStatus,
    cancelsAtEndOfCycle: Boolean(r.cancels_at_end_of_cycle),
    anchor: r.anchor,
    cycleIndex: Number(r.cycle_index),
    periodStart: r.period_start,
    periodEnd: r.period_end,
    usageSince: r.usage_since,
    fixedRateQuantities: r.fixed_rate_quantities ?? {},
    rateMultipliers: r.rate_multipliers ?? {},
    metadata: r.metadata ?? {},
    testClockId: r.test_clock_id,
    timelineId: r.timeline_id,
    cancelledAt: r.cancelled_at,
    cancelReason: r.cancel_reason,
    billingFailure:
      r.billing_error !== null && r.billing_error !== undefined
        ? { message: r.billing_error, attempts: Number(r.billing_attempts), failedAt: r.billing_failed_at as Date, retryAt: r.billing_retry_at as Date }
        : null,
    createdAt: r.created_at,
  };
}

function subscriptionRow(s: Subscription, at: Date): SubscriptionRow {
  return {
    id: s.id,
    environment_id: s.environmentId,
    subject_id: s.subjectId,
    rate_card_id: s.rateCardId,
    status: s.status,
    cancels_at_end_of_cycle: s.cancelsAtEndOfCycle,
    anchor: s.anchor,
    cycle_index: s.cycleIndex,
    period_start: s.periodStart,
    period_end: s.periodEnd,
    usage_since: s.usageSince,
    fixed_rate_quantities: s.fixedRateQuantities,
    rate_multipliers: s.rateMultipliers,
    metadata: s.metadata,
    test_clock_id: s.testClockId,
    timeline_id: s.timelineId,
    cancelled_at: s.cancelledAt,
    cancel_reason: s.cancelReason,
    billing_error: s.billingFailure?.message ?? null,
    billing_attempts: s.billingFailure?.attempts ?? 0,
    billing_failed_at: s.billingFailure?.failedAt ?? null,
    billing_retry_at: s.billingFailure?.retryAt ?? null,
    created_at: s.createdAt,
    updated_at: at,
  };
}

function toInvoice(r: InvoiceRow, lines: InvoiceLineRow[]): Invoice {
  return {
    id: r.id,
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    subscriptionId: r.subscription_id,
    periodKey: r.period_key,
    status: r.status as InvoiceStatus,
    currency: r.currency,
    total: r.total,
    lines: lines.map((l) => ({ description: l.description, quantity: l.quantity, unitAmount: l.unit_amount, amount: l.amount })),
    hostedToken: r.hosted_token,
    periodStart: r.period_start,
    periodEnd: r.period_end,
    createdAt: r.created_at,
  };
}

function toCheckout(r: CheckoutRow): CheckoutSession {
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

function toPaymentMethod(r: PaymentMethodRow): PaymentMethod {
  return { id: r.id, environmentId: r.environment_id, subjectId: r.subject_id, brand: r.brand, last4: r.last4, behavior: r.behavior as PaymentMethod["behavior"], createdAt: r.created_at };
}

function toTimeline(r: TimelineRow): Timeline {
  return {
    id: r.id,
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    rateCardId: r.rate_card_id,
    subscriptionId: r.subscription_id,
    status: r.status as TimelineStatus,
    effectiveAt: r.effective_at,
    nextTransitionAt: r.next_transition_at,
    testClockId: r.test_clock_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toItem(r: TimelineItemRow): TimelineItem {
  return {
    id: r.id,
    timelineId: r.timeline_id,
    environmentId: r.environment_id,
    start: r.period_start,
    end: r.period_end,
    rateCardId: r.rate_card_id,
    fixedRateQuantities: r.fixed_rate_quantities ?? {},
    rateMultipliers: r.rate_multipliers ?? {},
    createdAt: r.created_at,
  };
}

function toClock(r: TestClockRow): TestClock {
  return { id: r.id, environmentId: r.environment_id, name: r.name, frozenTime: r.frozen_time, createdAt: r.created_at };
}

export class SqlBillingStore implements BillingStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  private lock(): { mode: "pessimistic_write" } | undefined {
    return this.sql.dialect === "mysql" ? { mode: "pessimistic_write" } : undefined;
  }

  private async invoicesWithLines(em: EntityManager, rows: InvoiceRow[]): Promise<Invoice[]> {
    if (rows.length === 0) return [];
    const lines = await em.find(this.entities.InvoiceLine, { where: { invoice_id: In(rows.map((r) => r.id)) }, order: { invoice_id: "ASC", position: "ASC" } });
    return rows.map((r) => toInvoice(r, lines.filter((l) => l.invoice_id === r.id)));
  }

  /**
   * `fn` in one transaction. A deadlock or lock wait timeout (rolled back in full) is an
   * AbortedError, which callers may retry.
   */
  transaction<T>(fn: (tx: BillingTx) => Promise<T>): Promise<T> {
    return this.transactionOf(fn).catch((err: unknown) => {
      if (isTransient(err)) throw new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one (deadlock or lock wait timeout); try again");
      throw err;
    });
  }

  private transactionOf<T>(fn: (tx: BillingTx) => Promise<T>): Promise<T> {
    const E = this.entities;
    return this.sql.transaction((em) => {
      const tx: BillingTx = {
        lockSubscription: async (environmentId, id) => {
          const r = await em.findOne(E.Subscription, { where: { environment_id: environmentId, id }, lock: this.lock() });
          return r ? toSubscription(r) : undefined;
        },
        lockSubscriptions: async (ids) => {
          if (ids.length === 0) return [];
          const qb = em.createQueryBuilder(E.Subscription, "s").where("s.id IN (:...ids)", { ids });
          if (this.sql.dialect === "mysql") qb.setLock("pessimistic_write").setOnLocked("skip_locked");
          return (await qb.getMany()).map(toSubscription);
        },
        insertSubscription: async (s) => {
          await em.insert(E.Subscription, subscriptionRow(s, s.createdAt));
        },
        // Plain SQL: a cycle close updates every due subscription.
        updateSubscription: async (s) => {
          await em.query(
            "UPDATE subscriptions SET rate_card_id = ?, status = ?, cancels_at_end_of_cycle = ?, cycle_index = ?, period_start = ?, period_end = ?, usage_since = ?, fixed_rate_quantities = ?, rate_multipliers = ?, metadata = ?, cancelled_at = ?, cancel_reason = ?, billing_error = ?, billing_attempts = ?, billing_failed_at = ?, billing_retry_at = ?, updated_at = ? WHERE id = ? AND environment_id = ?",
            [
              s.rateCardId,
              s.status,
              s.cancelsAtEndOfCycle ? 1 : 0,
              s.cycleIndex,
              dbTime(s.periodStart),
              dbTime(s.periodEnd),
              dbTime(s.usageSince),
              JSON.stringify(s.fixedRateQuantities),
              JSON.stringify(s.rateMultipliers),
              JSON.stringify(s.metadata),
              s.cancelledAt ? dbTime(s.cancelledAt) : null,
              s.cancelReason,
              s.billingFailure?.message ?? null,
              s.billingFailure?.attempts ?? 0,
              s.billingFailure ? dbTime(s.billingFailure.failedAt) : null,
              s.billingFailure ? dbTime(s.billingFailure.retryAt) : null,
              dbTime(new Date()),
              s.id,
              s.environmentId,
            ],
          );
        },
        insertInvoices: async (list) => {
          if (list.length === 0) return;
          try {
            for (const part of chunks(list)) {
              await em.insert(
                E.Invoice,
                part.map((i) => ({
                  id: i.id,
                  environment_id: i.environmentId,
                  subject_id: i.subjectId,
                  subscription_id: i.subscriptionId,
                  period_key: i.periodKey,
                  status: i.status,
                  currency: i.currency,
                  total: i.total,
                  hosted_token: i.hostedToken,
                  period_start: i.periodStart,
                  period_end: i.periodEnd,
                  created_at: i.createdAt,
                  updated_at: i.createdAt,
                })),
              );
            }
          } catch (err) {
            if (isUniqueViolation(err)) {
              throw new AlreadyExistsError("INVOICE_EXISTS", `${list.length === 1 ? `subscription ${list[0]?.subscriptionId}` : "one of these subscriptions"} already has an invoice for its period`);
            }
            throw err;
          }
          const lines = list.flatMap((i) =>
            i.lines.map((l, position) => ({ invoice_id: i.id, position, description: l.description.slice(0, 1000), quantity: l.quantity, unit_amount: l.unitAmount, amount: l.amount })),
          );
          for (const part of chunks(lines)) await em.insert(E.InvoiceLine, part);
        },
        insertInvoice: (i) => tx.insertInvoices([i]),
        lockCheckout: async (token) => {
          const r = await em.findOne(E.Checkout, { where: { token }, lock: this.lock() });
          return r ? toCheckout(r) : undefined;
        },
        updateCheckoutStatus: async (id, status) => {
          await em.update(E.Checkout, { id }, { status });
        },
        insertPaymentMethod: async (pm) => {
          await em.insert(E.PaymentMethod, {
            id: pm.id,
            environment_id: pm.environmentId,
            subject_id: pm.subjectId,
            brand: pm.brand,
            last4: pm.last4,
            behavior: pm.behavior,
            created_at: pm.createdAt,
          });
        },
        lockTimeline: async (environmentId, id) => {
          const r = await em.findOne(E.Timeline, { where: { environment_id: environmentId, id }, lock: this.lock() });
          return r ? toTimeline(r) : undefined;
        },
        updateTimeline: async (t) => {
          await em.update(
            E.Timeline,
            { id: t.id },
            { subscription_id: t.subscriptionId, status: t.status, effective_at: t.effectiveAt, next_transition_at: t.nextTransitionAt, updated_at: t.updatedAt },
          );
        },
        insertTimelineItems: async (items) => {
          if (items.length === 0) return;
          await em.insert(
            E.TimelineItem,
            items.map((i) => ({
              id: i.id,
              timeline_id: i.timelineId,
              environment_id: i.environmentId,
              period_start: i.start,
              period_end: i.end,
              rate_card_id: i.rateCardId,
              fixed_rate_quantities: i.fixedRateQuantities,
              rate_multipliers: i.rateMultipliers,
              created_at: i.createdAt,
            })),
          );
        },
        setSubjectPaymentMethod: async (subjectId, paymentMethodId) => {
          await em.update(E.Subject, { id: subjectId }, { payment_method_id: paymentMethodId });
        },
      };
      return fn(tx);
    });
  }

  async subject(environmentId: string, key: string): Promise<BillingSubject | undefined> {
    const r = await findSubjectRow<{ id: string; environment_id: string; test_clock_id: string | null; payment_method_id: string | null }>(
      this.sql,
      environmentId,
      key,
      "id, environment_id, test_clock_id, payment_method_id",
    );
    return r ? { id: r.id, environmentId: r.environment_id, testClockId: r.test_clock_id, paymentMethodId: r.payment_method_id } : undefined;
  }

  async subscription(environmentId: string, id: string): Promise<Subscription | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Subscription, { environment_id: environmentId, id }));
    return r ? toSubscription(r) : undefined;
  }

  async listSubscriptions(environmentId: string, filter: { subjectId?: string; rateCardId?: string }, page: Page): Promise<PageResult<Subscription>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.Subscription, {
        where: { environment_id: environmentId, ...(filter.subjectId ? { subject_id: filter.subjectId } : {}), ...(filter.rateCardId ? { rate_card_id: filter.rateCardId } : {}) },
        order: { seq: "ASC" },
        take: page.limit + 1,
        skip: page.offset,
      }),
    );
    return toPageResult(rows.map(toSubscription), page);
  }

  async activeSubscriptions(environmentId: string, subjectId: string): Promise<Subscription[]> {
    const rows = await this.sql.run((em) => em.find(this.entities.Subscription, { where: { environment_id: environmentId, subject_id: subjectId, status: "active" }, order: { seq: "ASC" } }));
    return rows.map(toSubscription);
  }

  async dueSubscriptions(now: Date, clockId: string | null, limit: number, strict: boolean, realNow: Date): Promise<Subscription[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Subscription, "s")
        .where(`s.status = 'active' AND s.period_end ${strict ? "<" : "<="} :now`, { now: dbTime(now) })
        .andWhere(clockId === null ? "s.test_clock_id IS NULL" : "s.test_clock_id = :clock", { clock: clockId })
        .andWhere("(s.billing_retry_at IS NULL OR s.billing_retry_at <= :realNow)", { realNow: dbTime(realNow) })
        .orderBy("s.period_end", "ASC")
        .limit(limit)
        .getMany(),
    );
    return rows.map(toSubscription);
  }

  async setBillingFailure(s: Subscription, f: BillingFailure): Promise<boolean> {
    const res = await this.sql.run((em) =>
      em.update(
        this.entities.Subscription,
        { id: s.id, environment_id: s.environmentId, status: "active", cycle_index: s.cycleIndex, usage_since: s.usageSince },
        { billing_error: f.message.slice(0, 500), billing_attempts: f.attempts, billing_failed_at: f.failedAt, billing_retry_at: f.retryAt },
      ),
    );
    return (res.affected ?? 0) > 0;
  }

  async invoice(environmentId: string, id: string): Promise<Invoice | undefined> {
    return this.sql.run(async (em) => {
      const r = await em.findOneBy(this.entities.Invoice, { environment_id: environmentId, id });
      return r ? (await this.invoicesWithLines(em, [r]))[0] : undefined;
    });
  }

  async invoiceByToken(token: string): Promise<Invoice | undefined> {
    return this.sql.run(async (em) => {
      const r = await em.findOneBy(this.entities.Invoice, { hosted_token: token });
      return r ? (await this.invoicesWithLines(em, [r]))[0] : undefined;
    });
  }

  async listInvoices(environmentId: string, subjectId: string, page: Page): Promise<PageResult<Invoice>> {
    return this.sql.run(async (em) => {
      const rows = await em.find(this.entities.Invoice, { where: { environment_id: environmentId, subject_id: subjectId }, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset });
      const result = toPageResult(rows, page);
      return { items: await this.invoicesWithLines(em, result.items), hasMore: result.hasMore };
    });
  }

  async setInvoiceStatus(id: string, from: InvoiceStatus, to: InvoiceStatus, at: Date): Promise<boolean> {
    const res = await this.sql.run((em) => em.update(this.entities.Invoice, { id, status: from }, { status: to, updated_at: at }));
    return (res.affected ?? 0) > 0;
  }

  async paymentMethod(id: string): Promise<PaymentMethod | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.PaymentMethod, { id }));
    return r ? toPaymentMethod(r) : undefined;
  }

  async paymentMethodsOf(subjectIds: string[]): Promise<Map<string, PaymentMethod>> {
    const out = new Map<string, PaymentMethod>();
    if (subjectIds.length === 0) return out;
    const rows: { subject_id: string; id: string; environment_id: string; brand: string; last4: string; behavior: string; created_at: unknown }[] = await this.sql.run((em) =>
      em.query(
        `SELECT s.id AS subject_id, p.id, p.environment_id, p.brand, p.last4, p.behavior, p.created_at FROM subjects s JOIN payment_methods p ON p.id = s.payment_method_id WHERE s.id IN (${subjectIds.map(() => "?").join(", ")})`,
        subjectIds,
      ),
    );
    for (const r of rows) {
      out.set(r.subject_id, toPaymentMethod({ ...r, created_at: fromDbTime(r.created_at) }));
    }
    return out;
  }

  async setInvoicesStatus(ids: string[], from: InvoiceStatus, to: InvoiceStatus, at: Date): Promise<void> {
    for (const part of chunks(ids)) {
      await this.sql.run((em) => em.createQueryBuilder().update(this.entities.Invoice).set({ status: to, updated_at: at }).where("id IN (:...ids) AND status = :from", { ids: part, from }).execute());
    }
  }

  async insertCheckout(c: CheckoutSession): Promise<void> {
    await this.sql.run((em) =>
      em.insert(this.entities.Checkout, {
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
      }),
    );
  }

  async checkout(token: string): Promise<CheckoutSession | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Checkout, { token }));
    return r ? toCheckout(r) : undefined;
  }

  async insertTimeline(t: Timeline): Promise<void> {
    await this.sql.run((em) =>
      em.insert(this.entities.Timeline, {
        id: t.id,
        environment_id: t.environmentId,
        subject_id: t.subjectId,
        rate_card_id: t.rateCardId,
        subscription_id: t.subscriptionId,
        status: t.status,
        effective_at: t.effectiveAt,
        next_transition_at: t.nextTransitionAt,
        test_clock_id: t.testClockId,
        created_at: t.createdAt,
        updated_at: t.updatedAt,
      }),
    );
  }

  async timeline(environmentId: string, id: string): Promise<Timeline | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Timeline, { environment_id: environmentId, id }));
    return r ? toTimeline(r) : undefined;
  }

  async listTimelines(environmentId: string, page: Page): Promise<PageResult<Timeline>> {
    const rows = await this.sql.run((em) => em.find(this.entities.Timeline, { where: { environment_id: environmentId }, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset }));
    return toPageResult(rows.map(toTimeline), page);
  }

  async timelineItems(timelineId: string): Promise<TimelineItem[]> {
    const rows = await this.sql.run((em) => em.find(this.entities.TimelineItem, { where: { timeline_id: timelineId }, order: { period_start: "ASC", seq: "ASC" } }));
    return rows.map(toItem);
  }

  async dueTimelines(now: Date, clockId: string | null, limit: number): Promise<Timeline[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Timeline, "t")
        .where("t.status IN ('pending', 'active') AND t.next_transition_at IS NOT NULL AND t.next_transition_at <= :now", { now: dbTime(now) })
        .andWhere(clockId === null ? "t.test_clock_id IS NULL" : "t.test_clock_id = :clock", { clock: clockId })
        .orderBy("t.next_transition_at", "ASC")
        .limit(limit)
        .getMany(),
    );
    return rows.map(toTimeline);
  }

  async insertClock(c: TestClock): Promise<void> {
    await this.sql.run((em) => em.insert(this.entities.TestClock, { id: c.id, environment_id: c.environmentId, name: c.name, frozen_time: c.frozenTime, created_at: c.createdAt }));
  }

  async clock(environmentId: string, id: string): Promise<TestClock | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.TestClock, { environment_id: environmentId, id }));
    return r ? toClock(r) : undefined;
  }

  async environmentMode(environmentId: string): Promise<EnvironmentMode | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Environment, { id: environmentId }));
    return r ? (r.mode as EnvironmentMode) : undefined;
  }

  async advanceClock(environmentId: string, id: string, to: Date): Promise<boolean> {
    const res = await this.sql.run((em) =>
      em
        .createQueryBuilder()
        .update(this.entities.TestClock)
        .set({ frozen_time: to })
        .where("environment_id = :env AND id = :id AND frozen_time <= :to", { env: environmentId, id, to: dbTime(to) })
        .execute(),
    );
    return (res.affected ?? 0) > 0;
  }
}
