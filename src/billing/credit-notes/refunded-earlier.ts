/**
 * A keyed credit note whose refund the provider made in an earlier attempt of the request (DESIGN
 * §12 with §15). The note's ID comes from its Idempotency-Key and what it asks (keyedCreditNoteId),
 * and its refund's key from that ID, so the retry of a call whose refund went through but whose
 * answer was lost (a 5xx, nothing written) is that refund. The invoice may have changed between the
 * attempts: another note committed (a 2,000 refund of an invoice paid 4,900 failed so, then a 3,500
 * balance note left 1,400 to credit), or a credit purchase's credit was spent (10,000 bought, the
 * whole refunded, then a close spent 8,000 of it). Planned as now, the retry would be refused
 * (CREDIT_EXCEEDS_INVOICE, CREDIT_ALREADY_SPENT) before it reached the provider, leaving a refund
 * that no note records while the rest stays creditable. So before a keyed refund note is planned,
 * the provider is asked, read-only, for a refund made under its key (madeUnderKey): one there is
 * the note, written as create()'s kept refund is (never refused for what was credited or spent
 * since, the invoice's amount credited then above its total: the money went back; a purchase's
 * credit still unspent taken back), and the provider is not asked to refund again. A provider that
 * cannot be asked answers such a refund when asked to refund with the key: if its amount is not the
 * plan's, the attempt rolls back (RefundedEarlier) and the note is written at that amount.
 */
import { FailedPreconditionError } from "../errors.js";
import { dec } from "../money.js";
import { type Invoice, type PaymentProvider, chargeKey } from "../subscriptions/types.js";
import { type CreditAsk, type CreditPlan, creditableLines, planCredit } from "./arithmetic.js";
import type { RefundStatus } from "./types.js";

/** The provider's refund of a note as made: its ID and where it stands then. */
export type MadeRefund = { refundId: string; status: Exclude<RefundStatus, "failed"> };

/** A note whose refund was made: its ID, its plan and that refund (create() writes it as it is). */
export type KeptRefund = { id: string; plan: CreditPlan; refund: MadeRefund };

/** The provider's idempotency key of a credit note's refund. */
export const refundKey = (creditNoteId: string): string => `${creditNoteId}:refund`;

/** The key of the charge that paid `inv`: its last attempt's (dunning may have taken several). */
export const paidBy = (inv: Invoice): string => chargeKey(inv.id, Math.max(inv.attemptCount ?? 1, 1));

/** Thrown out of a note's transaction (rolled back) when the provider answered a refund made earlier under its key for another amount. */
export class RefundedEarlier extends Error {
  constructor(readonly kept: KeptRefund) {
    super(`credit note ${kept.id}'s refund ${kept.refund.refundId} was made earlier for ${kept.plan.total}`);
  }
}

/**
 * The note of a refund of `amount` made earlier under note `id`'s key, on the invoice as before any
 * note (as the earlier attempt planned it when it was the first): what the request asks (`ask`)
 * when that comes to `amount`, else `amount` spread over the invoice's lines. Never refused for
 * what other notes credited since.
 */
export function refundedEarlier(inv: Invoice, id: string, amount: string, refund: MadeRefund, ask?: CreditAsk): RefundedEarlier {
  const lines = creditableLines(inv.lines, []);
  const asked = ask === undefined ? undefined : planCredit(lines, dec(inv.total), ask);
  const plan = asked !== undefined && !Array.isArray(asked) && dec(asked.total).eq(dec(amount)) ? asked : planCredit(lines, dec(inv.total), { kind: "amount", amount: dec(amount) });
  if (Array.isArray(plan)) {
    throw new FailedPreconditionError(
      "REFUND_FAILED",
      `the payment provider answered refund ${refund.refundId} of ${amount} made earlier for credit note ${id}, which invoice ${inv.id} (total ${inv.total}) cannot record`,
      { invoice_id: inv.id },
    );
  }
  return new RefundedEarlier({ id, plan, refund });
}

/**
 * The refund the provider made already under keyed note `id`'s refund key (asked before the note is
 * planned, nothing refunded), as the note to write (create()'s kept refund); undefined when it made
 * none, or cannot be asked (the refund call then answers it, as refundedEarlier).
 */
export async function madeUnderKey(provider: PaymentProvider, inv: Invoice, id: string, ask: CreditAsk): Promise<KeptRefund | undefined> {
  const made = await provider.refundMade?.(paidBy(inv), refundKey(id), { reference: inv.payment?.reference ?? null, creditNoteId: id });
  if (!made) return undefined;
  return refundedEarlier(inv, id, made.amount, { refundId: made.refundId, status: made.pending === true ? "pending" : "succeeded" }, ask).kept;
}
