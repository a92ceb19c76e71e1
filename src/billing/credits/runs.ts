/**
 * What the scheduler runs of credits (DESIGN §14) on real time and on each test clock advance:
 * expiries in time order with cycle closes (the scheduler asks for the next one due, closes the
 * cycles up to it, then expires), and the evaluation of credit alerts and top-ups (alerts.ts) for
 * every subject with credit settings or credit left on that clock. On a test clock the evaluation
 * runs at every advance; on real time at most every `realTimeEveryMs`.
 */
import type { CreditAlerts } from "./alerts.js";
import type { CreditStore } from "./ports.js";

export interface AlertSubject {
  environmentId: string;
  subjectId: string;
}

/** The subjects an evaluation run goes through, by subject ID. */
export interface AlertSubjects {
  after(clockId: string | null, afterId: string, limit: number): Promise<AlertSubject[]>;
  /** Whether any subject of the environment has credit settings or an active grant. */
  environmentHasCredit(environmentId: string): Promise<boolean>;
  /** Of the subjects these keys (IDs or external IDs) name, those with credit settings or an active grant. */
  withCredit(environmentId: string, keys: readonly string[]): Promise<CreditSubject[]>;
}

/** A subject with credit, and its test clock (whose time it is evaluated at). */
export interface CreditSubject extends AlertSubject {
  testClockId: string | null;
}

/** Expires every grant due by `at` on the clock (credit_grant.expired each); how many. */
export type ExpireDue = (at: Date, clockId: string | null) => Promise<number>;

export class CreditRuns {
  private lastRealTime = 0;

  constructor(
    private readonly store: Pick<CreditStore, "dueExpiries">,
    private readonly expire: ExpireDue,
    private readonly alerts: Pick<CreditAlerts, "evaluate">,
    private readonly subjects: AlertSubjects,
    private readonly realTimeEveryMs = 60_000,
    /** Told of a subject whose evaluation failed (the run goes on with the others). */
    private readonly onError: (subjectId: string, err: unknown) => void = () => {},
  ) {}

  /** When the earliest grant due to expire by `now` on the clock expires; null when none is. */
  async nextExpiry(now: Date, clockId: string | null): Promise<Date | null> {
    const [g] = await this.store.dueExpiries(now, clockId, 1);
    return g?.expiresAt ?? null;
  }

  /** Expires what is due by `at` on the clock. */
  expireDue(at: Date, clockId: string | null): Promise<number> {
    return this.expire(at, clockId);
  }

  /**
   * Evaluates the alerts of every subject with settings or credit on the clock at `now`; how
   * many events and top-ups were written. `force`: on real time too, whatever the last run.
   */
  async evaluateDue(now: Date, clockId: string | null, force = false): Promise<number> {
    if (clockId === null && !force) {
      const t = Date.now();
      if (t - this.lastRealTime < this.realTimeEveryMs) return 0;
      this.lastRealTime = t;
    }
    let n = 0;
    let after = "";
    for (;;) {
      const page = await this.subjects.after(clockId, after, 100);
      for (const s of page) {
        try {
          n += await this.alerts.evaluate(s.environmentId, s.subjectId, now);
        } catch (err) {
          this.onError(s.subjectId, err);
        }
      }
      if (page.length < 100) return n;
      after = (page[page.length - 1] as AlertSubject).subjectId;
    }
  }
}
