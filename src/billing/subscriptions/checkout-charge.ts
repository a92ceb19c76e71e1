/**
 * Where the charge of a completed checkout stands (DESIGN §16), the same for every kind
 * (subscribe, change of rate card, timeline, credit purchase): what the checkout was for is
 * written with its completion and charged after the commit (hosted-checkout.ts). A provider that
 * cannot be reached then (a network failure, a timeout, a 5xx) undoes nothing: the first charge
 * stays planned, dunning makes it once with the key of attempt 1 (payments/attempts.ts), and the
 * customer is told so on the checkout's page. Read from the checkout's invoice, never from the
 * failure itself, so a reload (or the provider's webhook and the customer's return, whichever
 * comes second) shows the same and charges nothing. A credit purchase charged to the card on file
 * (credits/purchase.ts) makes its charge after its commit the same way (chargeAfterCommit): the
 * call answers the grant pending, its invoice open and the charge planned, never an error a client
 * would retry into a second purchase.
 */
import { dec } from "../money.js";
import { type CheckoutSession, type Invoice, amountDueOf } from "./types.js";

/**
 * Where a completed checkout leaves the customer: `completed` (paid, nothing due, or a charge the
 * provider answered: declined and on dunning's schedule, or waiting for the customer); `pending`
 * (its first charge not made yet: the provider could not be reached); `ended` (a credit purchase
 * that ended unpaid); `refused` (the provider refused its charge for good, chargeRefused: an
 * error, never "processing").
 */
export type ChargeStanding = "completed" | "pending" | "ended" | "refused";

/** Whether a completed checkout shows its own page (waiting for the provider, or refused by it) rather than going back to the application. */
export const ownPage = (s: string): boolean => s === "pending" || s === "refused";

/** The invoice a completed checkout charges: a credit purchase's from the start, the others' recorded at completion (withChargedInvoice). */
export function checkoutInvoiceId(session: Pick<CheckoutSession, "payload">): string | undefined {
  const id = (session.payload as { invoiceId?: unknown }).invoiceId;
  return typeof id === "string" ? id : undefined;
}

/** The payload a checkout is completed with: its own, and the invoice its completion wrote and charges after (none: as it was). */
export function withChargedInvoice(session: Pick<CheckoutSession, "payload">, invoiceId: string | undefined): Record<string, unknown> | undefined {
  return invoiceId === undefined ? undefined : { ...session.payload, invoiceId };
}

/**
 * Whether an invoice's first charge is still to be made: open with something due, never
 * attempted, nothing waiting for the customer. After a checkout's charge, only a provider that
 * could not be reached (or a process or database lost between its answer and the commit) leaves
 * an invoice so; its planned attempt is dunning's, with the same key.
 */
export function firstChargeWaits(i: Invoice | undefined): i is Invoice {
  return i !== undefined && i.status === "open" && dec(amountDueOf(i)).gt(0) && (i.attemptCount ?? 0) === 0 && !i.payment?.actionRequired;
}

/**
 * Whether an invoice's last attempt was refused by the provider itself (its credentials, account
 * or the request: ChargeOutcome.refusedByProvider) and it is not paid: a failed attempt dunning
 * counted (a credit purchase's: void, its grant failed), not a charge still to be made.
 */
export function chargeRefused(i: Invoice | undefined): boolean {
  return i !== undefined && i.status !== "paid" && i.payment?.refusedByProvider === true;
}

/**
 * Makes `charge`, the charge of what a transaction already committed (a completed checkout, a
 * credit purchase written pending with its invoice open and its first charge planned). It never
 * throws: a charge that fails (the provider unreachable, timed out or answering 5xx) undoes
 * nothing and is told to `failed`; its planned attempt is dunning's, with the same key, never a
 * second charge. A decline is an answer, not a failure: `charge` records it; so is the provider
 * refusing the request for good (refusedByProvider: a failed attempt, never left planned).
 */
export async function chargeAfterCommit(charge: () => Promise<unknown>, failed: (err: unknown) => void): Promise<void> {
  try {
    await charge();
  } catch (err) {
    failed(err);
  }
}
