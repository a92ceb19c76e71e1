/**
 * Credits in real time wired over a test server's database, as a second server would have them
 * (src/wiring/credits.ts): billing state with credit, the alerts and top-ups, the watch, and a
 * scheduler (and test clocks) that runs expiries and evaluations. The scenario is set up through
 * the server's API; grants and settings are written through the credit store, and clock advances
 * go through this wiring's scheduler.
 */
import type { CreditGrant, CreditSettings } from "../../src/billing/credits/types.js";
import { randomBase62 } from "../../src/billing/ids.js";
import { BillingStates } from "../../src/billing/subscriptions/billing-state.js";
import { Scheduler } from "../../src/billing/subscriptions/scheduler.js";
import { TestClocks } from "../../src/billing/subscriptions/test-clocks.js";
import type { Caller } from "../../src/billing/tenancy.js";
import { createDatabase } from "../../src/db/datasource.js";
import { SqlRateCardStore } from "../../src/db/stores/rate-card-store.js";
import { wireCreditRealTime } from "../../src/wiring/credits.js";
import { buildServices, wireSubscriptions } from "../../src/wiring/services.js";
import type { Scenario } from "./scenario.js";

export type CreditWiring = Awaited<ReturnType<typeof wireCredits>>;

/** The wiring over the scenario's database; `close()` when done. */
export async function wireCredits(s: Scenario) {
  const db = await createDatabase(s.server.db.url, { poolSize: 4 });
  await db.dataSource.initialize();
  const base = () => "http://localhost";
  const svc = buildServices(db, base, () => new Date());
  const { lookups, timelines, pauses } = wireSubscriptions(svc.engine, new SqlRateCardStore(db.sql, db.entities), base);
  const { creditStore: store, credits } = svc;
  const purchases = credits.purchases;
  const rt = wireCreditRealTime({ sql: db.sql, engine: svc.engine, lookups, store, purchases, expireDue: (at, clock) => credits.expireDue(at, clock), usageDelayMs: 10 });
  const scheduler = new Scheduler(svc.engine, timelines, pauses, undefined, undefined, undefined, rt.runs);
  const clocks = new TestClocks(lookups, scheduler);
  const [row] = (await db.dataSource.query("SELECT environment_id FROM subjects WHERE id = ?", [s.subjectId])) as { environment_id: string }[];
  const caller: Caller = { environmentId: (row as { environment_id: string }).environment_id, mode: "test", keyKind: "secret" };
  const states = new BillingStates(lookups, store);
  return {
    db,
    store,
    engine: svc.engine,
    caller,
    ...rt,
    /** Billing state's [credit_balance, available_credit] of a currency ("0" when absent). */
    async state(currency = "USD"): Promise<[string, string]> {
      const st = await states.billingState(caller, s.subjectId);
      const pick = (l: { currencyCode: string; value: string }[]) => l.find((a) => a.currencyCode === currency)?.value ?? "0";
      return [pick(st.creditBalance), pick(st.availableCredit)];
    },
    /** A promotional grant, then the evaluation a grant triggers. */
    async grant(amount: string, opts: Partial<CreditGrant> = {}): Promise<CreditGrant> {
      const at = await lookups.nowFor({ environmentId: caller.environmentId, testClockId: s.clockId });
      const g: CreditGrant = {
        id: `cg_${randomBase62(22)}`,
        environmentId: caller.environmentId,
        subjectId: s.subjectId,
        currency: "USD",
        amount,
        remaining: amount,
        category: "promotional",
        priority: 50,
        effectiveAt: at,
        expiresAt: null,
        appliesToRateCodes: [],
        metadata: {},
        status: "active",
        invoiceId: null,
        createdAt: at,
        voidedAt: null,
        expiredAt: null,
        ...opts,
      };
      await store.transaction((tx) => tx.insertGrant(g, { type: "grant", invoiceId: null, description: "test grant" }));
      await rt.watch.changed(caller.environmentId, s.subjectId);
      return g;
    },
    async settings(set: Omit<CreditSettings, "subjectId">): Promise<void> {
      await store.transaction((tx) => tx.putSettings(caller.environmentId, { subjectId: s.subjectId, ...set }, new Date()));
    },
    /** Usage through the scenario's API, then what the ingest hook does: the watch, settled. */
    async use(at: string, n: string): Promise<void> {
      await s.events([[at, n]]);
      rt.watch.usage(caller.environmentId, [s.subjectId]);
      await rt.watch.idle();
    },
    advance(to: string) {
      return clocks.advanceClock(caller, s.clockId, new Date(to));
    },
    async close() {
      await rt.watch.idle();
      await db.dataSource.destroy();
    },
  };
}
