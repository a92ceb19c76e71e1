/**
 * Cancelling a subscription (now, or at the end of its cycle) and changing its rate card (an
 * upgrade charged prorated or as the rate difference, through a checkout without a card on
 * file). Both first catch up with cycles that ended, then apply under the subscription's row
 * lock with a fence (races.ts): a cycle close racing them makes the attempt start over.
 */
import type { RateCard } from "../catalog/types.js";
import { FailedPreconditionError, NotFoundError, UnavailableError, Violations, invalid } from "../errors.js";
import { subscriptionEvent } from "../events/types.js";
import { randomBase62 } from "../ids.js";
import { total } from "../invoicing/lines.js";
import { formatDecimal } from "../money.js";
import type { Caller } from "../tenancy.js";
import { formatInstant } from "../time.js";
import type { CallbackUrls, Checkouts } from "./checkout.js";
import type { Lookups } from "./lookups.js";
import type { BillingTx } from "./ports.js";
import { noPaymentProvider } from "./payments.js";
import { chargedAfterSwitch, sameCharged, withCredits } from "./proration.js";
import { lostRace, retryingRaces } from "./races.js";
import { checkCycleClosed, unmoved } from "./change-fences.js";
import { type ChangeGiven, type SwitchPlan, switchPlan } from "./upgrade-lines.js";
import { changeCredit } from "./change-credit.js";
import { recordGivenBack } from "./given-back.js";
import { grantProrationCredits } from "./credit-application.js";
import type { StartResult } from "./subscribe.js";
import type { Terms } from "./terms.js";
import type { Invoice, ProrationCredit, Subscription } from "./types.js";
import { commitmentTrueUp } from "./commitments.js";
import { firstSeenAfterSwitch } from "./first-seen.js";
import { TermUpdates, type UpdateInput, type UpdateResult } from "./updates.js";

type SubscriptionTerms = Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">;

/** `s` cancelled now, at `at`; `carried`: its proration credits left once given to the balance (none with a credit store). */
function cancelledRow(s: Subscription, at: Date, reason: string | null, carried: ProrationCredit[]): Subscription {
  const ended = { status: "cancelled", cancelsAtEndOfCycle: false, billingFailure: null, pausedAt: null, resumesAt: null } as const;
  return { ...s, ...ended, cancelledAt: at, cancelReason: reason ?? s.cancelReason, prorationCredits: carried, usageAdjustments: null };
}

/** A change of rate card, built and not yet written (SubscriptionChanges.prepareSwitch, writeSwitch). */
export interface PreparedSwitch {
  current: Subscription;
  newCard: RateCard;
  next: SubscriptionTerms & Pick<Subscription, "firstSeen" | "usageAdjustments">; // the new window's first-seen anchors (first-seen.ts), no usage-terms adjustments
  at: Date;
  invoice: Invoice;
  charged: boolean; // it charges for the rest of the period (an upgrade); else that stays billed as it was (chargedAfterSwitch)
  given: ChangeGiven; // what its credit for the old card gives back of the period's invoices, as they were read (given-back.ts)
}

export class SubscriptionChanges {
  private readonly updates: TermUpdates;

  constructor(
    private readonly lookups: Lookups,
    private readonly terms: Terms,
    private readonly checkouts: Checkouts,
  ) {
    this.updates = new TermUpdates(lookups, terms, (s, at) => this.caughtUp(s, at));
  }

  /** Changes an active subscription's quantities, multipliers and metadata from now on (updates.ts). */
  update(caller: Caller, id: string, input: UpdateInput): Promise<UpdateResult> {
    return this.updates.update(caller, id, input);
  }

  private get engine() {
    return this.lookups.engine;
  }

  private get stores() {
    return this.lookups.stores;
  }

  /**
   * Closes the cycles of `s` that ended by `at` — the scheduler may not have reached them yet — so
   * that a cancellation or change applies to the cycle it happens in; returns the fresh row.
   */
  async caughtUp(s: Subscription, at: Date): Promise<Subscription> {
    let current = s;
    while (current.status === "active" && current.periodEnd.getTime() <= at.getTime()) {
      await this.transitionFirst(current);
      const failedBefore = current.billingFailure?.attempts ?? 0;
      // The scheduler's work, whoever triggers it: it does not count as this call's change.
      await this.stores.asScheduler(() => this.engine.cycles.closeCycles([current]));
      const fresh = await this.stores.subscriptions.get(current.environmentId, current.id);
      const failure = fresh?.billingFailure;
      if (fresh && failure && failure.attempts > failedBefore && fresh.cycleIndex === current.cycleIndex) {
        // The close itself failed (and set the subscription aside): retrying cannot help.
        throw new FailedPreconditionError(
          "SUBSCRIPTION_BILLING_FAILED",
          `subscription ${fresh.id}: its billing cycle that ended at ${fresh.periodEnd.toISOString()} cannot be closed (${failure.message}); nothing can change until it is`,
          { subscription_id: fresh.id },
        );
      }
      if (!fresh || (fresh.cycleIndex === current.cycleIndex && fresh.status === current.status)) break; // another runner holds it
      current = fresh;
    }
    return current;
  }

  /** A timeline's move at or before the cycle's end comes first, made by the scheduler alone (Scheduler.runDue): until then, `unavailable`. */
  private async transitionFirst(s: Subscription): Promise<void> {
    const at = s.timelineId ? (await this.stores.timelines.get(s.environmentId, s.timelineId))?.nextTransitionAt : undefined;
    if (!at || at.getTime() > s.periodEnd.getTime()) return;
    const msg = `subscription ${s.id} follows a timeline that moves on at ${formatInstant(at)}, before its cycle that ended at ${formatInstant(s.periodEnd)} closes (on the next item's card); retry shortly`;
    throw new UnavailableError("TIMELINE_TRANSITION_DUE", msg, { subscription_timeline_id: s.timelineId ?? "" });
  }

  /**
   * Cancels now, or flags the subscription to cancel at the end of its cycle. A cycle close (the
   * scheduler, a clock advance) racing it makes the attempt start over: re-read the row, catch
   * up with closed cycles, recompute the final invoice, and try again under the row lock.
   */
  async cancel(caller: Caller, id: string, input: { atEndOfCycle?: boolean; reason: string }): Promise<Subscription> {
    const v = new Violations();
    if (input.atEndOfCycle === false) v.add("cancel_at_end_of_cycle", "only true is accepted; leave it out to cancel now");
    if (input.reason.length > 500) v.add("reason", "must have at most 500 characters");
    v.throwIfAny();
    const found = await this.lookups.subscription(caller, id);
    const subject = await this.lookups.subject(caller, found.subjectId);
    const done = await retryingRaces(async (n) => {
      const now = await this.lookups.nowFor(subject);
      const current = await this.caughtUp(n === 1 ? found : await this.lookups.subscription(caller, id), now);
      if (current.status === "paused") return { subscription: await this.cancelPaused(current, now, input), invoice: undefined };
      if (input.atEndOfCycle) {
        const flagged = await this.stores.transaction(async (tx) => {
          const s = await tx.lockSubscription(caller.environmentId, id);
          if (s?.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${id} is ${s?.status ?? "gone"}`);
          if (s.cancelsAtEndOfCycle) throw new FailedPreconditionError("SUBSCRIPTION_ALREADY_CANCELLING", `subscription ${id} already cancels at the end of its cycle`);
          // A cycle that ended but is not closed yet (another runner holds it): wait for it, so that the flag applies to the cycle `now` is in.
          if (s.periodEnd.getTime() <= now.getTime()) throw lostRace(id);
          const next = { ...s, cancelsAtEndOfCycle: true, cancelReason: input.reason || null };
          await tx.updateSubscription(next);
          await tx.emit([subscriptionEvent("subscription.updated", next)]);
          return next;
        });
        return { subscription: flagged, invoice: undefined };
      }
      return this.tryCancelAt(current, now, input.reason || null, true);
    });
    if (done.invoice) await this.engine.settlement.settle(done.invoice, subject.paymentMethodId);
    return done.subscription;
  }

  /**
   * Cancels a paused subscription now: no cycle runs, so there is no end of cycle to wait for
   * and no usage to invoice (the pause invoiced its cycle's usage; usage while paused is not billed).
   * Proration credits carried on the row go to the subject's balance (nothing reads a cancelled row's).
   */
  private async cancelPaused(current: Subscription, at: Date, input: { atEndOfCycle?: boolean; reason: string }): Promise<Subscription> {
    if (input.atEndOfCycle) {
      throw new FailedPreconditionError("SUBSCRIPTION_PAUSED", `subscription ${current.id} is paused: no cycle is running to end; cancel it now (without cancel_at_end_of_cycle)`);
    }
    const currency = (await this.engine.reads.card(current.environmentId, current.rateCardId)).currency ?? "USD";
    return this.stores.transaction(async (tx) => {
      const s = await tx.lockSubscription(current.environmentId, current.id);
      if (s?.status !== "paused" || s.cycleEpoch !== current.cycleEpoch) throw lostRace(current.id);
      const next = cancelledRow(s, at, input.reason || null, await grantProrationCredits(tx, s, currency, s.prorationCredits ?? [], at));
      await tx.updateSubscription(next);
      await tx.emit([subscriptionEvent("subscription.cancelled", next)]);
      return next;
    });
  }

  /** Cancels now (at `at`): a final invoice for the usage since the last one, no new fixed charges. */
  async cancelAt(current: Subscription, at: Date, reason: string | null, paymentMethodId: string | null): Promise<Subscription> {
    const { subscription, invoice } = await this.tryCancelAt(current, at, reason, false);
    await this.engine.settlement.settle(invoice, paymentMethodId);
    return subscription;
  }

  /**
   * One attempt at cancelling `current` at `at`, committed or not at all. Throws lostRace when
   * the locked row is no longer what the final invoice was computed from (the fence: its
   * usage_since, cycle and card), or — with `inCurrentPeriod`, the API's case — when its cycle
   * ended by `at` without being closed yet. A cancelled subscription's cancels_at_end_of_cycle
   * is false: it no longer cancels at any end of cycle.
   */
  private async tryCancelAt(current: Subscription, at: Date, reason: string | null, inCurrentPeriod: boolean): Promise<{ subscription: Subscription; invoice: Invoice }> {
    const card = await this.engine.reads.card(current.environmentId, current.rateCardId);
    const usage = await this.engine.builder.usageLines(card, current, current.usageSince, at);
    // A minimum commitment is prorated to the part of the period before the cancellation (commitments.ts).
    const lines = [...usage, ...(await commitmentTrueUp(this.stores.invoices, current, usage, card.currency ?? "USD", at))];
    // The final invoice bills the usage so far: a draft for the grace period, like a cycle's.
    const invoice = this.engine.builder.newInvoice(current, card, "final", lines, current.usageSince, at, at, await this.engine.builder.windowTerms(current, current.usageSince, at, at));
    const cancelled = await this.stores.transaction(async (tx) => {
      const s = await tx.lockSubscription(current.environmentId, current.id);
      if (s?.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${current.id} is already ${s?.status ?? "gone"}`);
      if (!unmoved(s, current)) throw lostRace(current.id);
      checkCycleClosed(s, at, inCurrentPeriod);
      // Proration credits carried go onto the final invoice as far as it can take them (a draft's
      // none: its lines are all recomputed, proration.ts); the rest to the subject's balance, which a draft then spends.
      const credited = await withCredits(tx, invoice, s.prorationCredits, at);
      if (!(await this.engine.builder.writeInvoice(tx, credited.invoice))) throw lostRace(current.id);
      const next = cancelledRow(s, at, reason, await grantProrationCredits(tx, s, invoice.currency, credited.carried, at));
      await tx.updateSubscription(next);
      await tx.emit([subscriptionEvent("subscription.cancelled", next)]);
      return { subscription: next, invoice: credited.invoice };
    });
    return cancelled;
  }

  async changeRateCard(caller: Caller, id: string, input: { rateCardId: string; behavior: string; callbacks?: CallbackUrls }): Promise<StartResult> {
    const v = new Violations();
    if (input.rateCardId === "") v.add("rate_card_id", "is required");
    if (!["", "prorate", "rate_difference"].includes(input.behavior)) v.add("upgrade_behavior", "must be prorate or rate_difference");
    v.throwIfAny();
    const found = await this.lookups.subscription(caller, id);
    const newCard = await this.lookups.cardForNewUse(caller, input.rateCardId);
    // A cycle close racing the change makes the attempt start over from a fresh read (retryingRaces).
    const done = await retryingRaces(async (n): Promise<{ result: StartResult; invoice?: Invoice; paymentMethodId?: string | null }> => {
      const fresh = n === 1 ? found : await this.lookups.subscription(caller, id);
      const { current, next, subject, now, plan } = await this.planChange(caller, fresh, newCard, input.behavior);
      if (plan.upgrade.gt(0) && !(await this.lookups.paymentsFor(caller))) throw noPaymentProvider("this change is an upgrade, which needs a payment");
      // A checkout is needed to pay for an upgrade without a card on file; the old card's usage is
      // invoiced either way (and stays open without a card, like any cycle invoice).
      if (plan.upgrade.gt(0) && !subject.paymentMethodId) {
        const session = await this.checkouts.open(
          caller,
          subject,
          "change",
          { subscriptionId: id, rateCardId: newCard.id, behavior: input.behavior },
          input.callbacks,
          newCard,
          total(plan.lines),
          `Change to ${newCard.name}`,
          now,
        );
        return { result: { kind: "requires_action", checkoutUrl: this.checkouts.url(session) } };
      }
      const { subscription, invoice } = await this.trySwitch(current, newCard, next, now, plan, true);
      return { result: { kind: "success", subscription }, invoice, paymentMethodId: subject.paymentMethodId };
    });
    if (done.invoice) await this.engine.settlement.settle(done.invoice, done.paymentMethodId ?? null);
    return done.result;
  }

  /**
   * The checks of a change to `newCard` and what it would invoice now (the subscription caught
   * up to its subject's time first); nothing is written. The change itself and its preview both
   * go through here, so the preview shows what the change does.
   */
  private async planChange(caller: Caller, fresh: Subscription, newCard: RateCard, behavior: string, readOnly = false) {
    const id = fresh.id;
    const at = await this.lookups.nowFor({ environmentId: fresh.environmentId, testClockId: fresh.testClockId });
    // A preview writes nothing: where the change would first close a cycle that is due, it says so instead.
    if (readOnly && fresh.status === "active" && fresh.periodEnd.getTime() <= at.getTime()) {
      throw new FailedPreconditionError(
        "CYCLE_CLOSE_DUE",
        `subscription ${id}: its cycle that ended at ${fresh.periodEnd.toISOString()} is not closed yet; the scheduler closes it shortly (or the change does, first): preview again then`,
      );
    }
    const current = readOnly ? fresh : await this.caughtUp(fresh, at);
    if (current.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${id} is ${current.status}`);
    const oldCard = await this.engine.reads.card(current.environmentId, current.rateCardId);
    if (newCard.id === oldCard.id) throw new FailedPreconditionError("SAME_RATE_CARD", "the subscription is already on this rate card");
    if (newCard.billingInterval !== oldCard.billingInterval)
      throw new FailedPreconditionError("INTERVAL_MISMATCH", `the new rate card is ${newCard.billingInterval}; the subscription is ${oldCard.billingInterval}`);
    if (newCard.currency && oldCard.currency && newCard.currency !== oldCard.currency)
      throw new FailedPreconditionError("CURRENCY_MISMATCH", `the new rate card charges ${newCard.currency}, not ${oldCard.currency}`);
    const subject = await this.lookups.subject(caller, current.subjectId);
    const now = await this.lookups.nowFor(subject);

    // The new card's terms: quantities of codes it shares with the old one carry over; its other fixed rates get 1.
    const quantities: Record<string, string> = {};
    for (const r of newCard.fixedRates) quantities[r.code] = current.fixedRateQuantities[r.code] ?? "1";
    const codes = new Set([...newCard.fixedRates.map((r) => r.code), ...newCard.usageRates.map((r) => r.code)]);
    const multipliers = Object.fromEntries(Object.entries(current.rateMultipliers).filter(([code]) => codes.has(code)));
    const next = { fixedRateQuantities: quantities, rateMultipliers: multipliers };
    // The carried-over terms must be billable on the new card too (DESIGN §6).
    const refused: string[] = [];
    this.terms.checkBillable(await this.engine.reads.rates(newCard, quantities), next, (kind, code, message) => refused.push(kind === "total" ? message : `${code}: ${message}`));
    if (refused.length > 0) invalid("rate_card_id", `at this subscription's quantities and multipliers, the new rate card cannot be invoiced: ${refused.join("; ")}`);

    const plan = await switchPlan(this.engine, current, oldCard, newCard, next, now, behavior);
    return { current, oldCard, newCard, next, subject, now, plan };
  }

  /**
   * What changing the subscription to `rateCardId` would invoice now, without changing anything:
   * the old card's usage so far and, for an upgrade, the prorated (or full) fixed-price
   * difference; whether a checkout would be needed (no card on file). The operator dashboard's
   * preview; the same checks as the change refuse what the change would refuse. Read-only: a
   * subscription whose ended cycle is not closed yet is refused (CYCLE_CLOSE_DUE), not caught up.
   */
  async previewChange(caller: Caller, id: string, input: { rateCardId: string; behavior: string }) {
    const v = new Violations();
    if (input.rateCardId === "") v.add("rate_card_id", "is required");
    if (!["", "prorate", "rate_difference"].includes(input.behavior)) v.add("upgrade_behavior", "must be prorate or rate_difference");
    v.throwIfAny();
    const found = await this.lookups.subscription(caller, id);
    const card = await this.lookups.cardOf(caller, input.rateCardId);
    const { oldCard, newCard, plan, subject, now } = await this.planChange(caller, found, card, input.behavior, true);
    return {
      from: oldCard,
      to: newCard,
      at: now,
      currency: newCard.currency ?? oldCard.currency ?? "",
      lines: plan.lines.map((l) => ({ description: l.description, quantity: formatDecimal(l.quantity), unitAmount: formatDecimal(l.unitAmount), amount: formatDecimal(l.amount) })),
      total: formatDecimal(total(plan.lines)),
      upgrade: formatDecimal(plan.upgrade),
      needsCheckout: plan.upgrade.gt(0) && !subject.paymentMethodId,
    };
  }

  /**
   * A paid change checkout's change, prepared before the transaction that completes the checkout
   * (hosted-checkout.ts), which writes it (writeSwitch): the checks and invoice of changeRateCard
   * with a card on file, nothing written but the cycles that ended (caughtUp); `readOnly` (its
   * page's preview, checkout-preview.ts): not even those, a cycle due is refused (CYCLE_CLOSE_DUE).
   */
  async prepareSwitch(caller: Caller, id: string, input: { rateCardId: string; behavior: string }, readOnly = false): Promise<PreparedSwitch> {
    const found = await this.lookups.subscription(caller, id);
    const newCard = await this.lookups.cardForNewUse(caller, input.rateCardId);
    const { current, next, now, plan } = await this.planChange(caller, found, newCard, input.behavior, readOnly);
    return this.switchOf(current, newCard, next, now, plan);
  }

  /** One attempt at the switch, committed or not at all (writeSwitch). */
  private async trySwitch(current: Subscription, newCard: RateCard, next: SubscriptionTerms, at: Date, plan: SwitchPlan, inCurrentPeriod: boolean) {
    const prepared = await this.switchOf(current, newCard, next, at, plan);
    return this.stores.transaction((tx) => this.writeSwitch(tx, prepared, inCurrentPeriod));
  }

  /** The switch of `current` to `newCard` at `at`, built and not yet written: its invoice of the old card's usage since usage_since (the fence) up to `at`, the new window's anchors. */
  private async switchOf(current: Subscription, newCard: RateCard, next: SubscriptionTerms, at: Date, { lines, upgrade, given }: SwitchPlan): Promise<PreparedSwitch> {
    const oldCard = await this.engine.reads.card(current.environmentId, current.rateCardId);
    // Several changes can happen at one instant (a frozen test clock): each gets its own key; the
    // locked row's re-check in writeSwitch is what keeps one change from being applied twice.
    const key = `change:${at.getTime()}:${randomBase62(8)}`;
    const terms = await this.engine.builder.windowTerms(current, current.usageSince, at, at);
    const invoice = this.engine.builder.newInvoice(current, oldCard, key, lines, current.usageSince, at, at, terms);
    const firstSeen = await firstSeenAfterSwitch(this.engine.reads, current, oldCard, newCard, next.fixedRateQuantities, at);
    return { current, newCard, next: { ...next, firstSeen, usageAdjustments: null }, at, invoice, charged: upgrade.gt(0), given };
  }

  /**
   * Writes a prepared switch in `tx`; `at` becomes the new usage_since (its window with next's first-seen anchors). Throws lostRace
   * when the locked row moved on, or — with `inCurrentPeriod`, the API's case — when its cycle ended by `at` without being closed yet; SUBSCRIPTION_NOT_ACTIVE when it was cancelled or paused.
   */
  async writeSwitch(tx: BillingTx, { current, newCard, next, at, invoice, charged, given }: PreparedSwitch, inCurrentPeriod: boolean): Promise<{ subscription: Subscription; invoice: Invoice }> {
    const s = await tx.lockSubscription(current.environmentId, current.id);
    if (!s) throw new NotFoundError("SUBSCRIPTION_NOT_FOUND", `subscription ${JSON.stringify(current.id)} not found`, { subscription_id: current.id });
    if (s.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${current.id} is ${s.status}`);
    // The fence, and the fixed charges the upgrade was computed from.
    if (!unmoved(s, current) || !sameCharged(s, current)) throw lostRace(current.id);
    checkCycleClosed(s, at, inCurrentPeriod);
    // What the old card's credit gives back of the invoices it was drawn on, on their amount credited (a credit note's cap too).
    await recordGivenBack(tx, given.billed, given.amounts, new Map(), { clock: at, real: this.engine.now() }, () => lostRace(current.id));
    // An upgrade whose credit outweighs its charge once taxed: that net credit goes to the balance (change-credit.ts).
    const change = await changeCredit(tx, invoice, at);
    const own = await grantProrationCredits(tx, s, invoice.currency, change.credits, at);
    const credited = await withCredits(tx, change.invoice, [...(s.prorationCredits ?? []), ...own], at);
    if (!(await this.engine.builder.writeInvoice(tx, credited.invoice))) throw lostRace(current.id);
    const chargedTerms = chargedAfterSwitch(s, newCard.id, next, charged, change.charge); // an upgrade's: the new card's (proration.ts)
    const updated: Subscription = { ...s, rateCardId: newCard.id, ...next, chargedTerms, usageSince: at, prorationCredits: credited.carried };
    await tx.updateSubscription(updated);
    await tx.emit([subscriptionEvent(newCard.id === s.rateCardId ? "subscription.updated" : "subscription.rate_card_changed", updated)]);
    return { subscription: updated, invoice: credited.invoice };
  }

  /** A timeline's move to its next item at `at`: the change of rate card and terms, always applied. */
  async switchTo(current: Subscription, card: RateCard, terms: SubscriptionTerms, at: Date): Promise<Subscription> {
    const oldCard = await this.engine.reads.card(current.environmentId, current.rateCardId);
    const subject = await this.stores.directory.subject(current.environmentId, current.subjectId);
    const plan = await switchPlan(this.engine, current, oldCard, card, terms, at, "prorate");
    const { subscription, invoice } = await this.trySwitch(current, card, terms, at, plan, false);
    await this.engine.settlement.settle(invoice, subject?.paymentMethodId ?? null);
    return subscription;
  }
}
