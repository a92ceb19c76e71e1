/**
 * What the operator CLI (src/cli/billing.ts) reads and changes across environments: migration
 * state, the scheduler's backlog, subscriptions set aside, and which environment an invoice
 * belongs to. Nothing here is reachable through the API (which is always scoped to one
 * environment); invoice status changes go through the domain's Invoices use case instead.
 */
import { IsNull, MigrationExecutor, Not } from "typeorm";
import type { Database } from "../datasource.js";
import { MIGRATIONS_TABLE } from "../migrations/index.js";
import { dbTime } from "../raw.js";
import { webhookBacklog } from "./webhook-queue.js";

export interface MigrationState {
  applied: string[];
  pending: string[];
}

export class OperatorStore {
  constructor(private readonly db: Database) {}

  /** Every migration the code has, by name, applied or pending. */
  async migrations(): Promise<MigrationState> {
    const executor = new MigrationExecutor(this.db.dataSource);
    // The migrations table is made by the first `migrate up`; before that nothing is applied.
    const runner = this.db.dataSource.createQueryRunner();
    let hasTable: boolean;
    try {
      hasTable = await runner.hasTable(MIGRATIONS_TABLE);
    } finally {
      await runner.release();
    }
    const pending = hasTable ? await executor.getPendingMigrations() : null;
    const all = this.db.dataSource.migrations.map((m) => m.name ?? m.constructor.name);
    const pendingNames = new Set(pending === null ? all : pending.map((m) => m.name));
    return { applied: all.filter((n) => !pendingNames.has(n)), pending: all.filter((n) => pendingNames.has(n)) };
  }

  /** Applies the pending migrations, each in its own transaction; their names. */
  async migrateUp(): Promise<string[]> {
    const ran = await this.db.dataSource.runMigrations({ transaction: "each" });
    return ran.map((m) => m.name);
  }

  /**
   * Active subscriptions on real time (no test clock) whose cycle has ended by `now` and that the
   * scheduler would close on its next run (those set aside wait for their retry time).
   */
  async dueCycles(now: Date): Promise<number> {
    return this.db.sql.run((em) =>
      em
        .createQueryBuilder(this.db.entities.Subscription, "s")
        .where("s.status = 'active' AND s.period_end <= :now AND s.test_clock_id IS NULL", { now: dbTime(now) })
        .andWhere("(s.billing_retry_at IS NULL OR s.billing_retry_at <= :now)")
        .getCount(),
    );
  }

  /** Webhook deliveries not yet delivered (pending or held by a disabled endpoint; those of events not yet fanned out too), and endpoints marked failing. */
  async webhookBacklog(): Promise<{ pendingDeliveries: number; failingEndpoints: number }> {
    const { pending } = await webhookBacklog(this.db.sql);
    const [e] = await this.db.sql.query<{ n: unknown }[]>("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE failing_since IS NOT NULL AND deleted_at IS NULL", []);
    return { pendingDeliveries: pending, failingEndpoints: Number(e?.n ?? 0) };
  }

  /** Active subscriptions set aside: their last cycle close failed and is retried with backoff. */
  async setAside(environmentId?: string): Promise<{ id: string; environmentId: string; error: string; attempts: number; retryAt: Date | null }[]> {
    const rows = await this.db.sql.run((em) =>
      em.find(this.db.entities.Subscription, {
        where: { status: "active", billing_error: Not(IsNull()), ...(environmentId ? { environment_id: environmentId } : {}) },
        order: { seq: "ASC" },
      }),
    );
    return rows.map((r) => ({ id: r.id, environmentId: r.environment_id, error: r.billing_error ?? "", attempts: Number(r.billing_attempts), retryAt: r.billing_retry_at }));
  }

  /**
   * Ends the backoff of these set-aside subscriptions: their retry time becomes `now`, so the
   * scheduler's next run tries them (the recorded failure stays visible until a close succeeds).
   * Returns how many were changed.
   */
  async retryNow(ids: string[], now: Date): Promise<number> {
    if (ids.length === 0) return 0;
    const res = await this.db.sql.run((em) =>
      em.createQueryBuilder().update(this.db.entities.Subscription).set({ billing_retry_at: now }).where("id IN (:...ids) AND status = 'active' AND billing_error IS NOT NULL", { ids }).execute(),
    );
    return res.affected ?? ids.length;
  }

  /** The environment an invoice belongs to (invoice IDs are unique across environments). */
  async invoiceEnvironment(invoiceId: string): Promise<string | undefined> {
    const row = await this.db.sql.run((em) => em.findOne(this.db.entities.Invoice, { where: { id: invoiceId }, select: { id: true, environment_id: true } }));
    return row?.environment_id;
  }
}
