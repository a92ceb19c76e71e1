/**
 * Liveness and readiness (DESIGN §10). GET /healthz is liveness: the process answers (no
 * database), for a probe that restarts a hung process. GET /readyz is readiness, for a probe that
 * takes a server out of rotation: the database answers (bounded), the migrations are applied, and
 * the scheduler is not stuck. The gRPC health service reports the same readiness.
 */
import type { Logger } from "../log.js";

/** A scheduler that has shown no sign of life for this many intervals (and at least MIN_STUCK_MS) is stuck. */
export const STUCK_INTERVALS = 5;
export const MIN_STUCK_MS = 30_000;

/**
 * The scheduler's signs of life: a run starting, making progress (a batch of cycles closed) or
 * ending. A run that hangs (a database that does not answer) shows none, and the timer starts no
 * new run while one is running.
 */
export class SchedulerWatch {
  private lastAlive: number;
  constructor(
    readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.lastAlive = now();
  }
  alive(): void {
    this.lastAlive = this.now();
  }
  /** ms since the last sign of life when that is too long ago; undefined when the scheduler is fine. */
  stuckFor(): number | undefined {
    const quiet = this.now() - this.lastAlive;
    return quiet > Math.max(STUCK_INTERVALS * this.intervalMs, MIN_STUCK_MS) ? quiet : undefined;
  }
}

export type CheckState = "ok" | "unavailable" | "pending" | "unknown" | "stuck" | "off";

export interface ReadinessReport {
  ready: boolean;
  checks: { database: CheckState; migrations: CheckState; scheduler: CheckState };
}

export interface ReadinessOptions {
  /** Whether the database answers, bounded in time (db/datasource.ts ping). */
  database: () => Promise<boolean>;
  /** Whether every migration is applied (asked only while the database answers, until it says yes). */
  migrationsApplied: () => Promise<boolean>;
  /** The scheduler's watch; undefined when this server runs no scheduler (SCHEDULER_INTERVAL_MS=0). */
  scheduler: SchedulerWatch | undefined;
  timeoutMs: number;
  log: Logger;
}

export class Readiness {
  private migrationsOk = false;
  private last: boolean | undefined;
  constructor(private readonly o: ReadinessOptions) {}

  /** Marks the migrations applied (the server ran them at start). */
  migrated(): void {
    this.migrationsOk = true;
  }

  async check(): Promise<ReadinessReport> {
    const database: CheckState = (await this.o.database().catch(() => false)) ? "ok" : "unavailable";
    let migrations: CheckState = this.migrationsOk ? "ok" : "unknown";
    if (!this.migrationsOk && database === "ok") {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), this.o.timeoutMs)));
      const applied = await Promise.race([this.o.migrationsApplied().catch(() => undefined), late]);
      clearTimeout(timer);
      if (applied === true) this.migrationsOk = true;
      migrations = applied === true ? "ok" : applied === false ? "pending" : "unknown";
    }
    const stuck = this.o.scheduler?.stuckFor();
    const scheduler: CheckState = !this.o.scheduler ? "off" : stuck === undefined ? "ok" : "stuck";
    const ready = database === "ok" && migrations === "ok" && scheduler !== "stuck";
    if (ready !== this.last) {
      // Each change once, not each probe.
      if (ready) this.o.log.info("ready", { database, migrations, scheduler });
      else this.o.log.warn("not ready", { database, migrations, scheduler, ...(stuck !== undefined ? { scheduler_quiet_ms: stuck } : {}) });
      this.last = ready;
    }
    return { ready, checks: { database, migrations, scheduler } };
  }

  async ready(): Promise<boolean> {
    return (await this.check()).ready;
  }
}
