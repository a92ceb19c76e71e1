/**
 * WORKERS=N (N > 1): one primary process and N server processes (node:cluster) sharing the port.
 * The primary serves nothing itself. It
 * - runs the migrations (and creates the bootstrap key) once, before forking;
 * - forks N workers, each the whole service (`startApp`) on the shared port: the primary accepts
 *   the connections and hands each to a worker (round robin), which sniffs HTTP/1.1 or HTTP/2 on
 *   it as a single process does (src/edge/listener.ts);
 * - starts again a worker that dies, after a backoff (RESTART_BASE_MS, doubling up to
 *   RESTART_MAX_MS; back to the base once a worker has stayed up RESTART_RESET_MS), and logs it;
 * - on SIGTERM or SIGINT, passes SIGTERM to every worker (each finishes its requests in flight, as
 *   a single process does) and exits once all have.
 * Background work: the webhook delivery worker runs in every worker (deliveries are claimed under
 * a row lock, then leased); the scheduler (cycle closes, due drafts, pauses, usage thresholds) in
 * worker 0 only, which is started again like any other. It is safe with several servers too (row
 * locks and the unique invoice key, test/db/billing-race.test.ts); one runner spares the database
 * N runners racing for the same rows. Each worker has its own caches, admission limits and rate
 * limit buckets (README, Configuration).
 * MySQL/MariaDB only: config.ts refuses WORKERS > 1 on the embedded SQLite file.
 */
import cluster, { type Worker } from "node:cluster";
import { prepareDatabase } from "./wiring/database.js";
import type { Config } from "./config.js";
import type { Logger } from "./log.js";
import { readTlsPair } from "./tls.js";

export const RESTART_BASE_MS = 500;
export const RESTART_MAX_MS = 30_000;
export const RESTART_RESET_MS = 60_000;

interface Slot {
  index: number;
  worker: Worker | undefined;
  startedAt: number;
  /** Restarts in a row that came soon after their start (the backoff's exponent). */
  failures: number;
  restartTimer: NodeJS.Timeout | undefined;
}

/** The primary: prepares the database, forks the workers, keeps them up, stops them on a signal. */
export async function runPrimary(config: Readonly<Config>, log: Logger): Promise<void> {
  // A certificate and key that do not work stop the start here, not in every worker over and over.
  if (config.tls) readTlsPair(config.tls);
  await prepareDatabase(config, log);
  const slots: Slot[] = Array.from({ length: config.workers }, (_, index) => ({ index, worker: undefined, startedAt: 0, failures: 0, restartTimer: undefined }));
  let stopping = false;
  let listening = 0;
  let unclean = false;

  const fork = (slot: Slot) => {
    slot.restartTimer = undefined;
    slot.startedAt = Date.now();
    const worker = cluster.fork({
      // Done by the primary already.
      RUN_MIGRATIONS: "false",
      BILLING_BOOTSTRAP_API_KEY: "",
      // The scheduler runs in worker 0 alone.
      ...(slot.index === 0 ? {} : { SCHEDULER_INTERVAL_MS: "0" }),
    });
    slot.worker = worker;
    const pid = worker.process.pid;
    worker.once("listening", (address) => {
      log.info("worker listening", { worker: slot.index, pid, port: address.port });
      if (++listening === slots.length) log.info("listening", { port: address.port, workers: slots.length });
    });
    worker.once("exit", (code, signal) => {
      slot.worker = undefined;
      if (stopping) {
        if (code !== 0) unclean = true;
        log.info("worker stopped", { worker: slot.index, pid, code, signal });
        if (slots.every((s) => s.worker === undefined)) {
          log.info("stopped", { workers: slots.length });
          process.exit(unclean ? 1 : 0);
        }
        return;
      }
      const lived = Date.now() - slot.startedAt;
      slot.failures = lived >= RESTART_RESET_MS ? 0 : slot.failures + 1;
      const delay = Math.min(RESTART_MAX_MS, RESTART_BASE_MS * 2 ** Math.max(0, slot.failures - 1));
      log.error("worker exited; starting it again", { worker: slot.index, pid, code, signal, lived_ms: lived, restart_in_ms: delay });
      slot.restartTimer = setTimeout(() => fork(slot), delay);
    });
  };

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log.info("stopping: workers finish their requests in flight", { signal, workers: slots.length });
      for (const slot of slots) {
        if (slot.restartTimer) clearTimeout(slot.restartTimer);
        slot.restartTimer = undefined;
        slot.worker?.process.kill("SIGTERM");
      }
      if (slots.every((s) => s.worker === undefined)) process.exit(0);
    });
  }
  for (const slot of slots) fork(slot);
}
