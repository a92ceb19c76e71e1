/**
 * A refund of a credit purchase takes back the credit it refunds (DESIGN §14, §15), as Stripe,
 * Lago and Orb void the credits of a refunded credit purchase: a credit note with outcome
 * `refund` on a paid purchase invoice lowers its grant's remaining by the note's total, with a
 * "void" ledger entry of −total on the purchase's invoice (`invoice_id`), its description naming
 * the note by number ("Refunded by credit note CN-000001"; each partial refund has its own entry),
 * in the note's transaction. Only credit still unspent can be taken back, checked under the
 * grant's lock before the provider refunds anything: a refund beyond the grant's remaining
 * (credit already spent on invoices, expired or voided) is refused with CREDIT_ALREADY_SPENT,
 * naming the amount's field and what is left, and nothing is written or refunded. The credit is
 * taken back once the note has its number (the grant stays locked meanwhile). A grant left at 0
 * becomes voided (`credit_grant.voided`).
 */
import { AbortedError, InvalidArgumentError } from "../errors.js";
import { purchasedGrantId } from "../credits/purchase-states.js";
import { type NewEvent, creditGrantEvent } from "../events/types.js";
import { dec, formatDecimal } from "../money.js";
import type { Invoice } from "../subscriptions/types.js";
import type { CreditPlan } from "./arithmetic.js";
import type { CreditNoteTx } from "./ports.js";
import type { CreditNote } from "./types.js";
import type { CheckedCreditNote } from "./validation.js";

/** The request's field that asked for the amount: `amount` (the whole invoice or an amount), or the purchase line's `lines[k].amount`. */
function amountField(c: CheckedCreditNote): string {
  if (c.ask.kind === "amount") return "amount";
  // A purchase invoice has one line (index 0): the entry that names it.
  const k = Math.max(
    0,
    c.ask.lines.findIndex((l) => l.index === 0),
  );
  return `lines[${k}].amount`;
}

/** The credit a purchase's refund takes back: from grant `grantId`, `amount` (the note's total, or what was left of it). */
export interface TakeBack {
  grantId: string;
  amount: string;
}

/**
 * Checks that a refund note of `plan` can take back the credit it refunds when `inv` is a credit
 * purchase's invoice, in the note's transaction, which holds the invoice's row lock; the grant is
 * locked here until the transaction ends. Returns what to take back (undefined: not a purchase,
 * or nothing left to take); throws CREDIT_ALREADY_SPENT beyond what is unspent. `refunded`: the
 * provider made this refund already (an earlier attempt of the call that lost its race after it),
 * so nothing is refused: the credit still unspent is taken back, up to the note's total, and the
 * note records the refund made (the credit spent meanwhile stays spent).
 */
export async function checkTakeBack(tx: CreditNoteTx, c: CheckedCreditNote, inv: Invoice, plan: CreditPlan, refunded = false): Promise<TakeBack | undefined> {
  const grantId = purchasedGrantId(inv);
  if (grantId === undefined) return undefined;
  const g = await tx.lockGrant(inv.environmentId, grantId);
  const unspent = g?.status === "active" ? dec(g.remaining) : dec(0);
  if (refunded) {
    const amount = dec(plan.total).lt(unspent) ? dec(plan.total) : unspent;
    return amount.isZero() ? undefined : { grantId, amount: formatDecimal(amount) };
  }
  if (dec(plan.total).gt(unspent)) {
    const left = formatDecimal(unspent);
    const why = g && g.status !== "active" && g.status !== "depleted" ? `credit grant ${grantId} is ${g.status}` : `${left} of credit grant ${grantId}'s ${g?.amount ?? plan.total} is unspent`;
    throw new InvalidArgumentError(
      [
        {
          field: amountField(c),
          description: `is more than the credit still unspent (${left}): ${why}; a refund of a credit purchase takes its credit back, so at most the unspent part can be refunded`,
        },
      ],
      "CREDIT_ALREADY_SPENT",
    );
  }
  return { grantId, amount: plan.total };
}

/**
 * Takes back `what` (checked by checkTakeBack in the same transaction): a "void" ledger entry on
 * the purchase's invoice naming the note. Returns the events to emit with the note.
 */
export async function takeBackPurchased(tx: CreditNoteTx, what: TakeBack, note: Pick<CreditNote, "id" | "number" | "environmentId" | "invoiceId">, at: Date): Promise<NewEvent[]> {
  const { grantId, amount } = what;
  const entry = { invoiceId: note.invoiceId, creditNoteId: note.id, description: `Refunded by credit note ${note.number}` };
  const after = await tx.takeBack(note.environmentId, grantId, amount, entry, at);
  // Under the grant's lock it still has that much: only a store that lost the lock gets here.
  if (!after) throw new AbortedError("TRANSACTION_CONFLICT", `credit grant ${grantId} changed while its credit was being taken back; try again`);
  return after.status === "voided" ? [creditGrantEvent("credit_grant.voided", after)] : [];
}
