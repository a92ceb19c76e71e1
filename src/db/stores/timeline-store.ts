/** Storage of subscription timelines and their items. */
import type { EntityManager } from "typeorm";
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { TimelineStore, TimelineWrites } from "../../billing/subscriptions/ports.js";
import type { Timeline, TimelineItem, TimelineStatus } from "../../billing/subscriptions/types.js";
import type { Entities, TimelineItemRow, TimelineRow } from "../entities/index.js";
import { dbTime } from "../raw.js";
import { type Sql, rowLock } from "../sql.js";

/** Row → domain. */
export function timelineFromRow(r: TimelineRow): Timeline {
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

/** Domain → row. */
export function timelineToRow(t: Timeline): TimelineRow {
  return {
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
  };
}

/** Row → domain. */
export function timelineItemFromRow(r: TimelineItemRow): TimelineItem {
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

/** Domain → row. */
export function timelineItemToRow(i: TimelineItem): TimelineItemRow {
  return {
    id: i.id,
    timeline_id: i.timelineId,
    environment_id: i.environmentId,
    period_start: i.start,
    period_end: i.end,
    rate_card_id: i.rateCardId,
    fixed_rate_quantities: i.fixedRateQuantities,
    rate_multipliers: i.rateMultipliers,
    created_at: i.createdAt,
  };
}

/** The timeline writes of a billing transaction on `em`. */
export function timelineWrites(em: EntityManager, sql: Sql, E: Entities): TimelineWrites {
  return {
    lockTimeline: async (environmentId, id) => {
      const r = await em.findOne(E.Timeline, { where: { environment_id: environmentId, id }, lock: rowLock(sql.dialect) });
      return r ? timelineFromRow(r) : undefined;
    },
    updateTimeline: async (t) => {
      await em.update(
        E.Timeline,
        { environment_id: t.environmentId, id: t.id },
        { subscription_id: t.subscriptionId, status: t.status, effective_at: t.effectiveAt, next_transition_at: t.nextTransitionAt, updated_at: t.updatedAt },
      );
    },
    insertTimelineItems: async (items) => {
      if (items.length === 0) return;
      await em.insert(E.TimelineItem, items.map(timelineItemToRow));
    },
  };
}

export class SqlTimelineStore implements TimelineStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(t: Timeline): Promise<void> {
    await this.sql.write((em) => em.insert(this.entities.Timeline, timelineToRow(t)));
  }

  async get(environmentId: string, id: string): Promise<Timeline | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.Timeline, { environment_id: environmentId, id }));
    return r ? timelineFromRow(r) : undefined;
  }

  async list(environmentId: string, page: Page): Promise<PageResult<Timeline>> {
    const rows = await this.sql.run((em) => em.find(this.entities.Timeline, { where: { environment_id: environmentId }, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset }));
    return toPageResult(rows.map(timelineFromRow), page);
  }

  async items(timelineId: string, environmentId: string): Promise<TimelineItem[]> {
    const rows = await this.sql.run((em) => em.find(this.entities.TimelineItem, { where: { environment_id: environmentId, timeline_id: timelineId }, order: { period_start: "ASC", seq: "ASC" } }));
    return rows.map(timelineItemFromRow);
  }

  async due(now: Date, clockId: string | null, limit: number): Promise<Timeline[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Timeline, "t")
        .where("t.status IN ('pending', 'active') AND t.next_transition_at IS NOT NULL AND t.next_transition_at <= :now", { now: dbTime(now) })
        .andWhere(clockId === null ? "t.test_clock_id IS NULL" : "t.test_clock_id = :clock", { clock: clockId })
        .orderBy("t.next_transition_at", "ASC")
        .limit(limit)
        .getMany(),
    );
    return rows.map(timelineFromRow);
  }
}
