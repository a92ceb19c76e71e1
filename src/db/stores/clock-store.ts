/** Storage of test clocks. */
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { StoredTestClock, TestClockStatus, TestClockStore } from "../../billing/subscriptions/ports.js";
import type { TestClock } from "../../billing/subscriptions/types.js";
import type { Entities, TestClockRow } from "../entities/index.js";
import { dbTime, fromDbTime, fromDbTimeOrNull } from "../raw.js";
import type { Sql } from "../sql.js";

/** Row → domain. */
export function testClockFromRow(r: TestClockRow): StoredTestClock {
  return {
    id: r.id,
    environmentId: r.environment_id,
    name: r.name,
    frozenTime: r.frozen_time,
    createdAt: r.created_at,
    status: r.status === "advancing" ? "advancing" : "ready",
    advanceStartedAt: r.advance_started_at ?? null,
  };
}

/** Domain → row (a new clock is `ready`). */
export function testClockToRow(c: TestClock): TestClockRow {
  return { id: c.id, environment_id: c.environmentId, name: c.name, frozen_time: c.frozenTime, created_at: c.createdAt, status: "ready", advance_started_at: null };
}

const ADVANCING: TestClockStatus = "advancing";
const READY: TestClockStatus = "ready";

export class SqlTestClockStore implements TestClockStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(c: TestClock): Promise<void> {
    await this.sql.write((em) => em.insert(this.entities.TestClock, testClockToRow(c)));
  }

  async get(environmentId: string, id: string): Promise<StoredTestClock | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.TestClock, { environment_id: environmentId, id }));
    return r ? testClockFromRow(r) : undefined;
  }

  async list(environmentId: string, page: Page): Promise<PageResult<StoredTestClock>> {
    const rows = await this.sql.run((em) => em.find(this.entities.TestClock, { where: { environment_id: environmentId }, order: { seq: "DESC" }, take: page.limit + 1, skip: page.offset }));
    return toPageResult(rows.map(testClockFromRow), page);
  }

  async advance(environmentId: string, id: string, to: Date, startedAt: Date): Promise<boolean> {
    return this.update({ frozen_time: to, status: ADVANCING, advance_started_at: startedAt }, "environment_id = :env AND id = :id AND frozen_time <= :to", { env: environmentId, id, to: dbTime(to) });
  }

  async finish(environmentId: string, id: string, at: Date): Promise<boolean> {
    return this.update({ status: READY }, "environment_id = :env AND id = :id AND frozen_time = :at", { env: environmentId, id, at: dbTime(at) });
  }

  async stalled(startedBefore: Date, limit: number): Promise<StoredTestClock[]> {
    const rows = await this.sql.query<Record<string, unknown>[]>(
      `SELECT id, environment_id, name, frozen_time, created_at, status, advance_started_at FROM test_clocks WHERE status = ? AND advance_started_at <= ? ORDER BY advance_started_at, id LIMIT ${Math.max(1, Math.floor(limit))}`,
      [ADVANCING, dbTime(startedBefore)],
    );
    return rows.map((r) =>
      testClockFromRow({
        id: String(r.id),
        environment_id: String(r.environment_id),
        name: String(r.name),
        frozen_time: fromDbTime(r.frozen_time),
        created_at: fromDbTime(r.created_at),
        status: String(r.status),
        advance_started_at: fromDbTimeOrNull(r.advance_started_at),
      }),
    );
  }

  async takeOver(environmentId: string, id: string, at: Date, startedAt: Date, now: Date): Promise<boolean> {
    return this.update({ advance_started_at: now }, "environment_id = :env AND id = :id AND status = :status AND frozen_time = :at AND advance_started_at = :startedAt", {
      env: environmentId,
      id,
      status: ADVANCING,
      at: dbTime(at),
      startedAt: dbTime(startedAt),
    });
  }

  private async update(set: Partial<TestClockRow>, where: string, params: Record<string, unknown>): Promise<boolean> {
    const res = await this.sql.write((em) => em.createQueryBuilder().update(this.entities.TestClock).set(set).where(where, params).execute());
    return (res.affected ?? 0) > 0;
  }
}
