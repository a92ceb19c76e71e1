/**
 * Drafts: an invoice of a usage window stays a draft for its environment's grace period, so that
 * late usage of the window lands on it; it is shown as it would finalize now, and finalized
 * (usage recomputed, open, charged) when the grace period ends or an operator asks. Its fixed,
 * adjustment and proration lines stay as written, and so do the corrections of earlier periods'
 * true-ups that go with its adjustments (commitments.ts, trueUpCorrection).
 */
import { FailedPreconditionError } from "../errors.js";
import { ZERO, amountProblem, dec, formatDecimal } from "../money.js";
import { type Yielder, yielder } from "../yielding.js";
import type { EngineContext } from "./engine-context.js";
import { isTrueUpCorrection, resizedTrueUp } from "./commitments.js";
import { bookedPreview, finalizeOpen, previewBooking } from "./booking.js";
import { type InvoiceBuilder, storedLine } from "./invoice-building.js";
import { checkTransition, transitionEvents } from "./invoice-states.js";
import { retryingRaces } from "./races.js";
import type { Settlement } from "./settlement.js";
import { newInvoiceEvents } from "../events/types.js";
import { type Invoice, isInternal } from "./types.js";

/** Thrown to roll back a finalization whose draft another run finalized first. */
const NOT_MOVED = new Error("the draft was finalized meanwhile");

export class Drafts {
  constructor(
    private readonly ctx: EngineContext,
    private readonly builder: InvoiceBuilder,
    private readonly settlement: Settlement,
  ) {}

  /**
   * A draft as it would finalize now: its usage lines recomputed from the committed usage of its
   * window (late events of the period land on it), the other lines as written, and the credit
   * that would be applied (nothing is spent). Anything else is returned as stored.
   */
  async preview(inv: Invoice): Promise<Invoice> {
    if (inv.status !== "draft") return inv;
    return previewBooking(this.ctx.stores, await this.recompute(inv), this.finalizationTime(inv));
  }

  /**
   * A draft as its finalization would book it now (see preview) without its credit (nothing
   * read of grants): a "once" discount already in `spentOnce` is left out and its own are added
   * (booking.ts bookedPreview), so drafts booked in the order they finalize take one once.
   */
  async booked(inv: Invoice, spentOnce: Set<string>): Promise<Invoice> {
    if (inv.status !== "draft") return inv;
    return bookedPreview(this.ctx.stores, await this.recompute(inv), this.finalizationTime(inv), spentOnce);
  }

  /**
   * When a draft finalizes on its subscription's clock, as credit sees it (what is spendable
   * then): real time now; on a test clock its grace period's end when it is due (`dueAt`, the
   * clock's time of a finalizeDue run), else (a preview, an operator's early call) its creation.
   */
  private finalizationTime(inv: Invoice, dueAt?: Date): Date {
    if (inv.clockId === null) return this.ctx.now();
    if (dueAt && inv.finalizesAt && inv.finalizesAt.getTime() <= dueAt.getTime()) return inv.finalizesAt;
    return inv.createdAt;
  }

  /** A draft's lines recomputed (see preview), without credit. */
  private async recompute(inv: Invoice): Promise<Invoice> {
    if (inv.status !== "draft" || !inv.window) return inv;
    const usage = await this.builder.windowLines(inv.environmentId, inv.subjectId, inv.window);
    // A minimum commitment's true-up is sized again on the recomputed usage (commitments.ts).
    // A correction of an earlier period's true-up for late usage is kept as written, like the adjustments it goes with.
    const trueUp = inv.lines.filter((l) => l.kind === "commitment_true_up" && !isTrueUpCorrection(l)).flatMap((l) => resizedTrueUp(l, usage, inv.currency) ?? []);
    // Proration lines (credits) stay as written, last: the credit was sized on the lines kept here (proration.ts).
    const lines = [
      ...inv.lines.filter((l) => l.kind === "fixed" || l.kind === "charge"),
      ...usage.map(storedLine),
      ...trueUp.map(storedLine),
      // Late usage of earlier windows as written; the window's own usage-terms adjustments (no window of their own) are in `usage`.
      ...inv.lines.filter((l) => (l.kind === "adjustment" && l.windowInvoiceId !== null) || isTrueUpCorrection(l)),
      ...inv.lines.filter((l) => l.kind === "proration"),
    ];
    for (const l of lines) {
      const problem = amountProblem(dec(l.amount));
      if (problem) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the amount of invoice line "${l.description}" ${problem}`);
    }
    const sum = lines.reduce((acc, l) => acc.plus(dec(l.amount)), ZERO);
    const problem = amountProblem(sum);
    if (problem) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the invoice total ${problem}`);
    return { ...inv, lines, total: formatDecimal(sum) };
  }

  /**
   * Finalizes a draft: its usage lines recomputed one last time, then open, then charged. Once:
   * only the run that moves it out of draft writes it (another runner, or an operator's call,
   * finds it finalized). Returns the invoice as it ended up, or undefined when it was no longer a draft.
   */
  async finalizeDraft(draft: Invoice, dueAt?: Date): Promise<Invoice | undefined> {
    const finalize = checkTransition("draft", "open");
    const recomputed: Invoice = { ...(await this.recompute(draft)), status: finalize.to };
    const spentAt = this.finalizationTime(draft, dueAt);
    // Credit is spent in the transaction that makes it open; a run that finds it finalized
    // already rolls its spending back (NOT_MOVED). A grant that changed under it: tried again.
    const final = await retryingRaces(() =>
      this.ctx.stores
        .transaction(async (tx) => {
          // The draft's row first: a second run finalizing it waits here, then finds it open,
          // rather than spending the grant on it too (its ledger's unique key then refused it).
          if (!(await tx.lockDraft(recomputed.environmentId, recomputed.id))) throw NOT_MOVED;
          // Finalized as it commits, after its lock waits (the draft, its grants, the number sequence: finalizeOpen).
          const credited = await finalizeOpen(tx, recomputed, spentAt, this.ctx.now);
          if (!(await tx.finalizeDraft(credited, credited.finalizedAt ?? this.ctx.now()))) throw NOT_MOVED;
          // A draft kept internal while it was empty is announced now that a line landed on it.
          await tx.emit(isInternal(draft) && !isInternal(credited) ? newInvoiceEvents(credited) : transitionEvents(finalize, [credited]));
          return credited;
        })
        .catch((err) => {
          if (err === NOT_MOVED) return undefined;
          throw err;
        }),
    );
    if (!final) return undefined;
    await this.settlement.settleMany([final]);
    return final;
  }

  /** Finalizes every draft whose grace period ended by `now` (on real time or one test clock); returns how many. */
  async finalizeDue(now: Date, clockId: string | null, breathe: Yielder = yielder()): Promise<number> {
    let n = 0;
    const failed = new Set<string>();
    for (;;) {
      await breathe();
      const due = (await this.ctx.stores.invoices.dueDrafts(now, clockId, 100)).filter((i) => !failed.has(i.id));
      if (due.length === 0) return n;
      for (const inv of due) {
        try {
          if (await this.finalizeDraft(inv, now)) n++;
        } catch (err) {
          // It stays a draft and is tried again on the next run; the others go on.
          failed.add(inv.id);
          this.ctx.events.finalizeFailed?.(inv.id, err);
        }
      }
    }
  }
}
