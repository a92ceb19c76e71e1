/**
 * Cycle close (DESIGN §8): at the end of each cycle a subscription is billed the usage of the
 * period that ended and, unless it cancels then, the fixed charges of the period that starts;
 * written once per (subscription, period), since the unique key makes a repeated or concurrent
 * run unable to bill twice. A subscription whose close fails is set aside and retried later.
 */
import { AbortedError, AlreadyExistsError, BillingError, UnavailableError } from "../errors.js";
import { StorageUnavailableError } from "../storage-errors.js";
import { newInvoiceEvents, subscriptionEvent } from "../events/types.js";
import { cycleBounds } from "../invoicing/cycles.js";
import { type Yielder, yielder } from "../yielding.js";
import type { EngineContext } from "./engine-context.js";
import { commitmentAfterClose, commitmentTrueUp } from "./commitments.js";
import { finalizeAllOpen } from "./booking.js";
import { retryingRaces } from "./races.js";
import { grantProrationCredits, keyedFixedLines } from "./credit-application.js";
import { type BillLine, type InvoiceBuilder, cycleKey } from "./invoice-building.js";
import { type LateUsage, type WindowsOf, sameCheck } from "./late-usage.js";
import { sameEntries, withCredits } from "./proration.js";
import type { BillingReads } from "./reads.js";
import type { Settlement } from "./settlement.js";
import type { BillingFailure, Invoice, ProrationCredit, Subscription, UsageCheck } from "./types.js";

/**
 * How long a subscription whose cycle close failed is set aside before the next try, after
 * `attempts` failures: 30 s, doubling, at most 1 hour, each with up to 20% jitter so that many
 * subscriptions that failed together are not retried together.
 */
export function retryDelayMs(attempts: number, random = Math.random()): number {
  const base = Math.min(30_000 * 2 ** Math.max(0, attempts - 1), 3_600_000);
  return Math.round(base * (1 + 0.2 * random));
}

/**
 * What is kept and shown of an error that failed a cycle close: a billing rule's message; for
 * anything unexpected only that it was (the cause, which may be a driver's text, is logged).
 */
function failureMessage(err: unknown, at: Date): string {
  if (err instanceof BillingError) return err.message;
  return `internal error at ${at.toISOString()}; the server log has the cause`;
}

/**
 * The database failing, or the server stopping: not the subscription's fault, so nothing is set
 * aside; the run stops and is made again (a clock's advance answers unavailable and stays advancing).
 */
const isOutage = (err: unknown): boolean => err instanceof StorageUnavailableError || err instanceof UnavailableError;

/** A cycle close's outcome: how many cycles it closed and how many subscriptions it set aside. */
interface CloseOutcome {
  closed: number;
  setAside: number;
}

/** Where a close puts the settlement of the invoices it wrote when its caller runs it later (closeDue); without one, the close settles them itself. */
type Settling = (() => Promise<void>)[];

export class CycleClose {
  constructor(
    private readonly ctx: EngineContext,
    private readonly reads: BillingReads,
    private readonly builder: InvoiceBuilder,
    private readonly lateUsage: LateUsage,
    private readonly settlement: Settlement,
  ) {}

  /**
   * The invoice that closes a subscription's current cycle, computed from committed usage: the
   * next period's fixed charges, the usage of the period that ended (a draft for the grace
   * period), and adjustments for late usage of earlier, finalized periods; with the
   * reconciliation state to keep.
   */
  private async closingInvoice(s: Subscription, windows?: WindowsOf): Promise<{ invoice: Invoice; check: UsageCheck | null }> {
    const late = await this.lateUsage.adjustments(s, windows);
    const card = await this.reads.card(s.environmentId, s.rateCardId);
    const rates = await this.reads.rates(card, s.fixedRateQuantities);
    const usageLines = await this.builder.usageLinesOf(card, rates.usage, s, s.usageSince, s.periodEnd);
    const next = cycleBounds(s.anchor, s.cycleIndex + 1, card.billingInterval);
    const fixed = s.cancelsAtEndOfCycle ? [] : keyedFixedLines(this.builder, rates.fixed, s);
    const terms = await this.builder.windowTerms(s, s.usageSince, s.periodEnd, s.periodEnd);
    const trueUp = await this.trueUp(s, usageLines, late.lines, card.currency ?? "USD");
    const invoice = this.builder.newInvoice(
      s,
      card,
      cycleKey(s, s.cycleIndex + 1),
      [...fixed, ...usageLines, ...trueUp, ...late.lines],
      s.periodEnd,
      s.cancelsAtEndOfCycle ? s.periodEnd : next.end,
      s.periodEnd,
      terms,
    );
    return { invoice, check: late.check };
  }

  /** The period's `commitment_true_up` line, if its charges fall below the subscription's minimum commitment (commitments.ts). */
  private trueUp(s: Subscription, usageLines: BillLine[], late: BillLine[], currency: string): Promise<BillLine[]> {
    return commitmentTrueUp(this.ctx.stores.invoices, s, usageLines, currency, s.periodEnd, late);
  }

  /** The subscription after its cycle closed: the next cycle, or cancelled (with the proration credits its invoice left). */
  private async afterClose(s: Subscription, check: UsageCheck | null, carried: Subscription["prorationCredits"]): Promise<Subscription> {
    if (s.cancelsAtEndOfCycle)
      return { ...s, status: "cancelled", cancelledAt: s.periodEnd, billingFailure: null, usageCheck: check, prorationCredits: carried, chargedTerms: null, usageAdjustments: null };
    // A minimum commitment asked for during the period takes effect with the next one.
    const commitment = commitmentAfterClose(s.commitment);
    const card = await this.reads.card(s.environmentId, s.rateCardId);
    const next = cycleBounds(s.anchor, s.cycleIndex + 1, card.billingInterval);
    // The next period's fixed charges are billed at the row's terms (closingInvoice): chargedTerms null.
    return {
      ...s,
      cycleIndex: s.cycleIndex + 1,
      periodStart: next.start,
      periodEnd: next.end,
      usageSince: next.start,
      // A new cycle's window starts afresh: first-seen anchors never cross a cycle's start (first-seen.ts).
      firstSeen: null,
      // Its usage-terms adjustments were billed with the window (InvoiceBuilder.usageLinesOf).
      usageAdjustments: null,
      billingFailure: null,
      usageCheck: check,
      prorationCredits: carried,
      commitment,
      chargedTerms: null,
    };
  }

  /**
   * Closes the current cycle of due subscriptions: for each, usage of the period that ended
   * plus, unless it cancels now, the fixed charges of the period that starts. All of a batch is
   * written in one transaction that locks the subscription rows and re-checks each one (a row
   * another runner holds is skipped; a row that moved on is left alone), and the invoice's
   * (subscription, period) key is unique — so repeated or concurrent runs cannot bill twice.
   * A subscription whose close fails for any reason is set aside (see setAside) and the others
   * go on. Returns how many cycles it closed.
   */
  async closeCycles(snapshots: Subscription[], concurrency = 8): Promise<number> {
    return (await this.closeBatch(snapshots, concurrency)).closed;
  }

  /**
   * closeBatchOf for each environment of `snapshots`: one environment per transaction, none spans
   * two (environment_id is the sharding key). `settling`: see Settling.
   */
  private async closeBatch(snapshots: Subscription[], concurrency: number, breathe: Yielder = yielder(), settling?: Settling): Promise<CloseOutcome> {
    const outcome = { closed: 0, setAside: 0 };
    for (const environmentId of new Set(snapshots.map((s) => s.environmentId))) {
      const one = await this.closeBatchOf(
        environmentId,
        snapshots.filter((s) => s.environmentId === environmentId),
        concurrency,
        breathe,
        settling,
      );
      outcome.closed += one.closed;
      outcome.setAside += one.setAside;
    }
    return outcome;
  }

  /** Closes the cycles of `snapshots`, all of environment `environmentId`, in one transaction (see closeCycles). */
  private async closeBatchOf(environmentId: string, snapshots: Subscription[], concurrency: number, breathe: Yielder, settling?: Settling): Promise<CloseOutcome> {
    const invoices = new Map<string, Invoice>();
    const checks = new Map<string, UsageCheck | null>();
    const computed: Subscription[] = [];
    let setAside = 0;
    let next = 0;
    // The batch's finalized usage windows in one read (each subscription's late-usage check needs its own).
    const windows = await this.ctx.stores.invoices.windowsOf(
      snapshots.map((s) => s.id),
      environmentId,
    );
    await Promise.all(
      Array.from({ length: Math.min(concurrency, snapshots.length) }, async () => {
        while (next < snapshots.length) {
          const s = snapshots[next++] as Subscription;
          await breathe(); // between reads, outside any transaction
          try {
            const { invoice, check } = await this.closingInvoice(s, windows.get(s.id) ?? []);
            invoices.set(s.id, invoice);
            checks.set(s.id, check);
            computed.push(s);
          } catch (err) {
            if (isOutage(err)) throw err;
            await this.setAside(s, err);
            setAside++;
          }
        }
      }),
    );
    if (computed.length === 0) return { closed: 0, setAside };
    const byId = new Map(computed.map((s) => [s.id, s]));
    let written: Invoice[] = [];
    let closed = 0;
    try {
      // A deadlock or lock wait (AbortedError) is tried again from the locking read, a few times,
      // so that a clock advance does not leave the period unclosed for lack of progress.
      [written, closed] = await retryingRaces(() =>
        this.ctx.stores.transaction(async (tx) => {
          const locked = await tx.lockSubscriptions(
            computed.map((s) => s.id),
            environmentId,
          );
          const ready = locked.filter((s) => {
            const snap = byId.get(s.id) as Subscription;
            // Everything the invoice was computed from must be unchanged, including a cancellation
            // at the end of the cycle requested meanwhile (it drops the next period's fixed charges).
            return (
              s.status === "active" &&
              s.cycleIndex === snap.cycleIndex &&
              s.rateCardId === snap.rateCardId &&
              s.usageSince.getTime() === snap.usageSince.getTime() &&
              s.cancelsAtEndOfCycle === snap.cancelsAtEndOfCycle &&
              sameEntries(s.fixedRateQuantities, snap.fixedRateQuantities) &&
              sameEntries(s.rateMultipliers, snap.rateMultipliers) &&
              sameCheck(s.usageCheck, snap.usageCheck)
            );
          });
          // Proration credits carried on the locked row (the earlier rule) move to the subject's
          // balance and apply below like any credit; without a credit store they go onto the invoice.
          const credited = new Map<string, { invoice: Invoice; carried: ProrationCredit[] }>();
          for (const s of ready) {
            const inv = invoices.get(s.id) as Invoice;
            credited.set(s.id, await withCredits(tx, inv, await grantProrationCredits(tx, s, inv.currency, s.prorationCredits ?? [], s.periodEnd), s.periodEnd));
          }
          // Credit grants pay what they can of each invoice final at once (credit-application.ts).
          // Finalized as it commits (finalizeAllOpen stamps finalized_at after this transaction's lock waits).
          const out = await finalizeAllOpen(
            tx,
            ready.map((s) => credited.get(s.id)?.invoice as Invoice).filter((i) => i.lines.length > 0 || i.window !== null),
            this.ctx.now,
          );
          await tx.insertInvoices(out);
          const events = out.flatMap(newInvoiceEvents);
          const updated: Subscription[] = [];
          for (const s of ready) {
            const after = await this.afterClose(s, checks.get(s.id) ?? null, credited.get(s.id)?.carried ?? []);
            updated.push(after);
            if (after.status === "cancelled") events.push(subscriptionEvent("subscription.cancelled", after));
          }
          await tx.updateSubscriptions(updated);
          await tx.emit(events);
          return [out, ready.length] as const;
        }),
      );
    } catch (err) {
      if (isOutage(err)) throw err;
      if (computed.length === 1) {
        // Billed meanwhile by another runner: done by someone else. A deadlock or lock timeout
        // (AbortedError from the store) is not the subscription's fault: the next run retries it.
        if (err instanceof AlreadyExistsError || err instanceof AbortedError) return { closed: 0, setAside };
        await this.setAside(computed[0] as Subscription, err);
        return { closed: 0, setAside: setAside + 1 };
      }
      // One subscription's write failed (billed meanwhile, or a value the database refused):
      // close them one at a time, so that only that one is set aside.
      const outcome = { closed: 0, setAside };
      for (const s of computed) {
        const one = await this.closeBatch([s], 1, yielder(), settling);
        outcome.closed += one.closed;
        outcome.setAside += one.setAside;
      }
      return outcome;
    }
    const open = written.filter((i) => i.status === "open");
    if (settling) settling.push(() => this.settlement.settleMany(open));
    else await this.settlement.settleMany(open);
    return { closed, setAside };
  }

  /**
   * Sets a subscription whose cycle close failed aside: the error is kept on its row (and shown
   * on the subscription as `billing_failure`), the scheduler skips it until a backoff has passed
   * (real time), and nothing else waits for it. If even that cannot be written, the database is
   * the problem and the original error stops the run.
   */
  private async setAside(s: Subscription, err: unknown): Promise<void> {
    const attempts = (s.billingFailure?.attempts ?? 0) + 1;
    const at = this.ctx.now();
    const failure: BillingFailure = { message: failureMessage(err, at), attempts, failedAt: at, retryAt: new Date(at.getTime() + retryDelayMs(attempts)) };
    let recorded: boolean;
    try {
      recorded = await this.ctx.stores.subscriptions.setBillingFailure(s, failure);
    } catch {
      throw err;
    }
    // Not recorded: the row moved on meanwhile (another runner closed that cycle).
    if (recorded) this.ctx.events.setAside?.(s, failure, err);
  }

  /**
   * Closes every cycle due by `now` — on real time (clockId null) or on one test clock —
   * including several cycles of one subscription when time jumped; returns how many it closed.
   * `onBatch` is told the count closed so far after each batch (progress of a long catch-up).
   */
  async closeDue(now: Date, clockId: string | null, concurrency = 8, strict = false, breathe: Yielder = yielder(), onBatch?: (closed: number) => void): Promise<number> {
    let closed = 0;
    for (;;) {
      await breathe();
      // Subscriptions set aside (their close failed) are not due again until their retry time.
      const due = await this.ctx.stores.subscriptions.due(now, clockId, 500, strict, this.ctx.now());
      if (due.length === 0) return closed;
      let progress = 0;
      // A batch's invoices are settled (charged, marked paid) while the next batch closes: the two
      // wait on the database in turns. One settlement at a time, in batch order; all of them are
      // done before the next read of what is due (one subscription's next cycle comes after its
      // invoice was settled) and before this returns.
      let settling: Promise<void> = Promise.resolve();
      try {
        for (let k = 0; k < due.length; k += 100) {
          const settle: Settling = [];
          const outcome = await this.closeBatch(due.slice(k, k + 100), concurrency, breathe, settle);
          await settling;
          settling = (async () => {
            for (const fn of settle) await fn();
          })();
          settling.catch(() => {}); // awaited below: not unhandled while the next batch closes
          closed += outcome.closed;
          progress += outcome.closed + outcome.setAside;
          onBatch?.(closed);
        }
      } finally {
        await settling;
      }
      if (progress === 0) return closed; // another runner holds them; it will finish them
    }
  }
}
