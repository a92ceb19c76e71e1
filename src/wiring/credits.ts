/**
 * Credits in real time (DESIGN §14), wired over the billing engine and the credit store: the
 * alerts and auto top-up (credits/alerts.ts, top-up.ts), what the scheduler runs of them
 * (expiries and periodic evaluations, credits/runs.ts) and the evaluations after usage and after
 * balance changes (credits/watch.ts). buildServices gives the scheduler `runs`, billing state the
 * store, the ingest service `watch.usage`, and the credit use cases `watch.changed`.
 */
import { CreditAlerts } from "../billing/credits/alerts.js";
import type { CreditStore } from "../billing/credits/ports.js";
import { CreditRuns, type ExpireDue } from "../billing/credits/runs.js";
import { AutoTopUps, type GrantPurchases } from "../billing/credits/top-up.js";
import { CreditWatch } from "../billing/credits/watch.js";
import type { IngestService } from "../billing/metering/usage.js";
import type { BillingEngine } from "../billing/subscriptions/engine.js";
import type { Lookups } from "../billing/subscriptions/lookups.js";
import type { Sql } from "../db/sql.js";
import { SqlAlertSubjects } from "../db/stores/credit-alert-subjects.js";
import type { Logger } from "../log.js";

export interface CreditRealTimeParts {
  sql: Sql;
  engine: BillingEngine;
  lookups: Pick<Lookups, "nowFor">;
  store: CreditStore;
  purchases: GrantPurchases;
  expireDue: ExpireDue;
  log?: Logger;
  /** How often real-time subjects are evaluated by the scheduler (usage also triggers it). */
  realTimeEveryMs?: number;
  /** How long usage of a subject is gathered before it is evaluated. */
  usageDelayMs?: number;
  /** Aborted when the server stops: the watch evaluates nothing more. */
  stopping?: AbortSignal;
}

export function wireCreditRealTime(p: CreditRealTimeParts) {
  const { engine, log } = p;
  const topUps = new AutoTopUps(engine.stores.directory, p.purchases, (environment, subject, currency, reason) => log?.warn("auto top-up not bought", { environment, subject, currency, reason }));
  const alerts = new CreditAlerts(p.store, engine, topUps);
  const failed = (subject: string, err: unknown) => log?.error("credit alert evaluation failed; tried again on the next one", { subject, err });
  const subjects = new SqlAlertSubjects(p.sql);
  const runs = new CreditRuns(p.store, p.expireDue, alerts, subjects, p.realTimeEveryMs ?? 60_000, failed);
  const watch = new CreditWatch(alerts, engine.stores.directory, subjects, (s) => p.lookups.nowFor(s), p.usageDelayMs ?? 50, failed);
  p.stopping?.addEventListener("abort", () => watch.stop(), { once: true });
  return { alerts, runs, watch, topUps };
}

/**
 * After each ingest call, the subjects of its accepted events are evaluated shortly (the watch
 * coalesces them): every ingest path (REST, Connect, gRPC, batches) goes through `ingest`.
 */
export function watchIngest(ingest: Pick<IngestService, "ingest">, watch: Pick<CreditWatch, "usage">): void {
  const ingestOnly = ingest.ingest.bind(ingest);
  ingest.ingest = async (caller, inputs, pathOf) => {
    const outcomes = await ingestOnly(caller, inputs, pathOf);
    const keys = new Set<string>();
    outcomes.forEach((o, i) => {
      if (o.status === "accepted") keys.add((inputs[i] as (typeof inputs)[number]).subjectId);
    });
    if (keys.size > 0) watch.usage(caller.environmentId, keys);
    return outcomes;
  };
}
