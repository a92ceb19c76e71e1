/** Storage of subscriptions: reads, the due list of the scheduler, and the writes of a billing transaction. */
import { In, IsNull, Not, type EntityManager } from "typeorm";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { SubscriptionStore, SubscriptionWrites } from "../../billing/subscriptions/ports.js";
import type { BillingFailure, Subscription, SubscriptionStatus } from "../../billing/subscriptions/types.js";
import type { Entities, SubscriptionRow } from "../entities/index.js";
import { anchorsOfIso, dbTime, findSubjectRow, isoAnchors, mayBeSubjectId } from "../raw.js";
import { STATEMENT_BYTES, type Sql, type Statement, groupBySize, paramsBytes, rowLock } from "../sql.js";

/** Row → domain. */
export function subscriptionFromRow(r: SubscriptionRow): Subscription {
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
    usageCheck: r.usage_check ?? null,
    pausedAt: r.paused_at ?? null,
    resumesAt: r.resumes_at ?? null,
    cycleEpoch: Number(r.cycle_epoch ?? 0),
    prorationCredits: r.proration_credits ?? [],
    commitment: r.commitment ?? null,
    chargedTerms: r.charged_terms ?? null,
    firstSeen: r.first_seen ? anchorsOfIso(r.first_seen) : null,
    usageAdjustments: r.usage_adjustments ?? null,
    createdAt: r.created_at,
  };
}

/** Domain → row, as last updated at `at`. */
export function subscriptionToRow(s: Subscription, at: Date): SubscriptionRow {
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
    usage_check: s.usageCheck,
    paused_at: s.pausedAt,
    resumes_at: s.resumesAt,
    cycle_epoch: s.cycleEpoch,
    proration_credits: s.prorationCredits?.length ? s.prorationCredits : null,
    commitment: s.commitment ?? null,
    charged_terms: s.chargedTerms ?? null,
    first_seen: s.firstSeen ? isoAnchors(s.firstSeen) : null,
    usage_adjustments: s.usageAdjustments?.length ? s.usageAdjustments : null,
    created_at: s.createdAt,
    updated_at: at,
  };
}

const UPDATE_SUBSCRIPTION =
  "UPDATE subscriptions SET rate_card_id = ?, status = ?, cancels_at_end_of_cycle = ?, cycle_index = ?, period_start = ?, period_end = ?, usage_since = ?, fixed_rate_quantities = ?, rate_multipliers = ?, metadata = ?, cancelled_at = ?, cancel_reason = ?, billing_error = ?, billing_attempts = ?, billing_failed_at = ?, billing_retry_at = ?, usage_check = ?, paused_at = ?, resumes_at = ?, cycle_epoch = ?, proration_credits = ?, commitment = ?, charged_terms = ?, first_seen = ?, usage_adjustments = ?, anchor = ?, updated_at = ? WHERE id = ? AND environment_id = ?";

/** A subscription's UPDATE statement (plain SQL: a cycle close updates every due subscription). */
function updateStatement(s: Subscription, at: string): Statement {
  return [
    UPDATE_SUBSCRIPTION,
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
      s.usageCheck ? JSON.stringify(s.usageCheck) : null,
      s.pausedAt ? dbTime(s.pausedAt) : null,
      s.resumesAt ? dbTime(s.resumesAt) : null,
      s.cycleEpoch,
      s.prorationCredits?.length ? JSON.stringify(s.prorationCredits) : null,
      s.commitment ? JSON.stringify(s.commitment) : null,
      s.chargedTerms ? JSON.stringify(s.chargedTerms) : null,
      s.firstSeen ? JSON.stringify(isoAnchors(s.firstSeen)) : null,
      s.usageAdjustments?.length ? JSON.stringify(s.usageAdjustments) : null,
      dbTime(s.anchor),
      at,
      s.id,
      s.environmentId,
    ],
  ];
}

/**
 * Updates subscriptions in the transaction of `em`. On MySQL the statements go together, one
 * multi-statement packet per STATEMENT_BYTES (a cycle close's batch of 100 was 100 round trips,
 * each costing the client more CPU than the UPDATE costs the database); on SQLite, in-process,
 * one by one.
 */
async function updateSubscriptions(em: EntityManager, sql: Sql, list: readonly Subscription[]): Promise<void> {
  const at = dbTime(new Date());
  const statements = list.map((s) => updateStatement(s, at));
  if (sql.dialect !== "mysql") {
    for (const [q, params] of statements) await em.query(q, [...params]);
    return;
  }
  for (const packet of groupBySize(statements, ([q, params]) => q.length + paramsBytes(params), STATEMENT_BYTES)) {
    await em.query(
      packet.map(([q]) => q).join(";\n"),
      packet.flatMap(([, params]) => params),
    );
  }
}

/** The subscription writes of a billing transaction on `em`. */
export function subscriptionWrites(em: EntityManager, sql: Sql, E: Entities): SubscriptionWrites {
  return {
    // Held by a concurrent change (a checkout's completion, a cycle close): a conflict, retried from a fresh read (Sql.lockWaitBounded).
    lockSubscription: async (environmentId, id) => {
      const r = await sql.lockWaitBounded(em, () => em.findOne(E.Subscription, { where: { environment_id: environmentId, id }, lock: rowLock(sql.dialect) }));
      return r ? subscriptionFromRow(r) : undefined;
    },
    lockSubscriptions: async (ids, environmentId) => {
      if (ids.length === 0) return [];
      const qb = em.createQueryBuilder(E.Subscription, "s").where("s.environment_id = :environmentId AND s.id IN (:...ids)", { environmentId, ids });
      if (sql.dialect === "mysql") qb.setLock("pessimistic_write").setOnLocked("skip_locked");
      return (await qb.getMany()).map(subscriptionFromRow);
    },
    insertSubscription: async (s) => {
      await em.insert(E.Subscription, subscriptionToRow(s, s.createdAt));
    },
    updateSubscription: (s) => updateSubscriptions(em, sql, [s]),
    updateSubscriptions: (list) => updateSubscriptions(em, sql, list),
  };
}

export class SqlSubscriptionStore implements SubscriptionStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async get(environmentId: string, id: string): Promise<Subscription | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Subscription, { environment_id: environmentId, id }));
    return r ? subscriptionFromRow(r) : undefined;
  }

  async list(environmentId: string, filter: { subjectId?: string; rateCardId?: string }, page: Page): Promise<PageResult<Subscription>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.Subscription, {
        where: { environment_id: environmentId, ...(filter.subjectId ? { subject_id: filter.subjectId } : {}), ...(filter.rateCardId ? { rate_card_id: filter.rateCardId } : {}) },
        order: { seq: "ASC" },
        take: page.limit + 1,
        skip: page.offset,
      }),
    );
    return toPageResult(rows.map(subscriptionFromRow), page);
  }

  /** Over ix_subscriptions_env_retry. */
  async failing(environmentId: string, page: Page): Promise<PageResult<Subscription>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.Subscription, {
        where: { environment_id: environmentId, billing_retry_at: Not(IsNull()) },
        order: { billing_retry_at: "ASC", seq: "ASC" },
        take: page.limit + 1,
        skip: page.offset,
      }),
    );
    return toPageResult(rows.map(subscriptionFromRow), page);
  }

  /** Newest first over ix_subscriptions_env_status_seq (environment, status, seq) or ix_subscriptions_env_seq. */
  async listAll(environmentId: string, filter: { status?: SubscriptionStatus; rateCardId?: string }, page: Page): Promise<PageResult<Subscription>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.Subscription, {
        where: { environment_id: environmentId, ...(filter.status ? { status: filter.status } : {}), ...(filter.rateCardId ? { rate_card_id: filter.rateCardId } : {}) },
        order: { seq: "DESC" },
        take: page.limit + 1,
        skip: page.offset,
      }),
    );
    return toPageResult(rows.map(subscriptionFromRow), page);
  }

  async runningOfKey(environmentId: string, key: string): Promise<Subscription[] | undefined> {
    // One round trip for the subscriptions of the subject the key names (findSubjectRow's rule:
    // an ID match wins over an external ID match), whether the key is an ID or an external ID.
    const byId = "(SELECT j.id FROM subjects j WHERE j.environment_id = :env AND j.id = :key AND j.deleted_at IS NULL)";
    const byExternalId = "(SELECT j.id FROM subjects j WHERE j.environment_id = :env AND j.external_id_key = :key LIMIT 1)";
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Subscription, "s")
        .where("s.environment_id = :env AND s.status IN ('active', 'paused')", { env: environmentId })
        .andWhere(`s.subject_id = ${mayBeSubjectId(key) ? `COALESCE(${byId}, ${byExternalId})` : byExternalId}`, { key })
        .orderBy("s.seq", "ASC")
        .getMany(),
    );
    if (rows.length > 0) return rows.map(subscriptionFromRow);
    // None running: whether the key names a subject at all decides between none and not found.
    return (await findSubjectRow<{ id: string }>(this.sql, environmentId, key, "id")) ? [] : undefined;
  }

  async running(environmentId: string, subjectId: string): Promise<Subscription[]> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.Subscription, { where: { environment_id: environmentId, subject_id: subjectId, status: In(["active", "paused"]) }, order: { seq: "ASC" } }),
    );
    return rows.map(subscriptionFromRow);
  }

  async due(now: Date, clockId: string | null, limit: number, strict: boolean, realNow: Date): Promise<Subscription[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Subscription, "s")
        .where(`s.status = 'active' AND s.period_end ${strict ? "<" : "<="} :now`, { now: dbTime(now) })
        .andWhere(clockId === null ? "s.test_clock_id IS NULL" : "s.test_clock_id = :clock", { clock: clockId })
        .andWhere("(s.billing_retry_at IS NULL OR s.billing_retry_at <= :realNow)", { realNow: dbTime(realNow) })
        // A timeline's transition at or before the cycle's end comes first (Scheduler.runDue): one
        // not made yet (it failed in this run, or runs later) holds the close back, so the cycle
        // never opens on the card the timeline leaves.
        .andWhere("NOT EXISTS (SELECT 1 FROM subscription_timelines t WHERE t.id = s.timeline_id AND t.next_transition_at <= s.period_end)")
        .orderBy("s.period_end", "ASC")
        .limit(limit)
        .getMany(),
    );
    return rows.map(subscriptionFromRow);
  }

  async ended(clockId: string | null, limit: number, checkedBefore: Date | null): Promise<Subscription[]> {
    const rows = await this.sql.run((em) => {
      const qb = em
        .createQueryBuilder(this.entities.Subscription, "s")
        .where("s.status = 'cancelled'")
        .andWhere(clockId === null ? "s.test_clock_id IS NULL" : "s.test_clock_id = :clock", { clock: clockId });
      if (checkedBefore) qb.andWhere("(s.usage_checked_at IS NULL OR s.usage_checked_at < :before)", { before: dbTime(checkedBefore) });
      // Never checked first (NULLs sort first on both stores), then the longest unchecked.
      return qb.orderBy("s.usage_checked_at", "ASC").addOrderBy("s.seq", "ASC").limit(limit).getMany();
    });
    return rows.map(subscriptionFromRow);
  }

  async dueResumes(now: Date, clockId: string | null, limit: number): Promise<Subscription[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Subscription, "s")
        .where("s.status = 'paused' AND s.resumes_at <= :now", { now: dbTime(now) })
        .andWhere(clockId === null ? "s.test_clock_id IS NULL" : "s.test_clock_id = :clock", { clock: clockId })
        .orderBy("s.resumes_at", "ASC")
        .limit(limit)
        .getMany(),
    );
    return rows.map(subscriptionFromRow);
  }

  async markChecked(ids: string[], at: Date): Promise<void> {
    if (ids.length === 0) return;
    await this.sql.run((em) => em.createQueryBuilder().update(this.entities.Subscription).set({ usage_checked_at: at }).where("id IN (:...ids)", { ids }).execute());
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
}
