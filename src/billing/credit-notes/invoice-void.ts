/**
 * An open invoice voided takes its credit notes with it (DESIGN §15), in the void's transaction,
 * after the move (which holds the invoice's row, as a note's transaction does): otherwise the books
 * would reverse the invoice twice, by its notes and by its void (10000 invoiced, a note of 3000,
 * then voided: +10000 − 3000 − 10000 = −3000 where 0 is right). Only reduce_amount_due notes go:
 * they only lowered what the invoice asked, which the void cancels whole (the invoice's
 * amount_credited goes down by what they credited, and its amount_due goes back up by as much: a
 * void invoice of 10000 with a note of 3000 keeps amount_due 10000 and amount_credited 0, as one
 * voided without notes keeps total − credits applied). A note that refunded money or put credit on
 * the balance moved money the void does not give back: the void is refused (INVOICE_HAS_CREDIT_NOTES,
 * naming them) and nothing is written. Such a note needs a paid invoice, which is never voided, so
 * this is a guard. No `credit_note.voided` event: the events catalogue has none; `invoice.voided`
 * announces the void.
 */
import { FailedPreconditionError } from "../errors.js";
import { ZERO, dec, formatDecimal } from "../money.js";
import type { Invoice } from "../subscriptions/types.js";
import type { InvoiceVoidNoteWrites } from "./ports.js";
import type { CreditNote } from "./types.js";

/** The invoice's issued notes made void with it at `at` (as they are now); throws when one of them moved money. */
export async function voidNotesWithInvoice(tx: InvoiceVoidNoteWrites, inv: Pick<Invoice, "environmentId" | "id">, at: Date): Promise<CreditNote[]> {
  const issued = (await tx.ofInvoice(inv.environmentId, inv.id)).filter((n) => n.status === "issued");
  const moved = issued.filter((n) => n.outcome !== "reduce_amount_due");
  if (moved.length > 0) {
    const named = moved.map((n) => `${n.number} (${n.id}, ${n.outcome} ${n.total})`).join(", ");
    throw new FailedPreconditionError("INVOICE_HAS_CREDIT_NOTES", `invoice ${inv.id} cannot be voided: its credit notes ${named} gave money or credit back, which voiding it would not undo`, {
      invoice_id: inv.id,
      credit_note_ids: moved.map((n) => n.id).join(","),
    });
  }
  if (issued.length === 0) return [];
  const total = issued.reduce((a, n) => a.plus(dec(n.total)), ZERO);
  await tx.voidNotes(
    inv.environmentId,
    inv.id,
    issued.map((n) => n.id),
    formatDecimal(total),
    at,
  );
  return issued.map((n) => ({ ...n, status: "void", voidedAt: at }));
}
