/**
 * Paid credit grants (DESIGN §14): a grant bought through the service. It is written
 * `pending_payment` with an invoice of one `credit_purchase` line for its amount, finalized at
 * once (open), in one transaction. Then the invoice is charged through the environment's provider
 * (idempotency key from the invoice and attempt, DESIGN §12) under the invoice's row lock, so a
 * void sent meanwhile waits for it (purchase-charge.ts): paid → the grant becomes active
 * with its "grant" ledger entry (`invoice.paid`, `credit_grant.activated`); declined → the grant
 * is `failed` and the invoice void (nothing was granted, nothing is owed; `invoice.payment_failed`).
 * Without a payment method on file, a hosted checkout (kind `credit`) takes a card, then the same
 * charge happens. A live environment without a provider refuses before anything is written.
 * The charge follows the commit and never fails the call (chargeAfterCommit,
 * subscriptions/checkout-charge.ts): a provider that cannot be reached (a network failure, a
 * timeout, a 5xx) leaves the grant pending, its invoice open and its first charge planned, which
 * dunning makes once with the same key and which activates the grant; the call answers the grant
 * as it stands, so a client sees one purchase and has no error to retry into a second one (a
 * grant that cannot be read back then is answered as known). A provider that refuses the charge
 * for good (its credentials or account: refusedByProvider) is a failed attempt as a decline is:
 * the grant failed, its invoice void, nothing charged; the result says so (`refused`).
 *
 * The purchase invoice belongs to the subject, not to a subscription: subscription_id '' and
 * period_key `credit:<grant id>` (unique like any period key).
 */
import { FailedPreconditionError } from "../errors.js";
import { creditGrantEvent, newInvoiceEvents } from "../events/types.js";
import { newId, randomBase62 } from "../ids.js";
import { displayMoney } from "../money.js";
import type { Caller } from "../tenancy.js";
import { type CallbackUrls, type Checkouts, checkUrls } from "../subscriptions/checkout.js";
import { finalizeOpen } from "../subscriptions/booking.js";
import type { Lookups } from "../subscriptions/lookups.js";
import { chargeAfterCommit } from "../subscriptions/checkout-charge.js";
import { noPaymentProvider } from "../subscriptions/payments.js";
import type { BillingTx } from "../subscriptions/ports.js";
import type { CreditPayload, PurchaseOutcome } from "../subscriptions/hosted-checkout.js";
import type { BillingSubject, Invoice, PaymentMethod } from "../subscriptions/types.js";
import { isCollectible } from "../payments/dunning.js";
import type { AttemptResult } from "../payments/record.js";
import { Violations } from "../errors.js";
import type { CreditWrites } from "./ports.js";
import { PLAN_AHEAD_MS, chargePurchase, dunning, endUncharged } from "./purchase-charge.js";
import { purchaseIds } from "./purchase-keys.js";
import { purchasePeriodKey } from "./purchase-states.js";
import type { CheckedGrant } from "./validation.js";
import type { CreditGrant } from "./types.js";

export const newGrantId = (): string => newId("cg");

/** When a purchase's first charge is planned: ahead of `now` by longer than the charge takes (purchase-charge.ts). */
const firstChargeAt = (now: Date) => new Date(now.getTime() + PLAN_AHEAD_MS);

/** The checkout kind of a credit purchase (its payload: the grant and its invoice). */
export const CREDIT_CHECKOUT_KIND = "credit" as const;

/** A purchase's outcome by its invoice's status (gone: ended). */
function outcomeOf(invoice: Pick<Invoice, "status"> | undefined): PurchaseOutcome {
  if (invoice?.status === "paid") return "paid";
  return invoice?.status === "open" ? "pending" : "ended";
}

export interface PurchaseResult {
  grant: CreditGrant;
  /** The hosted checkout, when the subject had no payment method on file. */
  checkoutUrl: string | null;
  /** The provider refused the charge to the card on file for good (refusedByProvider): its message; the grant failed, its invoice void, nothing charged. */
  refused?: string;
}

export class CreditPurchases {
  constructor(
    private readonly lookups: Lookups,
    private readonly checkouts: Checkouts,
  ) {}

  /** Cancels a payment left waiting for the customer on a purchase voided for it (payments/cancels.ts), once wired. */
  cancels?: { settle(ref: Pick<Invoice, "environmentId" | "id">): Promise<boolean> };
  /** Told when the charge of a purchase to the card on file failed (the provider unreachable, its payment method unreadable: dunning makes it); set by the wiring (the log). */
  onChargeFailed: (grant: CreditGrant, err: unknown) => void = () => {};
  /** Told when the grant could not be read back after its charge (answered as known); set by the wiring (the log). */
  onReadFailed: (grant: CreditGrant, err: unknown) => void = () => {};
  /** Told when a purchase whose checkout could not be opened could not be ended either (left awaiting it); set by the wiring (the log). */
  onEndFailed: (grant: CreditGrant, err: unknown) => void = () => {};

  private get stores() {
    return this.lookups.stores;
  }

  /**
   * Buys `g` for `subject` at `now`: charged to the payment method on file, or a checkout with
   * `callbacks` (required then: a 400 naming checkout_callback_urls otherwise, nothing written).
   * What the auto top-up calls too (it has a payment method on file, or does not buy), with
   * `idempotencyKey` (e.g. its crossing): the grant's and invoice's IDs are derived from it, so a
   * repeat (another server, a retry after a crash) finds the first purchase and returns it, and
   * its charge carries the same key (chargeKey of the same invoice): never bought twice.
   */
  async purchase(caller: Caller, subject: BillingSubject, g: CheckedGrant, callbacks: CallbackUrls | undefined, now: Date, idempotencyKey?: string): Promise<PurchaseResult> {
    if (!(await this.lookups.paymentsFor(caller))) throw noPaymentProvider("a paid credit grant cannot be charged");
    const ids = idempotencyKey === undefined ? undefined : purchaseIds(caller.environmentId, idempotencyKey);
    if (ids) {
      const first = await this.stores.transaction((tx) => credits(tx).lockGrant(caller.environmentId, ids.grantId));
      if (first) return { grant: first, checkoutUrl: null };
    }
    if (!subject.paymentMethodId) {
      const v = new Violations();
      checkUrls(callbacks, v, "a paid grant needs a checkout (no payment method on file)");
      v.throwIfAny();
    }
    const grant: CreditGrant = {
      id: ids?.grantId ?? newGrantId(),
      environmentId: caller.environmentId,
      subjectId: subject.id,
      currency: g.currency,
      amount: g.amount,
      remaining: g.amount,
      category: "paid",
      priority: g.priority,
      effectiveAt: g.effectiveAt ?? now,
      expiresAt: g.expiresAt,
      appliesToRateCodes: g.appliesToRateCodes,
      metadata: g.metadata,
      status: "pending_payment",
      invoiceId: ids?.invoiceId ?? newId("inv"),
      createdAt: now,
      voidedAt: null,
      expiredAt: null,
    };
    const invoice = purchaseInvoice(grant, subject, now);
    try {
      await this.stores.transaction(async (tx) => {
        // Numbered like any invoice that becomes open (neither discounted nor taxed: subscriptions/booking.ts).
        const numbered = await finalizeOpen(tx, invoice, now, this.lookups.engine.now);
        await tx.insertInvoice(numbered);
        await credits(tx).insertGrant(grant);
        // Charged to the card on file: its first charge planned with it (awaitsCheckout: a purchase unplanned awaits its checkout).
        if (subject.paymentMethodId) await dunning(tx).planFirsts(grant.environmentId, [{ id: numbered.id, at: firstChargeAt(now) }]);
        await tx.emit([...newInvoiceEvents(numbered), creditGrantEvent("credit_grant.created", grant)]);
      });
    } catch (err) {
      // A concurrent repeat of the same keyed purchase wrote it first: that one stands.
      const first = ids && (await this.stores.transaction((tx) => credits(tx).lockGrant(caller.environmentId, ids.grantId)));
      if (first) return { grant: first, checkoutUrl: null };
      throw err;
    }
    if (!subject.paymentMethodId) return { grant, checkoutUrl: await this.openCheckout(caller, subject, grant, invoice, callbacks, now) };
    // Committed: a charge that cannot be made now (the payment method unreadable, the provider
    // unreachable) is dunning's (planned, same key); the grant is answered as it stands (pending).
    const paymentMethodId = subject.paymentMethodId;
    let refused: string | undefined;
    await chargeAfterCommit(
      async () => {
        const pm = await this.stores.paymentMethods.get(paymentMethodId, subject.environmentId);
        const done = await this.charge(caller, invoice, pm, now);
        if (done?.decision.payment.refusedByProvider) refused = done.decision.payment.lastError ?? "the payment provider refused the charge";
      },
      (err) => this.onChargeFailed(grant, err),
    );
    // Nothing after the commit fails the answer: a grant that cannot be read back now (the database
    // failing over) is answered as known, never an error a client would retry into a second purchase.
    const after = await this.current(grant).catch((err: unknown) => {
      this.onReadFailed(grant, err);
      return refused === undefined ? grant : { ...grant, status: "failed" as const };
    });
    return { grant: after, checkoutUrl: null, ...(refused === undefined ? {} : { refused }) };
  }

  /**
   * The checkout of a purchase just written without a payment method on file: its URL. One that
   * cannot be opened (the database failing) would leave the purchase awaiting a checkout that does
   * not exist (awaitsCheckout), which nothing charges nor ends: it ends as a cancelled checkout's
   * does (end: the invoice void, the grant failed), in a transaction of its own, and the error is
   * thrown (a failure of that end too is told to onEndFailed, and the first error thrown).
   */
  private async openCheckout(caller: Caller, subject: BillingSubject, grant: CreditGrant, invoice: Invoice, callbacks: CallbackUrls | undefined, now: Date): Promise<string> {
    const payload: CreditPayload = { grantId: grant.id, invoiceId: invoice.id };
    try {
      const description = `Credit purchase: ${displayMoney(grant.amount, grant.currency)}`;
      const session = await this.checkouts.open(caller, subject, CREDIT_CHECKOUT_KIND, { ...payload }, callbacks, { currency: grant.currency }, invoice.total, description, now);
      return this.checkouts.url(session);
    } catch (err) {
      const message = "The checkout could not be opened: nothing was charged.";
      await this.stores.transaction((tx) => this.end(tx, grant.environmentId, payload, message, now)).catch((e: unknown) => this.onEndFailed(grant, e));
      throw err;
    }
  }

  /**
   * Where a credit purchase stands, by its invoice: `paid`; `pending` (open: its checkout can still
   * be completed, or its charge waits for dunning, planned); `ended` (void or uncollectible:
   * declined, voided or marked uncollectible, nothing granted), or gone.
   */
  async outcome(environmentId: string, payload: CreditPayload): Promise<PurchaseOutcome> {
    return outcomeOf(await this.stores.invoices.get(environmentId, payload.invoiceId));
  }

  /**
   * In the transaction that claims the purchase's checkout, under the invoice's row lock: whether
   * the purchase can still be paid (its invoice open with something due). A void or
   * mark-uncollectible that came first is seen here, so the checkout is not completed for it;
   * one that comes after the claim waits for that lock or is seen by the charge (purchase-charge.ts).
   * Claimable, its first charge is planned in that transaction: a completed checkout's purchase no
   * longer awaits it (awaitsCheckout), and dunning makes the charge should the process die first.
   */
  async claimable(tx: BillingTx, environmentId: string, payload: CreditPayload, at: Date): Promise<boolean> {
    const i = await dunning(tx).claim(environmentId, payload.invoiceId);
    if (i === undefined || !isCollectible(i)) return false;
    if ((i.attemptCount ?? 0) === 0) await dunning(tx).planFirsts(environmentId, [{ id: i.id, at: firstChargeAt(at) }]);
    return true;
  }

  /**
   * Its checkout cancelled or found expired, in that transaction: the purchase ends as a declined
   * one does, its invoice void and its grant failed (purchase-charge.ts endUncharged), unless it
   * was charged or planned meanwhile. What a card saved later never charges (DESIGN §14).
   */
  async end(tx: BillingTx, environmentId: string, payload: CreditPayload, message: string, at: Date): Promise<void> {
    await endUncharged(tx, environmentId, payload.invoiceId, message, at, this.lookups.engine.now());
  }

  /**
   * A credit checkout completed with the card it saved: the purchase is charged to it. Answers
   * where the purchase stands after (outcome): `ended` when it was declined, or voided or marked
   * uncollectible meanwhile (no charge made then).
   */
  async completeCheckout(caller: Caller, payload: CreditPayload, paymentMethodId: string, now: Date): Promise<PurchaseOutcome> {
    const invoice = await this.stores.invoices.get(caller.environmentId, payload.invoiceId);
    const pm = await this.stores.paymentMethods.get(paymentMethodId, caller.environmentId);
    const grant = await this.stores.transaction((tx) => credits(tx).lockGrant(caller.environmentId, payload.grantId));
    if (!invoice || !grant) throw new FailedPreconditionError("CREDIT_PURCHASE_GONE", "the credit purchase no longer exists");
    await this.charge(caller, invoice, pm, now);
    return this.outcome(caller.environmentId, payload);
  }

  /**
   * Charges the purchase invoice (attempt 1) under its row lock (purchase-charge.ts): paid →
   * active grant; declined → failed grant, void invoice; voided (or otherwise ended) meanwhile →
   * no charge. A charge that throws (the provider unreachable) leaves both pending and open, the
   * attempt planned: dunning makes it with the same key (the caller answers as it stands).
   */
  private async charge(caller: Caller, invoice: Invoice, pm: PaymentMethod | undefined, now: Date): Promise<AttemptResult | undefined> {
    const provider = await this.lookups.paymentsFor(caller);
    if (!provider) throw noPaymentProvider("a paid credit grant cannot be charged");
    if (!pm) return undefined;
    const done = await chargePurchase(this.stores, provider, pm, invoice, now, () => this.lookups.engine.now());
    // Voided because the charge waits for the customer: that payment is cancelled (payments/cancels.ts).
    await this.cancels?.settle(invoice);
    return done;
  }

  /** The grant as it stands now (active, failed, or still pending: its charge planned). */
  private async current(grant: CreditGrant): Promise<CreditGrant> {
    return (await this.stores.transaction((tx) => credits(tx).lockGrant(grant.environmentId, grant.id))) ?? grant;
  }
}

/** The credit writes of a billing transaction (every SQL one has them). */
function credits(tx: { credits?: CreditWrites }): CreditWrites {
  if (!tx.credits) throw new Error("this store keeps no credits");
  return tx.credits;
}

/** A purchase's invoice: open at once, one credit_purchase line for the grant's amount. */
function purchaseInvoice(grant: CreditGrant, subject: BillingSubject, now: Date): Invoice {
  return {
    id: grant.invoiceId as string,
    environmentId: grant.environmentId,
    subjectId: grant.subjectId,
    subscriptionId: "",
    periodKey: purchasePeriodKey(grant.id),
    status: "open",
    currency: grant.currency,
    total: grant.amount,
    lines: [
      {
        description: `Credit purchase: ${displayMoney(grant.amount, grant.currency)}`,
        quantity: "1",
        unitAmount: grant.amount,
        amount: grant.amount,
        kind: "credit_purchase",
        key: null,
        windowInvoiceId: null,
      },
    ],
    hostedToken: randomBase62(32),
    periodStart: now,
    periodEnd: now,
    createdAt: now,
    window: null,
    finalizesAt: null,
    clockId: subject.testClockId,
    finalizedAt: now,
  };
}
