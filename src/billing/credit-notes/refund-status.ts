/**
 * Where a refund note's refund stands (DESIGN §15, §16). A provider may make a refund and settle
 * it later: Stripe answers a refund `pending` and tells days later, by webhook, that it succeeded
 * or failed (a closed card, say). The note keeps it in `refundStatus`: set from the provider's
 * answer when it is issued, then moved by the provider's refund events, found by the refund's ID
 * within the environment the event came in on.
 *
 * Each provider event is recorded in the same transaction as its effect (a repeat changes
 * nothing). The refund is made inside its note's transaction, before the note's row is written: an
 * event that comes meanwhile (or while a retry of that transaction runs) finds no note of that
 * refund. One whose refund names its note (Stripe: metadata.credit_note_id) is then "early":
 * nothing recorded, and the provider is answered so that it delivers the event again later, when
 * the note is there. A refund naming no note (a payment refunded after its invoice ended, an
 * excess) has none to wait for: its event is recorded, "unknown". The status only moves forward,
 * so events may arrive in any order: pending to succeeded or failed, succeeded to failed (Stripe
 * may fail a refund it reported succeeded), never back to pending and never out of failed. A refund that fails emits `credit_note.refund_failed` with the
 * note, once. The note stays issued and nothing is undone: the money did not go back, and the
 * operator decides how to pay it back (by other means: a bank transfer, say).
 */
import type { NewEvent } from "../events/types.js";
import type { ProviderEventRef } from "../payments/event-writes.js";
import type { RefundUpdate, RefundUpdated } from "../payments/types.js";
import type { CreditNoteStore } from "./ports.js";
import type { CreditNote, RefundStatus } from "./types.js";

const RANK: Record<RefundStatus, number> = { pending: 0, succeeded: 1, failed: 2 };

/** Whether a refund in status `from` moves to `to`: only forward (pending < succeeded < failed). */
export function refundMoves(from: RefundStatus | null, to: RefundStatus): boolean {
  return RANK[to] > RANK[from ?? "pending"];
}

export const refundFailedEvent = (note: CreditNote): NewEvent => ({ type: "credit_note.refund_failed", environmentId: note.environmentId, resource: { kind: "credit_note", creditNote: note } });

/** Records `event` and moves the refund note of `update.refundId` in `environmentId` forward to its status (see the file's comment). */
export function refundUpdated(store: CreditNoteStore, environmentId: string, update: RefundUpdate, event: ProviderEventRef, now: Date): Promise<RefundUpdated> {
  return store.transaction(async (tx): Promise<RefundUpdated> => {
    const note = await tx.lockByRefund(environmentId, update.refundId);
    if (!note && update.creditNoteId) return { outcome: "early", creditNoteId: update.creditNoteId };
    if (tx.providerEvents && !(await tx.providerEvents.recordProviderEvent(environmentId, event, now))) return { outcome: "repeat" };
    if (note?.outcome !== "refund") return { outcome: "unknown" };
    if (!refundMoves(note.refundStatus, update.status)) return { outcome: "unchanged", creditNoteId: note.id };
    const failureReason = update.status === "failed" ? (update.failureReason ?? "unknown") : null;
    await tx.setRefundStatus(environmentId, note.id, update.status, failureReason);
    const moved: CreditNote = { ...note, refundStatus: update.status, refundFailureReason: failureReason };
    if (update.status === "failed") await tx.emit([refundFailedEvent(moved)]);
    return { outcome: update.status, creditNoteId: note.id };
  });
}
