/**
 * The scheduler: runs everything due up to a time T — billing cycles that ended, timeline
 * transitions, drafts whose grace period ended (on a test clock in time order with the cycle
 * closes), late usage of ended subscriptions, credit grants that expire (in time order with the
 * closes), failed payments' retries (dunning; on a test clock in time order with the closes too,
 * each as of its own time), then credit alerts and top-ups — on real time (the server's interval)
 * or on one test clock (when it is advanced).
 * Safe with several runners at once (row locks and the unique invoice key).
 */
import { UnavailableError } from "../errors.js";
import { yielder } from "../yielding.js";
import { atClockTime } from "./clock-step.js";
import type { BillingEngine } from "./engine.js";
import type { Pauses } from "./pauses.js";
import type { TimelineService } from "./timelines.js";
import type { Timeline } from "./types.js";

/** What the scheduler runs of credits (credits/runs.ts). */
export interface SchedulerCredits {
  nextExpiry(now: Date, clockId: string | null): Promise<Date | null>;
  expireDue(at: Date, clockId: string | null): Promise<number>;
  evaluateDue(now: Date, clockId: string | null): Promise<number>;
}

/** How often, and for how long at most, an advance runs again for cycles another transaction held (runClockDue). */
const HELD_RETRY_MS = 100;
const HELD_WAIT_MS = 15_000;

export class Scheduler {
  constructor(
    private readonly engine: BillingEngine,
    private readonly timelines: TimelineService,
    private readonly pauses: Pauses,
    /** Told about a timeline that could not be moved on (the run goes on with the others). */
    private readonly onTimelineError: (timelineId: string, err: unknown) => void = () => {},
    /**
     * Told of a run's progress: after each batch of cycle closes and each timeline transition
     * (`done` false), and once at its end (`done` true), with the cycles closed so far and when
     * the run started (Date.now()).
     */
    private readonly onProgress?: (p: RunProgress) => void,
    /** usage.threshold_crossed checks (events/thresholds.ts), when events are wired. */
    private readonly thresholds?: { check(clockId: string | null): Promise<number> },
    /** Credit expiries, alerts and top-ups, when credits are wired. */
    private readonly credits?: SchedulerCredits,
  ) {}

  /** Dunning's retries due (payments/attempts.ts), each at its planned time, once wired. */
  dunning?: { runDue(now: Date, clockId: string | null, breathe?: () => Promise<void>, skipped?: string[]): Promise<number> };
  /** When dunning's next retry on a test clock is due (DunningStore.nextDue), once wired: an advance runs each at its instant (stepUpTo). */
  dunningDue?: { nextDue(after: Date | null, upTo: Date, clockId: string, exclude?: readonly string[]): Promise<Date | null> };
  /**
   * Sweeps run on real time only, after dunning, once wired: payments of ended invoices whose
   * cancel is still to make (payments/cancels.ts), checkouts past their expiry (checkout-expiry.ts).
   */
  readonly realTimeSweeps: { runDue(now: Date): Promise<number> }[] = [];

  /**
   * Expires the credit due by `upTo`, each expiry instant in order: the cycles that end by it are
   * closed first (at the same instant the close goes first: a grant expiring at a period's end
   * still pays that period's invoice when it is final at once), and drafts whose grace period
   * ended by then are finalized, so each invoice spends the credit there was when it was final.
   */
  private async expireUpTo(upTo: Date, clockId: string | null, breathe: () => Promise<void>, onBatch: (closed: number) => void): Promise<number> {
    const credits = this.credits;
    if (!credits) return 0;
    let n = 0;
    for (;;) {
      const at = await credits.nextExpiry(upTo, clockId);
      if (!at) return n;
      n += await this.engine.closeDue(at, clockId, 8, false, breathe, onBatch);
      await this.engine.finalizeDue(at, clockId, breathe);
      if ((await credits.expireDue(at, clockId)) === 0) return n;
    }
  }

  /**
   * Closes the cycles due by `upTo` (strictly before it with `strict`), credit expiries interleaved
   * (expireUpTo). On a test clock it first steps through the instants before `upTo` at which an
   * order shows, as real time runs each at its own time: each step runs the expiries, closes and
   * finalizations due by its instant (at the same instant the close goes first), then dunning's
   * retries due then. The instants: dunning's next retry (by `upTo`), run with the clock read as of
   * that instant (clock-step.ts): a retry's policy cancels or pauses the subscription then, and a
   * cycle that ends after a subscription was cancelled by it is never billed; the next draft due
   * (its grace period's end), so that it is final before any cycle that ends after it is closed (a
   * subject's "once" discount and its credit go to the invoice final first); and the earliest
   * cycle end due plus the environment's grace period: the first instant a draft made by a close
   * can be due (every cycle ending by then closed first in one batch), or, with a grace period of
   * 0 and dunning wired, the close itself, whose first charge may fail and plan a retry due before
   * the next cycle ends (so a renewal declined on Feb 15 is retried Feb 18, 20 and 22 and its
   * policy cancels the subscription on Feb 22, before Mar 15 is billed); and the next resume of a
   * paused subscription, so that a retry due before it (whose policy may cancel the subscription)
   * runs first. Without dunning and with a grace period of 0 cycles need no steps. Real time
   * needs no steps (each is run within a tick of its time): its retries run after the closes
   * (runDue). `skipped`: the run's retries skipped or deferred (a waiting payment's cancel that
   * threw moves its retry 5 minutes ahead, waiting.ts): never stepped to again in this run, or an
   * advance of 30 days would step every 5 minutes of it.
   */
  private async stepUpTo(upTo: Date, clockId: string | null, strict: boolean, breathe: () => Promise<void>, onBatch: (closed: number) => void, check: () => void, skipped: string[]): Promise<number> {
    const { dunning, dunningDue } = this;
    let n = 0;
    // `last`: the latest step so far (draft and cycle instants are only taken after it: a draft
    // that failed to finalize, or a cycle another transaction holds, is not stepped to again);
    // `retried`: the last retry instant run. `grace`: read with the first cycle due (the clock's environment).
    let grace: number | undefined;
    for (let last: Date | null = null, retried: Date | null = null; clockId !== null; ) {
      const retryAt = dunning && dunningDue ? await dunningDue.nextDue(retried, upTo, clockId, skipped) : null;
      const draftAt = await this.engine.stores.invoices.nextDraftDue(last, upTo, clockId);
      let closeAt: Date | null = null;
      // With dunning wired, each cycle end is a step too (grace 0: its first charge, at the close,
      // may fail and plan a retry before the next cycle ends, whose policy may end the subscription).
      if (grace !== 0 || dunning) {
        const [next] = await this.engine.stores.subscriptions.due(upTo, clockId, 1, strict, this.engine.now());
        if (next) grace ??= await this.engine.reads.graceSeconds(next.environmentId);
        if (next && (grace || dunning)) closeAt = new Date(next.periodEnd.getTime() + (grace ?? 0) * 1000);
      }
      // The next paused subscription due to resume after the last step (one whose resume failed is not stepped to again).
      const resuming = (await this.engine.stores.subscriptions.dueResumes(upTo, clockId, 50)).find((r) => !last || (r.resumesAt as Date) > last);
      // A resume at `upTo` too, unless strictly before it (a timeline's transition at that instant goes first).
      const resumeAt = resuming?.resumesAt && (!strict || resuming.resumesAt < upTo) ? resuming.resumesAt : null;
      const at = earliest([retryAt, ...[draftAt, closeAt].filter((x) => x && x < upTo && (!last || x > last)), resumeAt]);
      if (!at) break;
      const atStrictEnd = strict && at.getTime() === upTo.getTime();
      // At the same instant the resume first, as runDue orders them; but after a timeline's transition at `upTo` (strict).
      await this.pauses.resumeDue(atStrictEnd ? new Date(at.getTime() - 1) : at, clockId);
      n += await this.expireUpTo(at, clockId, breathe, onBatch);
      n += await this.engine.closeDue(at, clockId, 8, atStrictEnd, breathe, onBatch);
      await this.engine.finalizeDue(at, clockId, breathe);
      check();
      if (dunning && retryAt?.getTime() === at.getTime()) {
        await atClockTime(clockId, at, () => dunning.runDue(at, clockId, breathe, skipped));
        retried = at;
      }
      if (!last || at > last) last = at;
    }
    // Resumes not stepped to (beyond 50 failing ones): before the cycles that end after them, as before steps.
    if (clockId !== null && !strict) await this.pauses.resumeDue(upTo, clockId);
    n += await this.expireUpTo(upTo, clockId, breathe, onBatch);
    return n + (await this.engine.closeDue(upTo, clockId, 8, strict, breathe, onBatch));
  }

  /**
   * Runs everything due up to `now`, in time order: cycle closes before a timeline transition
   * at a later time; at the same instant the transition first (the new item's card then opens
   * the next cycle). Returns how many cycles it closed. Once `stop` is aborted (the server is
   * stopping), the run ends between two steps (never inside a transaction) with an
   * UnavailableError: what ran is whole, and a later run does the rest.
   */
  async runDue(now: Date, clockId: string | null, stop?: AbortSignal): Promise<number> {
    const breathe = yielder();
    let n = 0;
    const started = Date.now();
    const report = this.onProgress;
    const check = () => {
      if (stop?.aborted) throw new UnavailableError("SERVER_STOPPING", `the server is stopping: not everything due by ${now.toISOString()} has run (${n} cycles closed); run it again to finish`);
    };
    // After each batch of cycle closes, outside its transaction: a stop ends the run there.
    const onBatch = (closed: number) => {
      report?.({ clockId, closed: n + closed, startedAt: started, done: false });
      check();
    };
    const seen = new Set<string>();
    const skipped: string[] = [];
    // Usage thresholds of the periods as they are before anything closes (a jump past a period's
    // end must not skip that period's thresholds), and again after (the new periods).
    await this.thresholds?.check(clockId);
    try {
      for (;;) {
        await breathe();
        check();
        const keyOf = (t: Timeline) => `${t.id}@${t.nextTransitionAt?.getTime()}`;
        // The earliest due timeline not tried yet in this run (one that failed, or that another
        // runner holds, is not tried again until the next run).
        const timeline = (await this.engine.stores.timelines.due(now, clockId, 50)).find((t) => !seen.has(keyOf(t)));
        if (!timeline) break;
        seen.add(keyOf(timeline));
        n += await this.stepUpTo(timeline.nextTransitionAt as Date, clockId, true, breathe, onBatch, check, skipped);
        try {
          await this.timelines.transition(timeline);
        } catch (err) {
          // One timeline that cannot move on must not stop billing for everyone else.
          this.onTimelineError(timeline.id, err);
        }
        report?.({ clockId, closed: n, startedAt: started, done: false });
      }
      // Paused subscriptions due to resume start their new cycle at their resumes_at; cycles that
      // ended since (time jumped) close below. On a test clock each is a step of stepUpTo, after the retries due before it.
      check();
      if (clockId === null) await this.pauses.resumeDue(now, clockId);
      n += await this.stepUpTo(now, clockId, false, breathe, onBatch, check, skipped);
      // Drafts whose grace period ended (on a test clock, those due before its last closes were
      // finalized already, each at its time: stepUpTo), then late usage of subscriptions that ended (DESIGN §8).
      check();
      await this.engine.finalizeDue(now, clockId, breathe);
      await this.engine.billEndedLateUsage(clockId, breathe);
      // Failed payments whose retry is due (DESIGN §16), after the invoices they could be (on a
      // test clock, those due before its last closes ran already, each at its time: stepUpTo).
      check();
      await this.dunning?.runDue(now, clockId, breathe, skipped);
      if (clockId === null) for (const sweep of this.realTimeSweeps) await sweep.runDue(now);
      if (n > 0) await this.thresholds?.check(clockId);
      // Usage lowers available credit between invoices; closes, finalizations and expiries spent
      // or took it: every subject with credit or settings on the clock is evaluated.
      check();
      await this.credits?.evaluateDue(now, clockId);
    } finally {
      // Also when the run fails: its progress lines end.
      report?.({ clockId, closed: n, startedAt: started, done: true });
    }
    return n;
  }

  /**
   * runDue for a test clock's advance, until no cycle due by `now` is left on it: a subscription
   * another transaction holds meanwhile (a change through the API, a second advance) is skipped by
   * the close (SKIP LOCKED), so the run is made again once it is let go, every HELD_RETRY_MS for at
   * most `waitMs`. False: some are still held (the clock stays `advancing`; finishAdvances or
   * the next advance closes them). Set-aside subscriptions (their close failed) are not waited for.
   */
  async runClockDue(now: Date, clockId: string, stop?: AbortSignal, waitMs = HELD_WAIT_MS): Promise<boolean> {
    // The wait counts from the last progress (ours, or another runner's, such as the scheduler
    // taking over a long advance whose lease ran out), not from the start: a long advance is not
    // given up on because closing it took longer than waitMs.
    let since = Date.now();
    let seen = "";
    for (;;) {
      const closed = await this.runDue(now, clockId, stop);
      const [next] = await this.engine.stores.subscriptions.due(now, clockId, 1, false, this.engine.now());
      // A timeline's move that failed in the run holds its subscription's cycle back (due() leaves
      // it out): not done either, tried again as a held cycle is.
      const [moving] = next ? [] : await this.engine.stores.timelines.due(now, clockId, 1);
      if (!next && !moving) return true;
      const key = next ? `${next.id}@${next.periodEnd.getTime()}` : `${moving?.id}@${moving?.nextTransitionAt?.getTime()}`;
      if (closed > 0 || key !== seen) since = Date.now();
      seen = key;
      if (Date.now() - since >= waitMs || stop?.aborted) return false;
      await new Promise((r) => setTimeout(r, HELD_RETRY_MS));
    }
  }

  /**
   * Finishes test clock advances cut short (the server that ran one died, or the database failed
   * under it): each clock `advancing` since more than `leaseMs` before `realNow`, oldest first, is
   * taken over (its lease renewed, so that one runner takes it per lease), run up to its time and
   * set `ready` (unless an advance moved it meanwhile). Safe with several runners (runDue is).
   */
  async finishAdvances(realNow: Date, leaseMs: number, limit = 20, stop?: AbortSignal): Promise<FinishedAdvances> {
    const clocks = this.engine.stores.clocks;
    const done: FinishedAdvances = { finished: [], failed: [] };
    for (const c of await clocks.stalled(new Date(realNow.getTime() - leaseMs), limit)) {
      if (stop?.aborted) break;
      if (!c.advanceStartedAt || !(await clocks.takeOver(c.environmentId, c.id, c.frozenTime, c.advanceStartedAt, realNow))) continue;
      try {
        // No wait here (the scheduler's tick goes on): a clock still held is taken over again after its renewed lease.
        if (!(await this.runClockDue(c.frozenTime, c.id, stop, 0))) continue;
        if (await clocks.finish(c.environmentId, c.id, c.frozenTime)) done.finished.push(c.id);
      } catch (err) {
        // Still `advancing`: taken over again once the renewed lease runs out.
        done.failed.push({ clockId: c.id, err });
      }
    }
    return done;
  }
}

/** What Scheduler.finishAdvances did: the clocks it finished, and those whose run failed. */
export interface FinishedAdvances {
  finished: string[];
  failed: { clockId: string; err: unknown }[];
}

/** A scheduler run's progress (the server logs a long one, and counts it as a sign of life). */
export interface RunProgress {
  clockId: string | null;
  closed: number;
  startedAt: number;
  done: boolean;
}

/** The earliest of these instants (nulls left out), or null. */
function earliest(instants: (Date | null)[]): Date | null {
  let min: Date | null = null;
  for (const d of instants) if (d && (!min || d < min)) min = d;
  return min;
}
