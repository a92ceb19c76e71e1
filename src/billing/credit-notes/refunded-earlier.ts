/**
 * A keyed credit note whose refund the provider made in an earlier attempt of the request, for
 * another amount (DESIGN §12 with §15). The note's ID comes from its Idempotency-Key and what it
 * asks (keyedCreditNoteId), so a whole note retried after a 5xx whose refund went through, once
 * another note of the invoice committed, plans less than that refund (invoice paid 4,900, the
 * whole note refunded 4,900, a 1,000 balance note, the retry plans 3,900) under the same refund
 * key: the provider answers the refund it made under that key, with its amount. That refund is the
 * note: its attempt is rolled back and the call writes the note at the refund's amount, as a note
 * whose refund was made before it lost a race is written (create()'s kept refund: even beyond what
 * is left to credit, the invoice's amount credited then above its total; the money went back).
 */
import { FailedPreconditionError } from "../errors.js";
import { dec } from "../money.js";
import type { Invoice } from "../subscriptions/types.js";
import { type CreditPlan, creditableLines, planCredit } from "./arithmetic.js";
import type { RefundStatus } from "./types.js";

/** The provider's refund of a note as made: its ID and where it stands then. */
export type MadeRefund = { refundId: string; status: Exclude<RefundStatus, "failed"> };

/** Thrown out of a note's transaction (rolled back) when the provider answered a refund made earlier under its key for another amount. */
export class RefundedEarlier extends Error {
  constructor(readonly kept: { id: string; plan: CreditPlan; refund: MadeRefund }) {
    super(`credit note ${kept.id}'s refund ${kept.refund.refundId} was made earlier for ${kept.plan.total}`);
  }
}

/**
 * The note of a refund of `amount` made earlier under note `id`'s key: that amount spread over
 * the invoice's lines as an amount note on the invoice before any note (the earlier attempt's own
 * plan when it was the first note, as in a whole note's retry), never refused for what other
 * notes credited since.
 */
export function refundedEarlier(inv: Invoice, id: string, amount: string, refund: MadeRefund): RefundedEarlier {
  const plan = planCredit(creditableLines(inv.lines, []), dec(inv.total), { kind: "amount", amount: dec(amount) });
  if (Array.isArray(plan)) {
    throw new FailedPreconditionError(
      "REFUND_FAILED",
      `the payment provider answered refund ${refund.refundId} of ${amount} made earlier for credit note ${id}, which invoice ${inv.id} (total ${inv.total}) cannot record`,
      { invoice_id: inv.id },
    );
  }
  return new RefundedEarlier({ id, plan, refund });
}
