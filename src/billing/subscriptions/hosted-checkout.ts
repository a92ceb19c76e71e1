/**
 * The hosted checkout page's use cases: showing a checkout, completing it with a card (which is
 * saved on the subject, then what the checkout was for happens: a subscription, a rate-card
 * change or a timeline start) and cancelling it. Opening one is checkout.ts.
 */
import { NotFoundError } from "../errors.js";
import { newId } from "../ids.js";
import { type SavedCard, cardSetupReference } from "../payments/provider-events.js";
import { type Caller, systemCaller } from "../tenancy.js";
import { NO_PROVIDER_PAGE_MESSAGE } from "./checkout.js";
import { type ChargeStanding, chargeAfterCommit, chargeRefused, checkoutInvoiceId, firstChargeWaits, ownPage, withChargedInvoice } from "./checkout-charge.js";
import type { SubscriptionChanges } from "./changes.js";
import type { Lookups } from "./lookups.js";
import { retryingRaces } from "./races.js";
import { StaleEffect, checkoutEvent, staleOn } from "./hosted-checkout-parts.js";
import type { CreateSubscriptionInput, Subscriptions } from "./subscribe.js";
import type { TimelineService } from "./timelines.js";
import type { BillingTx } from "./ports.js";
import type { BillingSubject, CheckoutSession, Commitment, Invoice, PaymentMethod, PaymentProvider } from "./types.js";

/** A credit checkout's payload: the grant it buys and its invoice. */
export type CreditPayload = { grantId: string; invoiceId: string };

/** Where a credit purchase stands: `paid`, `pending` (can still be paid, or its charge waits for dunning) or `ended` (declined, voided or marked uncollectible: nothing bought). */
export type PurchaseOutcome = "paid" | "pending" | "ended";

/** What completes a credit purchase's checkout (src/billing/credits/purchase.ts), set by the wiring. */
export interface CreditCheckouts {
  outcome(environmentId: string, payload: CreditPayload): Promise<PurchaseOutcome>;
  /** In the checkout's claiming transaction, under the purchase invoice's row lock: whether it can still be paid (then its charge is planned at `at`'s). */
  claimable(tx: BillingTx, environmentId: string, payload: CreditPayload, at: Date): Promise<boolean>;
  /** Charges the purchase to the saved card; answers where it stands after. */
  completeCheckout(caller: Caller, payload: CreditPayload, paymentMethodId: string, now: Date): Promise<PurchaseOutcome>;
  /** In the transaction that cancels its open checkout (or finds it expired), under the checkout's lock: the purchase ends as a declined one does, nothing charged. */
  end(tx: BillingTx, environmentId: string, payload: CreditPayload, message: string, at: Date): Promise<void>;
}

/**
 * What finish did: `completed` (and what the checkout was for stands); `taken` (not claimed: no
 * longer open, or the provider's event a repeat); `stale` (not claimed: a credit purchase's
 * invoice was voided or marked uncollectible first, as possible() finds it); `ended` (completed,
 * its card saved, but the credit purchase it was for ended unpaid: declined, or voided meanwhile);
 * `pending` (completed, what it was for stands, but its charge could not be made: the provider
 * could not be reached, and the attempt stays planned for dunning; checkout-charge.ts); `refused`
 * (completed, but the provider refused its charge for good: not retried as pending).
 */
type Finished = "taken" | "stale" | ChargeStanding;

/** A completed checkout whose charge waits, or was refused by the provider (`refused`; checkout-charge.ts): its invoice, and the card it saved. */
export interface WaitingCharge {
  invoice: Invoice;
  card: Pick<PaymentMethod, "brand" | "last4"> | undefined;
  refused: boolean;
}

/** What completing a checkout takes: what was checked stale meanwhile. */
const STALE = { ok: false as const, gone: true, message: "This checkout can no longer be completed: the subscription or plan changed meanwhile." };

/** What a subscribe, change or timeline checkout is for: written in its completion's transaction, charged after its commit. */
interface CheckoutEffect {
  /** The invoice it writes and charges (none: nothing charged now, a timeline starting later). */
  invoiceId: string | undefined;
  write(tx: BillingTx): Promise<unknown>;
  settle(paymentMethodId: string): Promise<unknown>;
}

/** A card to save: typed in (tokenized) or saved on a provider's page (its ids there). */
type NewCard = Pick<PaymentMethod, "brand" | "last4" | "behavior"> & Partial<Pick<SavedCard, "provider" | "providerRef" | "customerRef">>;

export class HostedCheckout {
  /** Credit purchases (checkout kind `credit`); absent: such a checkout cannot be completed. */
  purchases: CreditCheckouts | undefined = undefined;
  /** This service's public base URL (where a provider's page sends the customer back); set by the wiring. */
  publicBaseUrl: () => string = () => "";
  /** Told when what a checkout was for can no longer happen (it stays open, nothing saved); set by the wiring (a warning in the log). */
  onStale: (session: CheckoutSession, reason: string) => void = () => {};
  /** Told when the charge after a completed checkout failed (the provider unreachable: dunning makes it); set by the wiring (the log). */
  onChargeFailed: (session: CheckoutSession, err: unknown) => void = () => {};

  constructor(
    private readonly lookups: Lookups,
    private readonly subscriptions: Subscriptions,
    private readonly changes: SubscriptionChanges,
    private readonly timelines: TimelineService,
  ) {}

  private get engine() {
    return this.lookups.engine;
  }

  private get stores() {
    return this.lookups.stores;
  }

  /**
   * A checkout as its page shows it: usable (open, not expired), and the provider it would be
   * paid through — none in a live environment, where it cannot be paid (test cards refused).
   */
  async checkout(token: string): Promise<{ session: CheckoutSession; usable: boolean; now: Date; provider: PaymentProvider | undefined }> {
    const session = await this.stores.checkouts.get(token);
    if (!session) throw new NotFoundError("CHECKOUT_NOT_FOUND", "no such checkout");
    const subject = await this.stores.directory.subject(session.environmentId, session.subjectId);
    const now = subject ? await this.lookups.nowFor(subject) : this.engine.now();
    const provider = await this.engine.reads.providerFor(session.environmentId);
    const usable = session.status === "open" && now.getTime() < session.expiresAt.getTime();
    // Found expired: its credit purchase ends unpaid (void, its grant failed), never charged later (endPurchase).
    if (session.kind === "credit" && session.status === "open" && !usable) await this.stores.transaction((tx) => this.endPurchase(tx, session, "The checkout expired: nothing was charged.", now));
    return { session, usable, now, provider };
  }

  /**
   * Completes a checkout with a card number: declined cards change nothing; a good one is saved
   * on the subject and what the checkout was for happens. A completed, cancelled or expired
   * checkout cannot be used again. A credit purchase's sends the customer to the success URL only
   * when the purchase stands (paid, or its charge planned); ended unpaid (declined, voided or
   * marked uncollectible, before or meanwhile), to the cancelled URL. Completed but its charge
   * not made (the provider could not be reached: `pending`) or refused by the provider for good
   * (`refused`), to the checkout's own page, which says so (waitingCharge).
   */
  async completeCheckout(
    token: string,
    cardNumber: string,
  ): Promise<{ ok: true; redirect: string; cancelled?: true; pending?: true } | { ok: false; message: string; gone?: boolean; noProvider?: boolean }> {
    const { session, usable, provider } = await this.checkout(token);
    if (!usable) return { ok: false, gone: true, message: "This checkout is no longer available." };
    // A live environment has no provider: no card is taken (test cards are refused), nothing changes.
    if (!provider) return { ok: false, noProvider: true, message: NO_PROVIDER_PAGE_MESSAGE };
    const card = provider.tokenize(cardNumber);
    if (!card.ok) {
      // A declined card changes nothing but is worth telling: the customer tried and could not pay.
      await this.stores.transaction((tx) => tx.emit([checkoutEvent("checkout.failed", session, card.message)]));
      return { ok: false, message: card.message };
    }
    // A credit purchase that ended unpaid (voided or marked uncollectible before, or declined):
    // nothing bought, the cancelled URL, where Stripe's return sends the customer too.
    const unpaid = { ok: true as const, redirect: session.cancelledUrl, cancelled: true as const };
    const subject = await this.possible(session);
    if (!subject) return (await this.purchaseEnded(session)) ? unpaid : STALE;
    const done = await this.finish(session, subject, card);
    if (done === "taken") return { ok: false, gone: true, message: "This checkout is no longer available." };
    if (done === "ended" || (done === "stale" && (await this.purchaseEnded(session)))) return unpaid;
    if (done === "stale") return STALE;
    if (ownPage(done)) return { ok: true, redirect: this.pageUrl(session), pending: true };
    return { ok: true, redirect: session.successUrl };
  }

  /**
   * A provider with its own card page (Stripe Checkout, DESIGN §16): where the customer goes to
   * save a card for this checkout; the provider's webhook or the customer's return completes it
   * (completeWithSavedCard). Undefined when the provider has no such page (the card form is used).
   */
  async startCardSetup(token: string): Promise<{ ok: true; redirect: string } | { ok: false; message: string; gone?: boolean; noProvider?: boolean } | undefined> {
    const { session, usable, provider } = await this.checkout(token);
    if (!usable) return { ok: false, gone: true, message: "This checkout is no longer available." };
    if (!provider) return { ok: false, noProvider: true, message: NO_PROVIDER_PAGE_MESSAGE };
    if (!provider.startCardSetup) return undefined;
    const subject = await this.possible(session);
    if (!subject) return STALE;
    const profile = await this.stores.directory.profile(session.environmentId, subject.id);
    const { url } = await provider.startCardSetup({
      environmentId: session.environmentId,
      subjectId: subject.id,
      email: profile?.email ?? null,
      name: profile?.name ?? null,
      returnReference: cardSetupReference("checkout", token),
      successUrl: session.successUrl,
      cancelUrl: `${this.publicBaseUrl()}/hosted/checkout/${token}`,
      currency: session.currency,
    });
    return { ok: true, redirect: url };
  }

  /**
   * Completes a checkout of `environmentId` (where the webhook or return came in; another's is left
   * as it is, null as an unknown token) with a card the provider saved on its page (DESIGN §16), once:
   * webhook and return both call it; `record` records the provider's event in the same transaction
   * (false: a repeat). Answers where the customer goes: the success URL once completed (now or before),
   * the cancel URL when it can no longer complete, or completed for a credit purchase that then ended
   * unpaid (landing); the checkout's own page when its charge could not be made (`pending`).
   */
  async completeWithSavedCard(environmentId: string, token: string, card: SavedCard, record: (tx: BillingTx) => Promise<boolean>): Promise<{ redirect: string | null }> {
    const session = await this.stores.checkouts.get(token);
    if (session?.environmentId !== environmentId) return { redirect: null };
    if (session.status === "completed") return { redirect: await this.landing(session) };
    if (session.status !== "open") return { redirect: session.cancelledUrl };
    const subject = await this.possible(session);
    if (!subject) return { redirect: session.cancelledUrl };
    const done = await this.finish(session, subject, { ...card, behavior: "succeeds" }, record);
    if (done === "completed") return { redirect: session.successUrl };
    if (ownPage(done)) return { redirect: this.pageUrl(session) };
    if (done !== "taken") return { redirect: session.cancelledUrl };
    // Not claimed: a concurrent webhook or return completed it meanwhile (its landing), or it can no longer complete.
    const after = await this.stores.checkouts.get(token);
    return { redirect: after?.status === "completed" ? await this.landing(after) : session.cancelledUrl };
  }

  /**
   * Where a completed checkout sends the customer: its success URL, unless it was a credit
   * purchase's that ended unpaid (declined, voided or marked uncollectible): its cancelled URL;
   * or its charge waits (the provider could not be reached) or was refused: the checkout's own page.
   */
  private async landing(session: CheckoutSession): Promise<string> {
    const standing = await this.standing(session);
    return standing === "ended" ? session.cancelledUrl : ownPage(standing) ? this.pageUrl(session) : session.successUrl;
  }

  /** Where a completed checkout stands (checkout-charge.ts), read from its invoice: a reload sees what the completion saw. */
  private async standing(session: CheckoutSession): Promise<ChargeStanding> {
    const waiting = await this.waitingCharge(session);
    if (waiting?.refused) return "refused";
    if (await this.purchaseEnded(session)) return "ended";
    return waiting ? "pending" : "completed";
  }

  /**
   * A completed checkout whose first charge was not made (the provider could not be reached): its
   * invoice, planned for dunning, and the card it saved; or whose charge the provider refused for
   * good (`refused`, chargeRefused); undefined otherwise (open, paid, declined...).
   */
  async waitingCharge(session: CheckoutSession): Promise<WaitingCharge | undefined> {
    const invoiceId = checkoutInvoiceId(session);
    if (session.status !== "completed" || invoiceId === undefined) return undefined;
    const invoice = await this.stores.invoices.get(session.environmentId, invoiceId);
    const refused = chargeRefused(invoice);
    if (!refused && !firstChargeWaits(invoice)) return undefined;
    const subject = await this.stores.directory.subject(session.environmentId, session.subjectId);
    const pm = subject?.paymentMethodId ? await this.stores.paymentMethods.get(subject.paymentMethodId, session.environmentId) : undefined;
    return { invoice: invoice as Invoice, card: pm && { brand: pm.brand, last4: pm.last4 }, refused };
  }

  /** The checkout's own page (where a completed checkout whose charge waits says so). */
  private pageUrl(session: CheckoutSession): string {
    return `${this.publicBaseUrl()}/hosted/checkout/${session.token}`;
  }

  /** Whether the checkout was a credit purchase's that ended unpaid (declined, voided or marked uncollectible). */
  private async purchaseEnded(session: CheckoutSession): Promise<boolean> {
    if (session.kind !== "credit") return false;
    return !this.purchases || (await this.purchases.outcome(session.environmentId, session.payload as CreditPayload)) === "ended";
  }

  /** The subject, when what the checkout was for is still possible; undefined: it is stale. */
  private async possible(session: CheckoutSession): Promise<BillingSubject | undefined> {
    const subject = await this.stores.directory.subject(session.environmentId, session.subjectId);
    if (!subject) return undefined;
    if (session.kind === "credit") {
      if (!this.purchases || (await this.purchases.outcome(session.environmentId, session.payload as CreditPayload)) !== "pending") return undefined;
    } else if (session.kind === "change") {
      const p = session.payload as { subscriptionId: string; rateCardId: string };
      const sub = await this.stores.subscriptions.get(session.environmentId, p.subscriptionId);
      if (sub?.status !== "active" || sub.rateCardId === p.rateCardId) return undefined;
    } else if (session.kind === "timeline") {
      const tl = await this.stores.timelines.get(session.environmentId, (session.payload as { timelineId: string }).timelineId);
      if (tl?.status !== "draft") return undefined;
    } else if ((session.payload as { request: CreateSubscriptionInput }).request.timelineId) {
      const tl = await this.stores.timelines.get(session.environmentId, (session.payload as { request: CreateSubscriptionInput }).request.timelineId);
      if (tl?.status !== "draft") return undefined;
    }
    return subject;
  }

  /**
   * Saves the card on the subject and completes the checkout (once: `taken` when it was no longer
   * open, or `record` says the provider's event is a repeat), then what it was for happens. A
   * credit purchase's invoice is locked and read in the claiming transaction: voided or marked
   * uncollectible first, the checkout is `stale` and nothing is saved or completed (as possible()
   * finds it); charged after the claim, a purchase that ends unpaid makes it `ended`. What a
   * subscribe, change or timeline checkout is for (its subscription and first invoice, the change
   * of rate card and its invoice, the timeline's start) is written in the same transaction as its
   * completion: a process or database that fails between them can never leave a completed
   * checkout without it, nor apply it twice (its charge follows the commit, charge(); dunning
   * makes it if that is cut short or the provider cannot be reached: `pending`). One that can no
   * longer happen (the subscription cancelled or changed, the timeline started meanwhile) leaves
   * the checkout open and nothing saved: `stale`. A cycle close racing a change makes the attempt
   * start over (retryingRaces).
   */
  private async finish(session: CheckoutSession, subject: BillingSubject, card: NewCard, record?: (tx: BillingTx) => Promise<boolean>): Promise<Finished> {
    const caller = systemCaller(session.environmentId, (await this.engine.reads.modeOf(session.environmentId)) ?? "test");
    const purchase = session.kind === "credit" ? this.purchases : undefined;
    const attempt = async (): Promise<{ claimed: Finished; pmId: string; effect?: CheckoutEffect }> => {
      const [pmId, at] = [newId("pm_card"), await this.lookups.nowFor(subject)];
      const effect = await this.effectOf(caller, session, { ...subject, paymentMethodId: pmId });
      const claimed = await this.stores.transaction(async (tx): Promise<Finished> => {
        const locked = await tx.lockCheckout(session.token);
        if (locked?.status !== "open") return "taken";
        if (session.kind === "credit" && !(await purchase?.claimable(tx, session.environmentId, session.payload as CreditPayload, at))) return "stale";
        if (record && !(await record(tx))) return "taken";
        await tx.insertPaymentMethod({
          id: pmId,
          environmentId: session.environmentId,
          subjectId: subject.id,
          brand: card.brand,
          last4: card.last4,
          behavior: card.behavior,
          createdAt: this.engine.now(),
          ...(card.provider ? { provider: card.provider, providerRef: card.providerRef ?? null, customerRef: card.customerRef ?? null } : {}),
        });
        await tx.setSubjectPaymentMethod(subject.id, pmId, session.environmentId);
        // The invoice it charges after the commit, recorded: where the charge stands is read from it (checkout-charge.ts).
        await tx.updateCheckoutStatus(session.id, "completed", session.environmentId, withChargedInvoice(session, effect?.invoiceId));
        await tx.emit([checkoutEvent("checkout.completed", { ...session, status: "completed" }, null)]);
        if (effect) await staleOn(() => effect.write(tx));
        return "completed";
      });
      return { claimed, pmId, effect };
    };
    let done: Awaited<ReturnType<typeof attempt>>;
    try {
      done = await retryingRaces(attempt);
    } catch (err) {
      if (!(err instanceof StaleEffect)) throw err;
      // Prepared while a concurrent completion (the provider's webhook and the customer's return) committed it: taken.
      if ((await this.stores.checkouts.get(session.token))?.status !== "open") return "taken";
      this.onStale(session, err.cause.message);
      return "stale";
    }
    if (done.claimed !== "completed") return done.claimed;
    const completed: CheckoutSession = { ...session, status: "completed", payload: withChargedInvoice(session, done.effect?.invoiceId) ?? session.payload };
    return this.charge(completed, async () => {
      await done.effect?.settle(done.pmId);
      if (purchase) await purchase.completeCheckout(caller, session.payload as CreditPayload, done.pmId, await this.lookups.nowFor(subject));
    });
  }

  /**
   * The charge after a checkout's completion committed, one path for every kind (`charge`: the
   * effect's settlement, or the credit purchase's charge). It never undoes the completion: a
   * charge that throws (the provider unreachable, timed out or answering 5xx) leaves its attempt
   * planned for dunning (same key, never a second charge) and is reported, not thrown
   * (chargeAfterCommit). Then where the checkout stands is read from its invoice (standing), as a
   * reload reads it.
   */
  private async charge(completed: CheckoutSession, charge: () => Promise<void>): Promise<ChargeStanding> {
    await chargeAfterCommit(charge, (err) => this.onChargeFailed(completed, err));
    return this.standing(completed);
  }

  /**
   * What a subscribe, change or timeline checkout is for, prepared (nothing written): a
   * subscribe checkout's subscription from the request as subscribe.ts stored it (its terms,
   * checked then, with the minimum commitment); a change's switch as changeRateCard makes it with
   * the card on file; a timeline's start. Undefined for a credit purchase (charged after).
   */
  private async effectOf(caller: Caller, session: CheckoutSession, withPm: BillingSubject): Promise<CheckoutEffect | undefined> {
    if (session.kind === "subscribe") {
      const input = (session.payload as { request: CreateSubscriptionInput & { commitment?: Commitment | null } }).request;
      const start = await staleOn(async () => {
        const rateCard = await this.lookups.cardOf(caller, input.rateCardId);
        const now = await this.lookups.nowFor(withPm);
        const terms = { quantities: input.fixedRateQuantities, multipliers: input.rateMultipliers, commitment: input.commitment ?? null };
        return this.subscriptions.prepareNow(caller, withPm, rateCard, terms, input.metadata, input.timelineId || null, now, input.couponId);
      });
      return { invoiceId: start.invoice.id, write: (tx) => this.subscriptions.write(tx, start), settle: (pmId) => this.subscriptions.settle(start, pmId) };
    }
    if (session.kind === "change") {
      const p = session.payload as { subscriptionId: string; rateCardId: string; behavior: string };
      const change = await staleOn(() => this.changes.prepareSwitch(caller, p.subscriptionId, { rateCardId: p.rateCardId, behavior: p.behavior }));
      return { invoiceId: change.invoice.id, write: (tx) => this.changes.writeSwitch(tx, change, true), settle: (pmId) => this.engine.settlement.settle(change.invoice, pmId) };
    }
    if (session.kind === "timeline") {
      const p = session.payload as { timelineId: string; effectiveAt: string };
      const begin = await staleOn(() => this.timelines.prepareBegin(caller, p.timelineId, new Date(p.effectiveAt), withPm));
      return { invoiceId: begin.start?.invoice.id, write: (tx) => this.timelines.writeBegin(tx, begin), settle: async (pmId) => begin.start && this.subscriptions.settle(begin.start, pmId) };
    }
    return undefined;
  }

  /**
   * Cancels an open checkout (a POST from its page; a GET only asks to confirm); returns where to
   * send the customer: the cancelled URL; a completed one (paid in another tab) where a completed
   * checkout lands (landing); `gone` when it was cancelled or expired. A credit purchase's ends
   * with it, in the same transaction (endPurchase): nothing was charged, and nothing will be.
   */
  async cancelCheckout(token: string): Promise<{ redirect: string } | { gone: true }> {
    const { session, usable, now } = await this.checkout(token);
    if (session.status === "completed") return { redirect: await this.landing(session) };
    if (!usable) return { gone: true };
    const cancelled = await this.stores.transaction(async (tx) => {
      if ((await tx.lockCheckout(token))?.status !== "open") return false;
      await tx.updateCheckoutStatus(session.id, "cancelled", session.environmentId);
      await this.endPurchase(tx, session, "The checkout was cancelled: nothing was charged.", now, true);
      return true;
    });
    if (cancelled) return { redirect: session.cancelledUrl };
    const after = await this.stores.checkouts.get(token);
    return after?.status === "completed" ? { redirect: await this.landing(after) } : { gone: true };
  }

  /**
   * A credit checkout cancelled or found expired while open (checked under its lock, unless
   * `locked`): its purchase ends as a declined one does (purchase.ts end: the invoice void, the
   * grant failed), so no card saved later (dunning's retrySubject) charges it.
   */
  async endPurchase(tx: BillingTx, session: CheckoutSession, message: string, at: Date, locked = false): Promise<void> {
    if (session.kind !== "credit" || !this.purchases) return;
    if (!locked && (await tx.lockCheckout(session.token))?.status !== "open") return;
    await this.purchases.end(tx, session.environmentId, session.payload as CreditPayload, message, at);
  }
}
