/**
 * When credit alerts are evaluated besides the scheduler's runs (runs.ts): shortly after usage is
 * ingested for a subject (usage lowers available credit between invoices), and at once after a
 * change that moves its balance (a grant, a void, an invoice's finalization that spent credit).
 *
 * Usage is coalesced: the subjects that got usage within `delayMs` are evaluated once each,
 * one after the other, after that delay (a burst of batches is a few evaluations, not one per
 * event). Which of several evaluations — on this server or another — fires is decided by the
 * alert state rows (alerts.ts), so evaluating more often never fires twice.
 */
import type { BillingDirectory } from "../subscriptions/ports.js";
import type { BillingSubject } from "../subscriptions/types.js";
import type { CreditAlerts } from "./alerts.js";
import type { AlertSubjects } from "./runs.js";

/** How long whether an environment has any credit at all is remembered (usage of one without is not evaluated). */
const HAS_CREDIT_TTL_MS = 1000;

export class CreditWatch {
  private pending = new Map<string, { environmentId: string; key: string }>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private readonly hasCredit = new Map<string, { yes: boolean; until: number }>();
  private stopped = false;

  constructor(
    private readonly alerts: Pick<CreditAlerts, "evaluate">,
    private readonly directory: Pick<BillingDirectory, "subject">,
    private readonly subjects: Pick<AlertSubjects, "environmentHasCredit" | "withCredit">,
    /** The subject's "now": its test clock's time, or real time. */
    private readonly nowFor: (s: Pick<BillingSubject, "environmentId" | "testClockId">) => Promise<Date>,
    private readonly delayMs = 50,
    /** Told of a subject whose evaluation failed (the next one tries again). */
    private readonly onError: (subjectId: string, err: unknown) => void = () => {},
  ) {}

  /** Usage was ingested for these subjects (IDs or external IDs): evaluate them shortly. */
  usage(environmentId: string, subjectKeys: Iterable<string>): void {
    if (this.stopped) return;
    for (const key of subjectKeys) this.pending.set(`${environmentId}/${key}`, { environmentId, key });
    if (this.pending.size === 0 || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const batch = [...this.pending.values()];
      this.pending.clear();
      // One batch at a time: a subject is never evaluated twice at once by this server.
      this.running = this.running.then(() => this.evaluateAll(batch));
    }, this.delayMs);
    this.timer.unref?.();
  }

  /** The subject's balance changed (grant, void, finalization): evaluate it now. */
  async changed(environmentId: string, subjectId: string): Promise<number> {
    this.hasCredit.delete(environmentId);
    try {
      return await this.evaluateKey(environmentId, subjectId);
    } catch (err) {
      this.onError(subjectId, err);
      return 0;
    }
  }

  /**
   * The server is stopping: usage gathered but not evaluated yet is dropped (the scheduler's next
   * run on another server evaluates those subjects), and no batch starts another subject.
   */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
  }

  /** Resolves once the usage evaluations queued so far have run (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.timer || this.pending.size > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    await this.running;
  }

  private async evaluateAll(batch: { environmentId: string; key: string }[]): Promise<void> {
    const byEnvironment = new Map<string, string[]>();
    for (const { environmentId, key } of batch) byEnvironment.set(environmentId, [...(byEnvironment.get(environmentId) ?? []), key]);
    for (const [environmentId, keys] of byEnvironment) {
      if (this.stopped) return;
      try {
        if (!(await this.environmentHasCredit(environmentId))) continue;
        // One statement for the batch: only subjects with settings or credit are evaluated.
        for (let i = 0; i < keys.length; i += 500) {
          for (const s of await this.subjects.withCredit(environmentId, keys.slice(i, i + 500))) {
            if (this.stopped) return;
            try {
              await this.alerts.evaluate(environmentId, s.subjectId, await this.nowFor(s));
            } catch (err) {
              this.onError(s.subjectId, err);
            }
          }
        }
      } catch (err) {
        this.onError(keys[0] ?? "", err);
      }
    }
  }

  /** Whether the environment has any credit settings or grant (remembered HAS_CREDIT_TTL_MS): usage elsewhere costs no evaluation. */
  private async environmentHasCredit(environmentId: string): Promise<boolean> {
    const now = Date.now();
    const hit = this.hasCredit.get(environmentId);
    if (hit && hit.until > now) return hit.yes;
    const yes = await this.subjects.environmentHasCredit(environmentId);
    if (this.hasCredit.size > 10_000) this.hasCredit.clear();
    this.hasCredit.set(environmentId, { yes, until: now + HAS_CREDIT_TTL_MS });
    return yes;
  }

  private async evaluateKey(environmentId: string, key: string): Promise<number> {
    const subject = await this.directory.subject(environmentId, key);
    if (!subject) return 0;
    return this.alerts.evaluate(environmentId, subject.id, await this.nowFor(subject));
  }
}
