/**
 * The work a server does on its own, beside requests: the scheduler (due billing cycles on real
 * time), the webhook delivery worker, and the sweep of expired idempotency keys. Each is safe with
 * several servers (row locks, the unique invoice key, claimed and leased deliveries), so every
 * server runs them.
 */
import { performance } from "node:perf_hooks";
import { DEFAULT_DELIVERY_OPTIONS, DeliveryWorker } from "../billing/events/delivery.js";
import type { Scheduler } from "../billing/subscriptions/scheduler.js";
import type { Config } from "../config.js";
import type { Database } from "../db/datasource.js";
import type { SqlIdempotencyStore } from "../db/stores/idempotency-store.js";
import { watchOutbox } from "../db/stores/outbox.js";
import type { SqlWebhookStore } from "../db/stores/webhook-store.js";
import type { Logger } from "../log.js";
import type { SchedulerWatch } from "../ops/health.js";
import type { Metrics } from "../ops/metrics.js";
import { type Tracing, detached } from "../ops/tracing.js";
import type { HostGuard } from "../webhooks/guard.js";
import { HttpWebhookSender } from "../webhooks/http-sender.js";

/** How often a server deletes expired idempotency keys. */
const IDEMPOTENCY_SWEEP_MS = 60_000;

/** How long after a commit that wrote events the delivery worker fans them out (events of commits meanwhile join the batch). */
const WAKE_DELAY_MS = 10;

export interface BackgroundParts {
  config: Pick<Config, "schedulerIntervalMs" | "webhooks">;
  db: Database;
  scheduler: Scheduler;
  schedulerWatch: SchedulerWatch | undefined;
  webhookStore: SqlWebhookStore;
  guard: HostGuard;
  idempotencyStore: SqlIdempotencyStore;
  metrics: Metrics;
  tracing: Tracing | undefined;
  log: Logger;
  now: () => Date;
}

export interface Background {
  /** Stops the timers and the outbox watch; work in progress goes on (see `finished`). */
  stop(): void;
  /** Resolves once no scheduler or delivery run is in progress, then closes the webhook sender. */
  finished(): Promise<void>;
}

export function startBackground(p: BackgroundParts): Background {
  const scheduling = startScheduler(p);
  const delivery = startDelivery(p);
  // Idempotency keys past their 24 hours (DESIGN §12), a thousand at a time; every server may sweep.
  const sweepTimer = setInterval(() => {
    p.idempotencyStore.sweep(new Date(), 1000).catch((err) => p.log.warn("idempotency key sweep failed", { err }));
  }, IDEMPOTENCY_SWEEP_MS);
  sweepTimer.unref();
  return {
    stop() {
      scheduling.stop();
      delivery.stop();
      clearInterval(sweepTimer);
    },
    async finished() {
      while (scheduling.busy() || delivery.busy()) await new Promise((r) => setTimeout(r, 20));
      delivery.close();
    },
  };
}

/**
 * How long a test clock advance runs before the scheduler takes it for cut short and finishes it:
 * 60 s, or 12 scheduler intervals when that is shorter (at least a second).
 */
export function advanceLeaseMs(schedulerIntervalMs: number): number {
  return Math.min(60_000, Math.max(1_000, 12 * schedulerIntervalMs));
}

/** Finishes the test clock advances cut short (Scheduler.finishAdvances), logging what it did. */
async function finishAdvances({ config, scheduler, log, now }: BackgroundParts): Promise<void> {
  const { finished, failed } = await scheduler.finishAdvances(now(), advanceLeaseMs(config.schedulerIntervalMs));
  if (finished.length > 0) log.info("test clock advances finished", { clocks: finished });
  for (const f of failed) log.error("test clock advance could not be finished", { test_clock_id: f.clockId, err: f.err });
}

/**
 * The scheduler on real time: closes due billing cycles every SCHEDULER_INTERVAL_MS, one run at a
 * time, then finishes test clock advances cut short.
 */
function startScheduler(p: BackgroundParts) {
  const { config, scheduler, schedulerWatch, metrics, log, now } = p;
  let ticking = false;
  const timer =
    config.schedulerIntervalMs > 0
      ? setInterval(() => {
          if (ticking) return;
          ticking = true;
          schedulerWatch?.alive();
          const t0 = performance.now();
          scheduler
            .runDue(now(), null)
            .then((n) => {
              const ms = performance.now() - t0;
              metrics.schedulerRan(ms / 1000, n);
              if (n > 0) log.info("billing cycles closed", { count: n, ms: Math.round(ms) });
              else log.debug("scheduler run: nothing due", { ms: Math.round(ms * 100) / 100 });
            })
            .catch((err) => log.error("scheduler run failed", { err }))
            .then(() => finishAdvances(p))
            .catch((err) => log.error("finishing test clock advances failed", { err }))
            .finally(() => {
              schedulerWatch?.alive();
              ticking = false;
            });
        }, config.schedulerIntervalMs)
      : undefined;
  return { stop: () => timer && clearInterval(timer), busy: () => ticking };
}

/**
 * The webhook delivery worker. Runs one at a time: a call while one runs is remembered and made
 * when it ends (with the retries if any of the calls asked for them). The poll (every
 * deliveryIntervalMs) does the retries and fans out what other servers wrote; a commit of this
 * server that wrote events wakes it (WAKE_DELAY_MS later) for the fan-out alone.
 */
function startDelivery({ config, db, webhookStore, guard, tracing, log, now }: BackgroundParts) {
  const sender = new HttpWebhookSender(guard, undefined, tracing);
  const worker = new DeliveryWorker(webhookStore, sender, now, {
    ...DEFAULT_DELIVERY_OPTIONS,
    timeoutMs: config.webhooks.timeoutMs,
    retryBaseMs: config.webhooks.retryBaseMs,
    retryWindowMs: config.webhooks.retryWindowSeconds * 1000,
  });
  let delivering = false;
  let stopped = false;
  let queued: { retries: boolean } | undefined;
  const deliver = (retries: boolean) => {
    if (stopped) return;
    if (delivering) {
      queued = { retries: retries || (queued?.retries ?? false) };
      return;
    }
    delivering = true;
    // Outside the trace of the request whose commit woke it: each attempt is a trace of its own.
    detached(() => worker.runDue({ retries }))
      .catch((err) => log.error("webhook delivery run failed", { err }))
      .finally(() => {
        delivering = false;
        const next = queued;
        queued = undefined;
        if (next) deliver(next.retries);
      });
  };
  const interval = config.webhooks.deliveryIntervalMs;
  let woken = false;
  const unwatch =
    interval > 0
      ? watchOutbox(db.dataSource, () => {
          if (woken) return;
          woken = true;
          // A few milliseconds later: the events of the commits meanwhile go in the same batch.
          setTimeout(
            () => {
              woken = false;
              deliver(false);
            },
            Math.min(WAKE_DELAY_MS, interval),
          );
        })
      : undefined;
  const timer = interval > 0 ? setInterval(() => deliver(true), interval) : undefined;
  return {
    stop() {
      if (timer) clearInterval(timer);
      unwatch?.();
      stopped = true;
    },
    busy: () => delivering,
    close: () => sender.close(),
  };
}
