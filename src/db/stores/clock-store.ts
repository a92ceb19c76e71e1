/** Storage of test clocks. */
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { TestClockStore } from "../../billing/subscriptions/ports.js";
import type { TestClock } from "../../billing/subscriptions/types.js";
import type { Entities, TestClockRow } from "../entities/index.js";
import { dbTime } from "../raw.js";
import type { Sql } from "../sql.js";

/** Row → domain. */
export function testClockFromRow(r: TestClockRow): TestClock {
  return { id: r.id, environmentId: r.environment_id, name: r.name, frozenTime: r.frozen_time, createdAt: r.created_at };
}

/** Domain → row. */
export function testClockToRow(c: TestClock): TestClockRow {
  return { id: c.id, environment_id: c.environmentId, name: c.name, frozen_time: c.frozenTime, created_at: c.createdAt };
}

export class SqlTestClockStore implements TestClockStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(c: TestClock): Promise<void> {
    await this.sql.run((em) => em.insert(this.entities.TestClock, testClockToRow(c)));
  }

  async get(environmentId: string, id: string): Promise<TestClock | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.entities.TestClock, { environment_id: environmentId, id }));
    return r ? testClockFromRow(r) : undefined;
  }

  async list(environmentId: string, page: Page): Promise<PageResult<TestClock>> {
    const rows = await this.sql.run((em) => em.find(this.entities.TestClock, { where: { environment_id: environmentId }, order: { seq: "DESC" }, take: page.limit + 1, skip: page.offset }));
    return toPageResult(rows.map(testClockFromRow), page);
  }

  async advance(environmentId: string, id: string, to: Date): Promise<boolean> {
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
