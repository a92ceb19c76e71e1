/**
 * Subscription timelines (DESIGN §9): a draft of consecutive items (rate card, quantities and
 * multipliers over a period) that, once started, a subscription follows: pending until
 * effective_at, then active on the item covering that time, moving to the next item at each
 * boundary (invoiced like a rate-card change), completed with the subscription cancelled after
 * the last item that has an end. An open-ended last item runs until cancelled.
 */
import type { RateCard } from "../catalog/types.js";
import { FailedPreconditionError, NotFoundError, Violations, invalid } from "../errors.js";
import { newId } from "../ids.js";
import { total } from "../invoicing/lines.js";
import { type PageResult, checkPage } from "../pagination.js";
import { type Caller, systemCaller } from "../tenancy.js";
import { checkInstant, parseInstant } from "../time.js";
import type { SubscriptionChanges } from "./changes.js";
import type { CallbackUrls, Checkouts } from "./checkout.js";
import type { Lookups } from "./lookups.js";
import { noPaymentProvider } from "./payments.js";
import type { BillingTx } from "./ports.js";
import type { PreparedStart, Subscriptions } from "./subscribe.js";
import type { Terms } from "./terms.js";
import { type BillingSubject, type Timeline, type TimelineItem, covers } from "./types.js";

export interface TimelineItemInput {
  start?: Date;
  /** null: open-ended; a string to parse; undefined: left out (open-ended). */
  end: string | null | undefined;
  rateCardId: string;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
}

/** A draft timeline's start, built and not yet written (TimelineService.prepareBegin, writeBegin). */
export interface PreparedBegin {
  timeline: Timeline;
  effectiveAt: Date;
  /** The subject's time when prepared: a pending timeline's updated_at. */
  now: Date;
  /** Its subscription, when it starts now; undefined: pending until effective_at. */
  start: PreparedStart | undefined;
}

export type TimelineStartResult = { kind: "success"; timeline: Timeline } | { kind: "requires_action"; checkoutUrl: string };

/** What a timeline runs on: the subscription use cases it drives. */
export interface TimelineDeps {
  lookups: Lookups;
  terms: Terms;
  checkouts: Checkouts;
  subscriptions: Subscriptions;
  changes: SubscriptionChanges;
}

export class TimelineService {
  constructor(private readonly deps: TimelineDeps) {}

  private get lookups() {
    return this.deps.lookups;
  }

  private get stores() {
    return this.deps.lookups.stores;
  }

  async create(caller: Caller, input: { rateCardId: string; subjectId: string }): Promise<Timeline> {
    const v = new Violations();
    if (input.rateCardId === "") v.add("rate_card_id", "is required");
    if (input.subjectId === "") v.add("subject_id", "is required");
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, input.subjectId);
    const card = await this.lookups.cardForNewUse(caller, input.rateCardId);
    const now = await this.lookups.nowFor(subject);
    const t: Timeline = {
      id: newId("stl"),
      environmentId: caller.environmentId,
      subjectId: subject.id,
      rateCardId: card.id,
      subscriptionId: null,
      status: "draft",
      effectiveAt: null,
      nextTransitionAt: null,
      testClockId: subject.testClockId,
      createdAt: now,
      updatedAt: now,
    };
    await this.stores.timelines.insert(t);
    return t;
  }

  async get(caller: Caller, id: string): Promise<Timeline> {
    const t = id === "" ? undefined : await this.stores.timelines.get(caller.environmentId, id);
    if (!t) throw new NotFoundError("TIMELINE_NOT_FOUND", `subscription timeline ${JSON.stringify(id)} not found`, { subscription_timeline_id: id });
    return t;
  }

  async list(caller: Caller, limit?: number, offset?: number): Promise<PageResult<Timeline>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.stores.timelines.list(caller.environmentId, page);
  }

  async items(caller: Caller, id: string, limit?: number, offset?: number): Promise<PageResult<TimelineItem>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    const t = await this.get(caller, id);
    const all = await this.stores.timelines.items(t.id, t.environmentId);
    return { items: all.slice(page.offset, page.offset + page.limit), hasMore: all.length > page.offset + page.limit };
  }

  /** Adds items to a draft: with the items already there, consecutive, no overlap, no gap. */
  async addItems(caller: Caller, id: string, inputs: TimelineItemInput[]): Promise<TimelineItem[]> {
    const timeline = await this.get(caller, id);
    if (timeline.status !== "draft") throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${id} is ${timeline.status}; items can be added to a draft only`);
    const v = new Violations();
    if (inputs.length === 0) v.add("items", "is required: at least one item");
    const base = await this.lookups.cardOf(caller, timeline.rateCardId);
    const now = await this.lookups.nowFor({ environmentId: caller.environmentId, testClockId: timeline.testClockId });
    const made: TimelineItem[] = [];
    for (const [i, input] of inputs.entries()) {
      const iv = v.at("items").at(i);
      const pv = iv.at("period");
      let end: Date | null = null;
      if (!input.start) pv.add("start", "is required");
      const start = checkInstant(input.start, pv, "start");
      if (typeof input.end === "string") {
        const p = parseInstant(input.end);
        if (p.ok) end = new Date(p.ms);
        else pv.add("end", `${p.problem}, or null for an item without an end`);
      }
      if (start && end && end.getTime() <= start.getTime()) pv.add("end", "must be after period.start");
      const sv = iv.at("subscription_input");
      let card: RateCard | undefined;
      if (input.rateCardId === "") sv.add("rate_card_id", "is required");
      else {
        try {
          card = await this.lookups.cardForNewUse(caller, input.rateCardId, `items[${i}].subscription_input.rate_card_id`);
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
          sv.add("rate_card_id", "no rate card with this ID exists");
        }
      }
      let terms = { quantities: {} as Record<string, string>, multipliers: {} as Record<string, string> };
      if (card) {
        if (card.billingInterval !== base.billingInterval) sv.add("rate_card_id", `is ${card.billingInterval}; the timeline's rate card is ${base.billingInterval}`);
        else if (card.currency && base.currency && card.currency !== base.currency) sv.add("rate_card_id", `charges ${card.currency}; the timeline's rate card charges ${base.currency}`);
        terms = await this.deps.terms.checkTerms(card, input.fixedRateQuantities, input.rateMultipliers, sv);
      }
      made.push({
        id: newId("sti"),
        timelineId: timeline.id,
        environmentId: caller.environmentId,
        start: start ?? new Date(0),
        end,
        rateCardId: input.rateCardId,
        fixedRateQuantities: terms.quantities,
        rateMultipliers: terms.multipliers,
        createdAt: now,
      });
    }
    v.throwIfAny();
    // Together with the items already there: in time order, each starting where the last ended.
    const existing = await this.stores.timelines.items(timeline.id, timeline.environmentId);
    const all = [...existing.map((item) => ({ item, index: -1 })), ...made.map((item, index) => ({ item, index }))].sort((a, b) => a.item.start.getTime() - b.item.start.getTime());
    for (let k = 1; k < all.length; k++) {
      const prev = (all[k - 1] as (typeof all)[number]).item;
      const cur = all[k] as (typeof all)[number];
      const path = cur.index >= 0 ? v.at("items").at(cur.index).at("period") : v.at("items");
      if (prev.end === null) path.add(cur.index >= 0 ? "start" : "", "overlaps an open-ended item before it: only the last item may have no end");
      else if (cur.item.start.getTime() < prev.end.getTime()) path.add(cur.index >= 0 ? "start" : "", `overlaps the item that ends at ${prev.end.toISOString()}`);
      else if (cur.item.start.getTime() > prev.end.getTime()) path.add(cur.index >= 0 ? "start" : "", `leaves a gap after the item that ends at ${prev.end.toISOString()}`);
    }
    v.throwIfAny();
    await this.stores.transaction(async (tx) => {
      const locked = await tx.lockTimeline(caller.environmentId, timeline.id);
      if (locked?.status !== "draft") throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${id} is no longer a draft`);
      await tx.insertTimelineItems(made);
    });
    return made;
  }

  /** Starts a draft: pending until effective_at, or active now; a checkout first if a paid item needs a card. */
  async start(caller: Caller, id: string, input: { callbacks?: CallbackUrls; createCheckoutSession: string; effectiveAt?: Date }): Promise<TimelineStartResult> {
    const timeline = await this.get(caller, id);
    if (timeline.status !== "draft") throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${id} is ${timeline.status}; only a draft can be started`);
    const v = new Violations();
    if (!["", "when_required", "always"].includes(input.createCheckoutSession)) v.add("create_checkout_session", "must be when_required or always");
    const given = checkInstant(input.effectiveAt, v, "effective_at");
    const subject = await this.lookups.subject(caller, timeline.subjectId);
    const now = await this.lookups.nowFor(subject);
    const effectiveAt = given ?? now;
    const items = await this.stores.timelines.items(timeline.id, timeline.environmentId);
    if (items.length === 0) v.add("subscription_timeline_id", "the timeline has no items: add them before starting it");
    else if (given === input.effectiveAt && !items.some((i) => covers(i, effectiveAt.getTime()))) v.add("effective_at", "no item of the timeline covers this time");
    v.throwIfAny();
    const paid = await this.deps.terms.anyPaidItem(caller, items);
    if (!(await this.lookups.paymentsFor(caller))) {
      // A live environment (no provider): only a timeline that never needs a payment starts.
      if (paid) throw noPaymentProvider("the timeline has items with fixed charges, which need a payment");
      if (input.createCheckoutSession === "always") throw noPaymentProvider("create_checkout_session always needs a checkout, which needs a payment provider");
    }
    if (input.createCheckoutSession === "always" || (paid && !subject.paymentMethodId)) {
      const first = items.find((i) => covers(i, effectiveAt.getTime())) as TimelineItem;
      const card = await this.lookups.cardOf(caller, first.rateCardId);
      const lines = await this.lookups.engine.builder.fixedLines(card, { fixedRateQuantities: first.fixedRateQuantities, rateMultipliers: first.rateMultipliers });
      const amount = total(lines);
      const session = await this.deps.checkouts.open(
        caller,
        subject,
        "timeline",
        { timelineId: timeline.id, effectiveAt: effectiveAt.toISOString() },
        input.callbacks,
        card,
        amount,
        `Subscribe to ${card.name}`,
        now,
      );
      return { kind: "requires_action", checkoutUrl: this.deps.checkouts.url(session) };
    }
    return { kind: "success", timeline: await this.begin(caller, timeline.id, effectiveAt) };
  }

  /** Pending until effective_at, or active from it now: a draft only. */
  async begin(caller: Caller, id: string, effectiveAt: Date): Promise<Timeline> {
    const subject = await this.lookups.subject(caller, (await this.get(caller, id)).subjectId);
    const prepared = await this.prepareBegin(caller, id, effectiveAt, subject);
    await this.stores.transaction((tx) => this.writeBegin(tx, prepared));
    if (prepared.start) await this.deps.subscriptions.settle(prepared.start, subject.paymentMethodId);
    return this.get(caller, id);
  }

  /**
   * A draft's start, prepared and not written: pending (effective_at later than the subject's
   * now) or its subscription from the item covering effective_at. A paid timeline checkout's
   * completion writes it in its own transaction (writeBegin), so both happen or neither.
   */
  async prepareBegin(caller: Caller, id: string, effectiveAt: Date, subject: BillingSubject): Promise<PreparedBegin> {
    const timeline = await this.get(caller, id);
    const now = await this.lookups.nowFor(subject);
    if (effectiveAt.getTime() > now.getTime()) return { timeline, effectiveAt, now, start: undefined };
    return { timeline, effectiveAt, now, start: await this.prepareActivate(timeline, effectiveAt, subject) };
  }

  /** Writes a prepared start in `tx`: TIMELINE_NOT_DRAFT unless the timeline is still a draft. */
  async writeBegin(tx: BillingTx, { timeline, effectiveAt, now, start }: PreparedBegin): Promise<void> {
    const t = await tx.lockTimeline(timeline.environmentId, timeline.id);
    if (t?.status !== "draft") throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${timeline.id} is no longer a draft`);
    if (start) await this.deps.subscriptions.write(tx, start);
    else await tx.updateTimeline({ ...t, status: "pending", effectiveAt, nextTransitionAt: effectiveAt, updatedAt: now });
  }

  /** The subscription of the item covering `at`, prepared: written, it makes the timeline active. */
  private async prepareActivate(timeline: Timeline, at: Date, subject: BillingSubject): Promise<PreparedStart> {
    const caller = systemCaller(timeline.environmentId);
    const items = await this.stores.timelines.items(timeline.id, timeline.environmentId);
    const item = items.find((i) => covers(i, at.getTime()));
    if (!item) invalid("effective_at", "no item of the timeline covers this time");
    const card = await this.lookups.cardOf(caller, item.rateCardId);
    const terms = { quantities: item.fixedRateQuantities, multipliers: item.rateMultipliers };
    return this.deps.subscriptions.prepareNow(caller, subject, card, terms, {}, timeline.id, at);
  }

  /** Creates the subscription from the item covering `at` (a pending timeline's effective_at); the timeline becomes active. */
  private async activate(timeline: Timeline, at: Date): Promise<void> {
    const subject = await this.lookups.subject(systemCaller(timeline.environmentId), timeline.subjectId);
    const start = await this.prepareActivate(timeline, at, subject);
    await this.stores.transaction((tx) => this.deps.subscriptions.write(tx, start));
    await this.deps.subscriptions.settle(start, subject.paymentMethodId);
  }

  /** Ends a timeline that has nothing left to run (its subject is gone). */
  private async complete(timeline: Timeline, at: Date): Promise<void> {
    await this.stores.transaction(async (tx) => {
      const t = await tx.lockTimeline(timeline.environmentId, timeline.id);
      if (t && t.status !== "completed") await tx.updateTimeline({ ...t, status: "completed", nextTransitionAt: null, updatedAt: at });
    });
  }

  /** Moves a due timeline on at its transition time. */
  async transition(timeline: Timeline): Promise<void> {
    const at = timeline.nextTransitionAt as Date;
    if (timeline.status === "pending") {
      // A subject deleted while its timeline was pending: nothing to start.
      if (!(await this.stores.directory.subject(timeline.environmentId, timeline.subjectId))) return this.complete(timeline, at);
      await this.activate(timeline, at);
      return;
    }
    const items = await this.stores.timelines.items(timeline.id, timeline.environmentId);
    const next = items.find((i) => i.start.getTime() === at.getTime());
    const sub = timeline.subscriptionId ? await this.stores.subscriptions.get(timeline.environmentId, timeline.subscriptionId) : undefined;
    const caller = systemCaller(timeline.environmentId);
    if (sub && sub.status === "active") {
      if (next) {
        const card = await this.lookups.cardOf(caller, next.rateCardId);
        await this.deps.changes.switchTo(sub, card, { fixedRateQuantities: next.fixedRateQuantities, rateMultipliers: next.rateMultipliers }, at);
      } else {
        const subject = await this.stores.directory.subject(timeline.environmentId, timeline.subjectId);
        await this.deps.changes.cancelAt(sub, at, "subscription timeline completed", subject?.paymentMethodId ?? null);
      }
    }
    await this.stores.transaction(async (tx) => {
      const t = await tx.lockTimeline(timeline.environmentId, timeline.id);
      if (!t || t.nextTransitionAt?.getTime() !== at.getTime()) return;
      const done = !next || !sub || sub.status !== "active";
      await tx.updateTimeline({ ...t, status: done ? "completed" : "active", nextTransitionAt: done ? null : next.end, updatedAt: at });
    });
  }
}
