/**
 * A card charged off-session with an attempt's key (DESIGN §12, §16; provider.ts charge), and what
 * was made under that key before, its answer lost (the process died, Stripe timed out). Stripe
 * replays a key for 24 hours only, and refuses one sent again with other parameters: a charge that
 * may re-send a key (ChargeContext.sentBefore), or that Stripe refuses so, looks for the
 * PaymentIntents made for the attempt (metadata.charge_key) first. One that took the money, or may
 * still (processing), is the answer, as is one made to this card (the same request sent again).
 * One made to another card that did not take the money (declined, or waiting for an authentication
 * the customer was never asked for) is no answer for this card, saved since (the portal): this
 * card is charged, once, under a key of its own (cardKey), found the same way if its answer is lost.
 */
import Stripe from "stripe";
import type { ChargeOutcome } from "../../billing/payments/types.js";
import { outcomeOfError, outcomeOfIntent } from "./outcomes.js";

/** A charge to make: the card and its customer, Stripe's amount, and what names it. */
export interface ChargeRequest {
  card: string;
  customer: string;
  amount: number;
  currency: string;
  env: string;
  invoiceId: string;
  /** The attempt's key (chargeKey in subscriptions/types.ts). */
  attemptKey: string;
  description?: string;
}

/** The key of a charge of attempt `attemptKey` to card `card`, after another card's under the attempt's key took nothing. */
const cardKey = (attemptKey: string, card: string) => `${attemptKey}:card-${card}`;

/** The card a PaymentIntent was made with: its payment_method, or the one its last error names (Stripe removes a declined card from it). */
function cardOf(pi: Stripe.PaymentIntent): string | undefined {
  const pm = pi.payment_method ?? pi.last_payment_error?.payment_method ?? null;
  return typeof pm === "string" ? pm : (pm?.id ?? undefined);
}

/** The PaymentIntents of `customer` made for attempt `attemptKey` (metadata.charge_key): under its key, or a card's key (cardKey). */
export async function intentsOfAttempt(stripe: Stripe, customer: string, attemptKey: string): Promise<Stripe.PaymentIntent[]> {
  const made: Stripe.PaymentIntent[] = [];
  for await (const pi of stripe.paymentIntents.list({ customer, limit: 100 })) {
    const key = pi.metadata?.charge_key;
    if (key === attemptKey || key?.startsWith(`${attemptKey}:card-`)) made.push(pi);
  }
  return made;
}

/**
 * What the PaymentIntents `made` for attempt `attemptKey` say of charging `card` now: the answer
 * (one succeeded, one processing, else one made to this card or to a card not known), or the key
 * to charge it with (the attempt's when nothing was made, else the card's own).
 */
function answerOf(made: Stripe.PaymentIntent[], card: string, attemptKey: string): { answer: Stripe.PaymentIntent } | { key: string } {
  const answer =
    made.find((pi) => pi.status === "succeeded") ??
    made.find((pi) => pi.status === "processing") ??
    made.find((pi) => {
      const used = cardOf(pi);
      return used === undefined || used === card;
    });
  if (answer) return { answer };
  return { key: made.length === 0 ? attemptKey : cardKey(attemptKey, card) };
}

/** The charge `r` (see the file's comment); `sentBefore`: its key may have been sent before, looked for first. */
export async function chargeCard(stripe: Stripe, r: ChargeRequest, sentBefore: boolean): Promise<ChargeOutcome> {
  const first = sentBefore ? answerOf(await intentsOfAttempt(stripe, r.customer, r.attemptKey), r.card, r.attemptKey) : { key: r.attemptKey };
  return "answer" in first ? outcomeOfIntent(first.answer) : create(stripe, r, first.key);
}

/**
 * A PaymentIntent confirmed at once under `key`, as an outcome. Stripe refusing the key as sent
 * before with other parameters (the card or the amount changed since a request whose answer was
 * lost): that request reached Stripe, so what was made for the attempt answers, or this card is
 * charged under its own key; nothing found, the error is thrown (the charge stays planned).
 */
async function create(stripe: Stripe, r: ChargeRequest, key: string): Promise<ChargeOutcome> {
  try {
    const pi = await stripe.paymentIntents.create(
      {
        amount: r.amount,
        currency: r.currency.toLowerCase(),
        customer: r.customer,
        payment_method: r.card,
        off_session: true,
        confirm: true,
        ...(r.description ? { description: r.description } : {}),
        metadata: { invoice_id: r.invoiceId, environment_id: r.env, charge_key: key },
      },
      { idempotencyKey: key },
    );
    return outcomeOfIntent(pi);
  } catch (err) {
    if (!(err instanceof Stripe.errors.StripeIdempotencyError)) {
      const known = outcomeOfError(err);
      if (!known) throw err;
      return known;
    }
    const made = await intentsOfAttempt(stripe, r.customer, r.attemptKey);
    const next = made.length > 0 ? answerOf(made, r.card, r.attemptKey) : undefined;
    if (!next || ("key" in next && next.key === key)) throw err;
    return "answer" in next ? outcomeOfIntent(next.answer) : create(stripe, r, next.key);
  }
}
