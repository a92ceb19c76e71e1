/**
 * What the operations endpoints read from the store (src/ops): the scheduler's oldest due cycle,
 * the subscriptions set aside, the invoices by status, webhook deliveries pending and endpoints
 * failing, and whether migrations are pending. Small
 * queries outside any transaction, read on a scrape or a readiness check, never on a request.
 */
import type { StoreSnapshot } from "../../ops/metrics.js";
import { dbTime, fromDbTimeOrNull } from "../raw.js";
import type { Sql } from "../sql.js";
import { webhookBacklog } from "./webhook-queue.js";

export class SqlOpsStore {
  constructor(private readonly sql: Sql) {}

  /** Read on scrape (ops/metrics.ts); `now` is the scheduler's real time. */
  async snapshot(now: Date): Promise<StoreSnapshot> {
    const at = dbTime(now);
    // The scheduler's own due list (subscription-store.ts due(), on real time), by its index
    // ix_subscriptions_due: only its first row is read.
    const [due] = await this.sql.query<{ t: unknown }[]>(
      "SELECT MIN(period_end) AS t FROM subscriptions WHERE status = 'active' AND test_clock_id IS NULL AND period_end <= ? AND (billing_retry_at IS NULL OR billing_retry_at <= ?)",
      [at, at],
    );
    const [failing] = await this.sql.query<{ n: unknown }[]>("SELECT COUNT(*) AS n FROM subscriptions WHERE status = 'active' AND billing_error IS NOT NULL", []);
    const rows = await this.sql.query<{ status: string; n: unknown }[]>("SELECT status, COUNT(*) AS n FROM invoices GROUP BY status", []);
    const invoices: Record<string, number> = {};
    for (const r of rows) invoices[r.status] = Number(r.n);
    // Deliveries not yet delivered (those of events not yet fanned out too); the oldest pending event's age is the webhook lag.
    const pending = await webhookBacklog(this.sql);
    const [endpoints] = await this.sql.query<{ n: unknown }[]>("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE failing_since IS NOT NULL AND deleted_at IS NULL", []);
    return {
      oldestDueAt: fromDbTimeOrNull(due?.t),
      failing: Number(failing?.n ?? 0),
      invoices,
      webhookPending: pending.pending,
      webhookOldestPendingAt: pending.oldestPendingAt,
      webhookEndpointsFailing: Number(endpoints?.n ?? 0),
    };
  }
}
