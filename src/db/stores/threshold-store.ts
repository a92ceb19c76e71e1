/** What a usage-threshold check reads: the marks already made, and the active subscriptions to check. */
import type { ThresholdStore } from "../../billing/events/thresholds.js";
import type { Subscription } from "../../billing/subscriptions/types.js";
import type { Entities } from "../entities/index.js";
import type { Sql } from "../sql.js";
import { subscriptionFromRow } from "./subscription-store.js";

/** What a usage-threshold check reads. */
export class SqlThresholdStore implements ThresholdStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async fired(subscriptionId: string, periodKey: string): Promise<Set<string>> {
    const rows = await this.sql.query<{ rate_code: string; percent: unknown }[]>("SELECT rate_code, percent FROM usage_threshold_marks WHERE subscription_id = ? AND period_key = ?", [
      subscriptionId,
      periodKey,
    ]);
    return new Set(rows.map((r) => `${r.rate_code}@${Number(r.percent)}`));
  }

  async activeAfter(clockId: string | null, afterId: string, limit: number): Promise<Subscription[]> {
    const rows = await this.sql.run((em) =>
      em
        .createQueryBuilder(this.entities.Subscription, "s")
        .where("s.status = 'active' AND s.id > :after", { after: afterId })
        .andWhere(clockId === null ? "s.test_clock_id IS NULL" : "s.test_clock_id = :clock", { clock: clockId })
        .orderBy("s.id", "ASC")
        .limit(limit)
        .getMany(),
    );
    return rows.map(subscriptionFromRow);
  }
}
