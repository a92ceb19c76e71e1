/**
 * Pausing and resuming a subscription (DESIGN §8, issue 20).
 * - Pause (active only): the usage of the current cycle so far is invoiced now, like a
 *   cancellation (a draft for the grace period), with the minimum commitment's true-up prorated
 *   to the part of the period before the pause (commitments.ts); then no cycle runs and nothing is charged, and
 *   usage is stored but not billed. A pending cancellation at the end of the cycle is cleared (the
 *   cycle it would end with is over) and the answer says so. A subscription that follows a
 *   timeline cannot be paused: the timeline decides its cards and dates.
 * - Resume (paused only; by a call, or at `resumes_at` through the scheduler and test clocks): a
 *   new cycle starts at the resume instant, which becomes the cycles' anchor, with the fixed
 *   charges in advance and a commitment changed for the next period in effect; usage is billed from then on. With proration_behavior
 *   `create_prorations` (the default; also at `resumes_at`) the fixed charges paid in advance
 *   for the cycle the pause cut short are credited for its unused part, from paused_at to that
 *   cycle's end as a fraction of the cycle (nothing unless the invoice that opened that cycle is
 *   paid, and never more than was paid for it: see unusedTime), one negative `proration` line
 *   per fixed rate on the resume's invoice, after the credits carried from before, giving back the
 *   taxes paid for that time, not those of the resume's invoice (proration.ts takeCredits); what that
 *   invoice cannot take is carried to the next ones with the exclusive tax paid for that time (unusedTime; proration.ts). What
 *   it gives back of the cycle's invoices is recorded on them (amount credited, given-back.ts), so a credit note credits
 *   only the rest (1,000 paid, 903 credited: a note may refund 97); what it draws of an open one (seats added, not paid
 *   yet) lowers that invoice's amount due instead. `none` credits nothing (carried credits still apply).
 * Both apply under the subscription's row lock with a fence, and a cycle close racing them makes
 * the attempt start over (races.ts), so a pause or resume and a close have one outcome.
 */
import { BillingError, FailedPreconditionError, Violations } from "../errors.js";
import { subscriptionEvent } from "../events/types.js";
import { randomBase62 } from "../ids.js";
import { cycleBounds } from "../invoicing/cycles.js";
import { fixedLine } from "../invoicing/lines.js";
import { type Decimal, ZERO, dec, displayMoney, formatDecimal } from "../money.js";
import type { Caller } from "../tenancy.js";
import { checkInstant } from "../time.js";
import type { RateCard } from "../catalog/types.js";
import type { SubscriptionChanges } from "./changes.js";
import { keyedFixedLines } from "./credit-application.js";
import { cycleKey, multiplierOf } from "./invoice-building.js";
import type { Lookups } from "./lookups.js";
import { chargedCardTerms, cycleCharge, prorationLine, remainingPart, sameEntries, withCredits } from "./proration.js";
import { lostRace, retryingRaces } from "./races.js";
import type { Invoice, ProrationCredit, Subscription } from "./types.js";
import { paidTax, taxCreditedIn, valuedCredits } from "./unused-credit.js";
import { checkProrationBehavior } from "./update-input.js";
import { commitmentAfterClose, commitmentTrueUp } from "./commitments.js";
import { lessReduction, openReductions, recordGivenBack } from "./given-back.js";

/** A resume's credit for the unused time of the cycle a pause cut short (unusedTime): per fixed rate (null: none), and what it gives back of the cycle's invoices `billed`. */
interface UnusedTime {
  credits: (ProrationCredit | null)[];
  billed: Invoice[];
  givenBack: Map<string, Decimal>;
  /** Per credit, what it draws of each invoice (unused-credit.ts paidTax). */
  draws: Map<string, Decimal>[];
}

export interface PauseResult {
  subscription: Subscription;
  /** The pause cleared a pending cancellation at the end of the cycle. */
  clearedCancelAtEndOfCycle: boolean;
}

export class Pauses {
  constructor(
    private readonly lookups: Lookups,
    private readonly changes: SubscriptionChanges,
  ) {}

  private get engine() {
    return this.lookups.engine;
  }

  private get stores() {
    return this.lookups.stores;
  }

  async pause(caller: Caller, id: string, input: { resumesAt?: Date }): Promise<PauseResult> {
    const v = new Violations();
    const resumesAt = checkInstant(input.resumesAt, v, "resumes_at");
    v.throwIfAny();
    const found = await this.lookups.subscription(caller, id);
    const subject = await this.lookups.subject(caller, found.subjectId);
    const done = await retryingRaces(async (n) => {
      const now = await this.lookups.nowFor(subject);
      if (resumesAt && resumesAt.getTime() <= now.getTime()) {
        v.add("resumes_at", `must be after the subscription's current time (${now.toISOString()})`);
        v.throwIfAny();
      }
      const current = await this.changes.caughtUp(n === 1 ? found : await this.lookups.subscription(caller, id), now);
      if (current.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${id} is ${current.status}; only an active subscription can be paused`);
      if (current.timelineId) {
        throw new FailedPreconditionError(
          "SUBSCRIPTION_FOLLOWS_TIMELINE",
          `subscription ${id} follows subscription timeline ${current.timelineId}, which decides its rate cards and dates; it cannot be paused`,
          { subscription_timeline_id: current.timelineId },
        );
      }
      const card = await this.engine.reads.card(current.environmentId, current.rateCardId);
      const usage = await this.engine.builder.usageLines(card, current, current.usageSince, now);
      // The pause cuts the period short: its minimum commitment is trued up prorated to the part before the pause, as an immediate cancellation's (commitments.ts).
      const lines = [...usage, ...(await commitmentTrueUp(this.stores.invoices, current, usage, card.currency ?? "USD", now))];
      const invoice = this.engine.builder.newInvoice(
        current,
        card,
        `pause:${now.getTime()}:${randomBase62(8)}`,
        lines,
        current.usageSince,
        now,
        now,
        await this.engine.builder.windowTerms(current, current.usageSince, now, now),
      );
      const paused = await this.stores.transaction(async (tx) => {
        const s = await tx.lockSubscription(current.environmentId, current.id);
        if (s?.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${id} is ${s?.status ?? "gone"}; only an active subscription can be paused`);
        // The fence: the row is what the invoice was computed from, and its cycle has not ended.
        if (
          s.rateCardId !== current.rateCardId ||
          s.usageSince.getTime() !== current.usageSince.getTime() ||
          s.cycleIndex !== current.cycleIndex ||
          !sameEntries(s.fixedRateQuantities, current.fixedRateQuantities) ||
          !sameEntries(s.rateMultipliers, current.rateMultipliers)
        ) {
          throw lostRace(id);
        }
        if (s.periodEnd.getTime() <= now.getTime()) throw lostRace(id);
        const credited = await withCredits(tx, invoice, s.prorationCredits, now);
        if (!(await this.engine.builder.writeInvoice(tx, credited.invoice))) throw lostRace(id);
        const next: Subscription = {
          ...s,
          status: "paused",
          pausedAt: now,
          resumesAt: resumesAt ?? null,
          cancelsAtEndOfCycle: false,
          usageSince: now,
          firstSeen: null,
          billingFailure: null,
          prorationCredits: credited.carried,
        };
        await tx.updateSubscription(next);
        await tx.emit([subscriptionEvent("subscription.paused", next)]);
        return { subscription: next, clearedCancelAtEndOfCycle: s.cancelsAtEndOfCycle, invoice: credited.invoice };
      });
      return paused;
    });
    await this.engine.settlement.settle(done.invoice, subject.paymentMethodId);
    return { subscription: done.subscription, clearedCancelAtEndOfCycle: done.clearedCancelAtEndOfCycle };
  }

  async resume(caller: Caller, id: string, input: { prorationBehavior?: string } = {}): Promise<Subscription> {
    const v = new Violations();
    const behavior = checkProrationBehavior(input.prorationBehavior ?? "", v);
    v.throwIfAny();
    const found = await this.lookups.subscription(caller, id);
    if (found.status !== "paused") throw new FailedPreconditionError("SUBSCRIPTION_NOT_PAUSED", `subscription ${id} is ${found.status}; only a paused subscription can be resumed`);
    const subject = await this.lookups.subject(caller, found.subjectId);
    return this.resumeAt(found, await this.lookups.nowFor(subject), subject.paymentMethodId, behavior);
  }

  /**
   * The credit for the unused part of the cycle a pause cut short: per fixed rate, its cycle
   * charge on the card and at the terms that cycle was billed at (chargedCardTerms: not a change
   * without proration made after, nor a downgrade of card that charged nothing: Pro at 10,000
   * changed to Basic at 2,000 and paused with 30 of 31 days left credits 9,677, not 1,935) ×
   * (period end − paused_at) / period, valued at what the cycle's paid invoices took
   * for the rate net of their discounts (valuedCredits, as a seat decrease's: a 50% coupon on the
   * cycle halves it, one added after the cycle was paid at list takes nothing of it), rounded
   * once; none for a rate whose credit rounds to 0. Only fixed charges paid for are credited:
   * nothing unless the invoice that opened the cycle is paid (a void one was never owed; an open
   * or uncollectible one, e.g. after the dunning policy `pause`, was never received), and never
   * more in all than the paid invoices of the cycle took for fixed charges (valuedCredits holds
   * its credits to that, as a seat decrease's; a credit carried onto one of them, as an earlier
   * resume's, takes nothing of that). Each records the exclusive tax paid for its time, as a seat
   * decrease's (paidTax: the tax those invoices booked × the part / net; none on a void or
   * uncollectible one's, an exempt or reverse-charge one's, or inside an inclusive price), "0"
   * when none: what it is granted with if carried to the balance (10,000 + 1,000 paid, 6,774
   * unused: −677), whatever the tax of the invoice it is carried from; and per rate as paid
   * (taxAmounts), what its line gives back on the resume's invoice whatever that invoice's rates
   * or the buyer's tax status now (paid at 10%, resumed at 20% or exempt: −677 under the 10% rate).
   */
  private async unusedTime(card: RateCard, paused: Subscription): Promise<UnusedTime> {
    const none: UnusedTime = { credits: [], billed: [], givenBack: new Map(), draws: [] };
    if (!paused.pausedAt) return none;
    const opening = await this.stores.invoices.byPeriodKey(paused.id, cycleKey(paused, paused.cycleIndex));
    if (opening?.status !== "paid") return none;
    const billed = await this.stores.invoices.billedWithin(paused.id, paused.environmentId, paused.periodStart, paused.periodEnd);
    const part = remainingPart(paused.periodStart, paused.periodEnd, paused.pausedAt);
    // The card and terms the cycle was billed at: after a downgrade that charged nothing, the old card's (as switchPlan reads them).
    const paid = chargedCardTerms(paused);
    const paidCard = paid.rateCardId === card.id ? card : await this.engine.reads.card(paused.environmentId, paid.rateCardId);
    const at = paused.pausedAt.toISOString().replace(".000Z", "Z");
    const lines = (await this.engine.reads.rates(paidCard, paid.fixedRateQuantities)).fixed.map((r) => {
      const quantity = paid.fixedRateQuantities[r.code] ?? "0";
      const unused = cycleCharge(fixedLine(r.name, r.price, dec(quantity), multiplierOf(paid, r.code))).times(part.fraction);
      return prorationLine(`${r.name} × ${quantity}: unused time of the cycle paused at ${at} (${part.label})`, unused.neg(), r.code);
    });
    const valued = valuedCredits(lines, billed, (d) => displayMoney(formatDecimal(d), card.currency ?? "USD"));
    const { taxes, rates, givenBack, draws } = paidTax(valued, billed, taxCreditedIn(paused));
    const credits = valued.map((l, i) => (l ? { description: l.description, amount: formatDecimal(l.amount), tax: formatDecimal((taxes[i] ?? ZERO).neg()), taxAmounts: rates[i] ?? [] } : null));
    return { credits, billed, givenBack, draws };
  }

  /**
   * Resumes `found` at `at`: a new cycle from `at` (the new anchor), its fixed charges invoiced in
   * advance and charged, less the credits (see the module's comment). FAILED_PRECONDITION when it
   * is no longer paused (resumed meanwhile).
   */
  async resumeAt(found: Subscription, at: Date, paymentMethodId: string | null, behavior: "create_prorations" | "none" = "create_prorations"): Promise<Subscription> {
    const card = await this.engine.reads.card(found.environmentId, found.rateCardId);
    const money = (d: Decimal) => displayMoney(formatDecimal(d), card.currency ?? "USD");
    const { invoice, subscription } = await retryingRaces(async () => {
      // Valued again on each attempt: what it gives back of the cycle's invoices is recorded on them as they were read (given-back.ts).
      const unused = behavior === "none" ? undefined : await this.unusedTime(card, found);
      const epoch = found.cycleEpoch + 1;
      const period = cycleBounds(at, 0, card.billingInterval);
      const next: Subscription = {
        ...found,
        status: "active",
        pausedAt: null,
        resumesAt: null,
        anchor: at,
        cycleEpoch: epoch,
        cycleIndex: 0,
        periodStart: period.start,
        periodEnd: period.end,
        usageSince: at,
        firstSeen: null,
        billingFailure: null,
        // The new cycle's fixed charges are billed at the row's terms.
        chargedTerms: null,
      };
      // Keyed by rate code, as a cycle close's: coupons and grants limited to rates apply to them.
      const lines = keyedFixedLines(this.engine.builder, (await this.engine.reads.rates(card, next.fixedRateQuantities)).fixed, next);
      const inv: Invoice = this.engine.builder.newInvoice(next, card, `cycle:${epoch}.0`, lines, period.start, period.end, at);
      const resumed = await this.stores.transaction(async (tx) => {
        const s = await tx.lockSubscription(found.environmentId, found.id);
        if (s?.status !== "paused" || s.cycleEpoch !== found.cycleEpoch) {
          throw new FailedPreconditionError("SUBSCRIPTION_NOT_PAUSED", `subscription ${found.id} is ${s?.status ?? "gone"}; only a paused subscription can be resumed`);
        }
        // What the unused time draws of an open invoice lowers what it asks (given-back.ts); the rest is credited, and all it gives back is recorded.
        const open = openReductions(tx, unused?.billed ?? [], unused?.draws ?? []);
        const own = (unused?.credits ?? []).flatMap((c, i) => (c ? lessReduction(c, open.perCredit[i] ?? ZERO, money) : []));
        await recordGivenBack(tx, unused?.billed ?? [], unused?.givenBack ?? new Map(), open.perInvoice, { clock: at, real: this.engine.now() }, () => lostRace(found.id));
        // Credits carried from before first, then the unused time of the cycle the pause cut short.
        const credited = await withCredits(tx, inv, [...(s.prorationCredits ?? []), ...own], at);
        await this.engine.builder.writeInvoice(tx, credited.invoice);
        // A new period starts: a commitment changed for the next period takes effect, as at a cycle close.
        const commitment = commitmentAfterClose(s.commitment);
        const row = { ...s, ...next, metadata: s.metadata, usageCheck: s.usageCheck, prorationCredits: credited.carried, commitment };
        await tx.updateSubscription(row);
        await tx.emit([subscriptionEvent("subscription.resumed", row)]);
        return { row, invoice: credited.invoice };
      });
      return { invoice: resumed.invoice, subscription: resumed.row };
    });
    await this.engine.settlement.settle(invoice, paymentMethodId);
    return subscription;
  }

  /** Resumes every paused subscription whose resumes_at is due by `now` (real time or one test clock); returns how many. */
  async resumeDue(now: Date, clockId: string | null): Promise<number> {
    let n = 0;
    const failed = new Set<string>();
    for (;;) {
      const due = (await this.stores.subscriptions.dueResumes(now, clockId, 100)).filter((s) => !failed.has(s.id));
      if (due.length === 0) return n;
      for (const s of due) {
        try {
          const subject = await this.stores.directory.subject(s.environmentId, s.subjectId);
          await this.resumeAt(s, s.resumesAt as Date, subject?.paymentMethodId ?? null);
          n++;
        } catch (err) {
          // Resumed meanwhile by a call or another runner (a billing error: expected, not logged);
          // or failing: logged, and tried again on the next run.
          if (!(err instanceof BillingError)) this.engine.events.resumeFailed?.(s.id, err);
          failed.add(s.id);
        }
      }
    }
  }
}
