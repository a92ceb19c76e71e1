/**
 * Subscribing: a subject subscribes to a rate card at once (a card on file, or nothing to pay),
 * or through a hosted checkout; the first invoice bills the first cycle's fixed charges in
 * advance. Also reading subscriptions back (get, list).
 */
import { isFreePrice } from "../catalog/prices.js";
import type { Coupons } from "../coupons/coupons.js";
import { redeemOnNewSubscription } from "../coupons/redeem.js";
import type { RateCard } from "../catalog/types.js";
import { subscriptionEvent } from "../events/types.js";
import { FailedPreconditionError, Violations } from "../errors.js";
import { newId } from "../ids.js";
import { cycleBounds } from "../invoicing/cycles.js";
import { total } from "../invoicing/lines.js";
import { type Metadata, checkMetadata } from "../metadata.js";
import { type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { type CallbackUrls, type Checkouts, checkUrls } from "./checkout.js";
import { checkCommitment, newCommitment } from "./commitments.js";
import { keyedFixedLines } from "./credit-application.js";
import type { BillLine } from "./invoice-building.js";
import type { Lookups } from "./lookups.js";
import { noPaymentProvider } from "./payments.js";
import type { BillingTx } from "./ports.js";
import type { Terms } from "./terms.js";
import { type BillingSubject, type CheckoutSession, type Commitment, type Invoice, type Subscription, type SubscriptionStatus, type TimelineItem, covers } from "./types.js";

/** The terms a subscription starts on: fixed-rate quantities, rate multipliers, the minimum commitment. */
export type StartTerms = { quantities: Record<string, string>; multipliers: Record<string, string>; commitment?: Commitment | null };

/** A subscription's start, built and not yet written (Subscriptions.prepare, write, settle). */
export interface PreparedStart {
  draft: Subscription;
  card: RateCard;
  invoice: Invoice;
  items: TimelineItem[];
  couponId: string | undefined;
  lenient: boolean;
}

export interface CreateSubscriptionInput {
  rateCardId: string;
  subjectId: string;
  callbacks?: CallbackUrls;
  createCheckoutSession: string;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  metadata: Metadata;
  timelineId: string;
  /** Per billing period, in the card's currency (DESIGN §14); absent: none. */
  minimumCommitment?: { currencyCode: string; value: string };
  /** A coupon applied in the transaction that creates the subscription (DESIGN §15). */
  couponId?: string;
}

export type StartResult = { kind: "success"; subscription: Subscription } | { kind: "requires_action"; checkoutUrl: string };

/** A new subscription of `subject` to `card` at `at`, in its first cycle (not written yet). */
export function newSubscription(caller: Caller, subject: BillingSubject, card: RateCard, terms: StartTerms, metadata: Metadata, at: Date): Subscription {
  const period = cycleBounds(at, 0, card.billingInterval);
  return {
    id: newId("sub"),
    environmentId: caller.environmentId,
    subjectId: subject.id,
    rateCardId: card.id,
    status: "active",
    cancelsAtEndOfCycle: false,
    anchor: at,
    cycleIndex: 0,
    periodStart: period.start,
    periodEnd: period.end,
    usageSince: period.start,
    fixedRateQuantities: terms.quantities,
    rateMultipliers: terms.multipliers,
    metadata,
    testClockId: subject.testClockId,
    timelineId: null,
    cancelledAt: null,
    cancelReason: null,
    billingFailure: null,
    usageCheck: null,
    pausedAt: null,
    resumesAt: null,
    cycleEpoch: 0,
    commitment: terms.commitment ?? null,
    createdAt: at,
  };
}

export class Subscriptions {
  /** Coupons (DESIGN §15), wired after: a coupon_id is checked before anything is written. */
  coupons: Pick<Coupons, "check"> | undefined = undefined;

  constructor(
    private readonly lookups: Lookups,
    private readonly terms: Terms,
    private readonly checkouts: Checkouts,
  ) {}

  private get engine() {
    return this.lookups.engine;
  }

  private get stores() {
    return this.lookups.stores;
  }

  async create(caller: Caller, input: CreateSubscriptionInput): Promise<StartResult> {
    const v = new Violations();
    if (input.rateCardId === "") v.add("rate_card_id", "is required");
    if (input.subjectId === "") v.add("subject_id", "is required");
    if (!["", "when_required", "always"].includes(input.createCheckoutSession)) v.add("create_checkout_session", "must be when_required or always");
    checkMetadata(input.metadata, v.at("metadata"));
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, input.subjectId);
    const now = await this.lookups.nowFor(subject);
    if (input.timelineId !== "") await this.checkTimelineLink(caller, input, subject, now, v);
    const card = await this.lookups.cardForNewUse(caller, input.rateCardId);
    const terms = await this.terms.checkTerms(card, input.fixedRateQuantities, input.rateMultipliers, v);
    const commitment = checkCommitment(input.minimumCommitment, card, v);
    v.throwIfAny();

    if (input.couponId !== undefined) await this.coupons?.check(caller, input.couponId, card.currency, now);
    const withCommitment = { ...terms, commitment: newCommitment(commitment.given ? commitment.value : null, card) };
    const draft = { ...newSubscription(caller, subject, card, withCommitment, input.metadata, now), timelineId: input.timelineId || null };
    const { fixed } = terms.rates;
    const firstLines = keyedFixedLines(this.engine.builder, fixed, draft);
    const free = fixed.every((r) => isFreePrice(r.price));
    const needsCheckout = input.createCheckoutSession === "always" || (!free && !subject.paymentMethodId);
    if (!(await this.lookups.paymentsFor(caller))) {
      // A live environment (no provider): only what needs no payment, now or later in its timeline.
      if (!free) throw noPaymentProvider(`rate card ${card.id} has fixed charges, which need a payment`);
      if (needsCheckout) throw noPaymentProvider("create_checkout_session always needs a checkout, which needs a payment provider");
      if (input.timelineId !== "" && (await this.terms.anyPaidItem(caller, await this.stores.timelines.items(input.timelineId, caller.environmentId)))) {
        throw noPaymentProvider("the linked subscription timeline has items with fixed charges, which need a payment");
      }
    }
    if (!needsCheckout) return { kind: "success", subscription: await this.start(draft, card, firstLines, subject.paymentMethodId, input.couponId) };

    const session = await this.checkouts.open(
      caller,
      subject,
      "subscribe",
      { request: { ...input, fixedRateQuantities: terms.quantities, rateMultipliers: terms.multipliers, commitment: withCommitment.commitment } },
      input.callbacks,
      card,
      total(firstLines),
      `Subscribe to ${card.name}`,
      now,
    );
    return { kind: "requires_action", checkoutUrl: this.checkouts.url(session) };
  }

  /**
   * A timeline linked on create: the subject's own draft, with an item covering the subscription's
   * start (`now`) on the subscription's rate card, as starting the timeline would take (DESIGN §9).
   * Without one, the timeline would be active with no next transition, never moved nor completed.
   */
  private async checkTimelineLink(caller: Caller, input: CreateSubscriptionInput, subject: BillingSubject, now: Date, v: Violations): Promise<void> {
    const tl = await this.stores.timelines.get(caller.environmentId, input.timelineId);
    if (!tl) return v.add("subscription_timeline_id", "no subscription timeline with this ID exists");
    if (tl.subjectId !== subject.id) return v.add("subscription_timeline_id", "belongs to another subject");
    if (tl.status !== "draft") throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${tl.id} is ${tl.status}; only a draft can be linked`);
    const items = await this.stores.timelines.items(tl.id, tl.environmentId);
    const current = items.find((i) => covers(i, now.getTime()));
    if (!current) {
      const start = now.toISOString();
      return v.add("subscription_timeline_id", `no item of the timeline covers the subscription's start (${start}): start the timeline instead, or add an item covering ${start}`);
    }
    if (current.rateCardId !== input.rateCardId) {
      v.add("subscription_timeline_id", `the timeline's item covering the subscription's start is on rate card ${current.rateCardId}, not rate_card_id ${input.rateCardId}`);
    }
  }

  /**
   * A standalone hosted checkout (POST /checkout, the 0.1.5 SDK's `checkout.create`): always a
   * checkout, even for a free plan or a subject with a card on file. Completing it subscribes the
   * subject to the card at quantity 1 for each of the card's own fixed rates (the SDK call has no
   * quantities; catalog add-ons are left out, as they are opt-in) and no multipliers, exactly as
   * a checkout of POST /subscriptions does. `amount`: what that charges (checkout-preview.ts).
   */
  async checkout(caller: Caller, input: { rateCardId: string; subjectId: string; callbacks?: CallbackUrls }): Promise<{ session: CheckoutSession; url: string }> {
    const v = new Violations();
    if (input.subjectId === "") v.add("subject_id", "is required");
    if (input.rateCardId === "") v.add("rate_card_id", "is required");
    checkUrls(input.callbacks, v, "the customer is sent to one of them after the checkout");
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, input.subjectId);
    const card = await this.lookups.cardForNewUse(caller, input.rateCardId);
    const quantities = Object.fromEntries(card.fixedRates.map((r) => [r.code, "1"]));
    const terms = await this.terms.checkTerms(card, quantities, {}, v);
    v.throwIfAny();
    const now = await this.lookups.nowFor(subject);
    const firstLines = this.engine.builder.fixedLinesOf(terms.rates.fixed, newSubscription(caller, subject, card, terms, {}, now));
    const request: CreateSubscriptionInput = {
      rateCardId: card.id,
      subjectId: subject.id,
      createCheckoutSession: "always",
      fixedRateQuantities: terms.quantities,
      rateMultipliers: terms.multipliers,
      metadata: {},
      timelineId: "",
    };
    // Refuses a live environment (no payment provider) and checks the callback URLs again.
    const session = await this.checkouts.open(caller, subject, "subscribe", { request }, input.callbacks, card, total(firstLines), `Subscribe to ${card.name}`, now);
    return { session, url: this.checkouts.url(session) };
  }

  /**
   * Starts a subscription: writes it and its first invoice (fixed charges in advance), then
   * charges. A subscription linked to a draft timeline makes that timeline active. `couponId`:
   * applied before the first invoice is written, so it discounts it (`lenient`: see redeem.ts).
   */
  async start(draft: Subscription, card: RateCard, firstLines: BillLine[], paymentMethodId: string | null, couponId?: string, lenient = false): Promise<Subscription> {
    return this.commit(await this.prepare(draft, card, firstLines, couponId, lenient), paymentMethodId);
  }

  /** Writes a prepared start in a transaction of its own, then charges its first invoice. */
  private async commit(start: PreparedStart, paymentMethodId: string | null): Promise<Subscription> {
    await this.stores.transaction((tx) => this.write(tx, start));
    await this.settle(start, paymentMethodId);
    return start.draft;
  }

  /** What starting `draft` writes, built before its transaction (its first invoice, its timeline's items). */
  async prepare(draft: Subscription, card: RateCard, firstLines: BillLine[], couponId?: string, lenient = false): Promise<PreparedStart> {
    const invoice = this.engine.builder.newInvoice(draft, card, "cycle:0", firstLines, draft.periodStart, draft.periodEnd, draft.anchor);
    const items = draft.timelineId ? await this.stores.timelines.items(draft.timelineId, draft.environmentId) : [];
    return { draft, card, invoice, items, couponId, lenient };
  }

  /** Writes a prepared start in `tx`: a checkout's completion writes it in its own transaction, so both happen or neither. */
  async write(tx: BillingTx, { draft, card, invoice, items, couponId, lenient }: PreparedStart): Promise<void> {
    if (draft.timelineId) {
      const tl = await tx.lockTimeline(draft.environmentId, draft.timelineId);
      if (!tl || !["draft", "pending"].includes(tl.status)) throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${draft.timelineId} is ${tl?.status ?? "gone"}`);
      const current = items.find((i) => covers(i, draft.anchor.getTime()));
      await tx.updateTimeline({ ...tl, status: "active", subscriptionId: draft.id, effectiveAt: draft.anchor, nextTransitionAt: current?.end ?? null, updatedAt: draft.anchor });
    }
    await tx.insertSubscription(draft);
    // A subscription exists only once it is active (a checkout's at its completion): both at once.
    await tx.emit([subscriptionEvent("subscription.created", draft), subscriptionEvent("subscription.activated", draft)]);
    if (couponId !== undefined) await redeemOnNewSubscription(tx, draft, couponId, card.currency, lenient);
    await this.engine.builder.writeInvoice(tx, invoice);
  }

  /** Charges a written start's first invoice (after its commit). */
  async settle(start: PreparedStart, paymentMethodId: string | null): Promise<void> {
    await this.engine.settlement.settle(start.invoice, paymentMethodId);
  }

  /** startNow's start, prepared and not written (a checkout's completion writes it: write). */
  async prepareNow(caller: Caller, subject: BillingSubject, card: RateCard, terms: StartTerms, metadata: Metadata, timelineId: string | null, at: Date, couponId?: string): Promise<PreparedStart> {
    const draft = { ...newSubscription(caller, subject, card, terms, metadata, at), timelineId };
    const { fixed } = await this.engine.reads.rates(card, draft.fixedRateQuantities);
    return this.prepare(draft, card, keyedFixedLines(this.engine.builder, fixed, draft), couponId, true);
  }

  /** Starts `card` for `subject` now on `terms` (a paid checkout, a timeline's first item). */
  async startNow(caller: Caller, subject: BillingSubject, card: RateCard, terms: StartTerms, metadata: Metadata, timelineId: string | null, at: Date, couponId?: string): Promise<Subscription> {
    return this.commit(await this.prepareNow(caller, subject, card, terms, metadata, timelineId, at, couponId), subject.paymentMethodId);
  }

  get(caller: Caller, id: string): Promise<Subscription> {
    return this.lookups.subscription(caller, id);
  }

  /** The environment's subscriptions set aside because their cycle close keeps failing (the error is on each), next retry first. */
  async listFailing(caller: Caller, limit?: number, offset?: number): Promise<PageResult<Subscription>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.stores.subscriptions.failing(caller.environmentId, page);
  }

  /** The environment's subscriptions, newest first, of one status and/or rate card ("": any); the operator dashboard's list. */
  async listAll(caller: Caller, filter: { status: string; rateCardId: string }, limit?: number, offset?: number): Promise<PageResult<Subscription>> {
    const v = new Violations();
    const statuses: readonly SubscriptionStatus[] = ["active", "paused", "cancelled"];
    if (filter.status !== "" && !statuses.includes(filter.status as SubscriptionStatus)) v.add("status", `must be one of ${statuses.join(", ")}`);
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.stores.subscriptions.listAll(caller.environmentId, { status: (filter.status || undefined) as SubscriptionStatus | undefined, rateCardId: filter.rateCardId || undefined }, page);
  }

  async list(caller: Caller, filter: { subjectId: string; rateCardId: string }, limit?: number, offset?: number): Promise<PageResult<Subscription>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    if (filter.subjectId !== "" && filter.rateCardId !== "") v.add("rate_card_id", "cannot be used together with subject_id");
    v.throwIfAny();
    const subjectId = filter.subjectId === "" ? undefined : (await this.lookups.subject(caller, filter.subjectId)).id;
    return this.stores.subscriptions.list(caller.environmentId, { subjectId, rateCardId: filter.rateCardId || undefined }, page);
  }
}
