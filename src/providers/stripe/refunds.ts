/**
 * Stripe refunds of a PaymentIntent (DESIGN §15, §16; provider.ts refund): each names what it is
 * for (metadata), a credit note's or an invoice's payment's (after_end, excess), and is made with
 * an idempotency key. Stripe replays a key for 24 hours only; a refund whose answer was lost is
 * found among the PaymentIntent's refunds by what it names, never made twice.
 */
import Stripe from "stripe";
import type { RefundContext, RefundOutcome } from "../../billing/payments/types.js";
import { fromStripeAmount } from "./amounts.js";

/** A refund as Stripe holds it: made (pending until it settles), or refused when failed or canceled. */
export function outcomeOfRefund(r: Stripe.Refund, currency: string): RefundOutcome {
  if (r.status === "failed" || r.status === "canceled") return { ok: false, message: `Stripe refused the refund (${r.status}).`, refundId: r.id };
  // Pending (or requires_action): made, the money not back yet; its refund.updated / refund.failed tells how it ends.
  return { ok: true, refundId: r.id, amount: fromStripeAmount(r.amount, r.currency || currency), ...(r.status === "succeeded" ? {} : { pending: true }) };
}

/** The refund of PaymentIntent `intent` of environment `env` whose metadata `names` says is the one, if Stripe made one. */
async function refundWhere(stripe: Stripe, env: string, intent: string, names: (m: Stripe.Metadata) => boolean): Promise<Stripe.Refund | undefined> {
  for await (const r of stripe.refunds.list({ payment_intent: intent, limit: 100 })) {
    if (r.metadata?.environment_id === env && names(r.metadata)) return r;
  }
  return undefined;
}

/** The refund of PaymentIntent `intent` that names credit note `creditNoteId` of environment `env` (its metadata), if Stripe made one. */
export const refundNaming = (stripe: Stripe, env: string, intent: string, creditNoteId: string) => refundWhere(stripe, env, intent, (m) => m.credit_note_id === creditNoteId);

/**
 * The refund of an invoice's payment (`named`: after_end, excess) made with idempotency key `key`
 * (its metadata refund_key; one made before refunds carried it, by its invoice and kind, one per
 * payment), if Stripe made one: asked before every such refund, since one whose answer was lost is
 * asked again when the provider's webhook comes again or the sweep runs, days later maybe, and
 * Stripe replays a key for 24 hours only.
 */
function refundUnderKey(stripe: Stripe, env: string, intent: string, key: string, named: { invoiceId: string; kind: string }): Promise<Stripe.Refund | undefined> {
  return refundWhere(stripe, env, intent, (m) => m.refund_key === key || (m.refund_key === undefined && m.invoice_id === named.invoiceId && m.refund_kind === named.kind));
}

/**
 * A lookup Stripe refused (a PaymentIntent it does not know or this key cannot see): no refund
 * can have been made of it, so the refund is asked and answered as Stripe answers it (refused:
 * recorded with a warning to refund by hand), not retried forever. What Stripe could not answer
 * (a connection error, a 5xx) throws, to be asked again.
 */
function noneWhenRefused(err: unknown): undefined {
  if (err instanceof Stripe.errors.StripeInvalidRequestError) return undefined;
  throw err;
}

/**
 * The credit note's refund Stripe refused as its key reused with another amount (the note asked
 * again after what is left of its invoice changed, an earlier request's answer lost): that request
 * reached Stripe and made the note's refund, found among the PaymentIntent's refunds by the note
 * it names (metadata.credit_note_id), and answered with its own amount, never a refusal. None
 * found: `err` is thrown.
 */
async function refundedEarlier(stripe: Stripe, env: string, intent: string, creditNoteId: string, currency: string, err: unknown): Promise<RefundOutcome> {
  const r = await refundNaming(stripe, env, intent, creditNoteId);
  if (!r) throw err;
  return outcomeOfRefund(r, currency);
}

/**
 * What a refund names (its metadata): a credit note's, its note and environment (its events wait for
 * the note, credit-notes/refund-status.ts); another refund of an invoice's payment, the environment,
 * the invoice and why (after_end, excess), so that its failure is found (payments/refund-failures.ts).
 */
function refundNames(env: string, key: string, context: RefundContext | undefined): Stripe.MetadataParam | undefined {
  if (context?.creditNoteId) return { credit_note_id: context.creditNoteId, environment_id: env };
  const named = context?.invoiceRefund;
  return named && { environment_id: env, invoice_id: named.invoiceId, refund_kind: named.kind, refund_key: key };
}

/**
 * Refunds `asked` (Stripe's units; undefined: what is left) of PaymentIntent `intent` with
 * `idempotencyKey`. An invoice's refund made already under that key (refundUnderKey) is the
 * answer, asked before each such refund. Stripe's refusal (more than was charged, a charge already
 * refunded) is an answer; what Stripe could not answer throws.
 */
export async function refundIntent(stripe: Stripe, env: string, intent: string, asked: number | undefined, currency: string, idempotencyKey: string, context?: RefundContext): Promise<RefundOutcome> {
  const named = context?.invoiceRefund;
  const made = named ? await refundUnderKey(stripe, env, intent, idempotencyKey, named).catch(noneWhenRefused) : undefined;
  if (made) return outcomeOfRefund(made, currency);
  try {
    // No amount: Stripe refunds what is left of the PaymentIntent.
    const names = refundNames(env, idempotencyKey, context);
    const metadata = names ? { metadata: names } : {};
    const r = await stripe.refunds.create({ payment_intent: intent, ...(asked === undefined ? {} : { amount: asked }), ...metadata }, { idempotencyKey });
    return outcomeOfRefund(r, currency);
  } catch (err) {
    // The key reused with another amount: the refund made under it is the answer (its amount; credit-notes.ts writes the note at it).
    if (err instanceof Stripe.errors.StripeIdempotencyError && context?.creditNoteId) return refundedEarlier(stripe, env, intent, context.creditNoteId, currency, err);
    // Refused by Stripe (more than was charged, a charge already refunded): an answer, not a failure.
    if (err instanceof Stripe.errors.StripeInvalidRequestError) return { ok: false, message: err.message };
    throw err;
  }
}
