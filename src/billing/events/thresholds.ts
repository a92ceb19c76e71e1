/**
 * usage.threshold_crossed (issue 16): for each active subscription and usage rate with included
 * units, an event when the period's usage reaches each configured percentage of them (80% and
 * 100% by default), once per period and percentage. The mark and the event are written in one
 * transaction and the mark's key is unique, so a repeated or concurrent check (several servers,
 * a test clock advanced twice) never fires twice. Checked by the scheduler: on a test clock at
 * every advance, on real time at most every `realTimeEveryMs`.
 */
import type { RateCard, UsageRate } from "../catalog/types.js";
import { newId } from "../ids.js";
import { type Decimal, dec, formatDecimal } from "../money.js";
import type { Subscription } from "../subscriptions/types.js";
import type { EventWrites, NewEvent, UsageThreshold } from "./types.js";

/** A threshold announced for one subscription, period, rate and percentage. */
export interface ThresholdMark {
  subscriptionId: string;
  periodKey: string;
  rateCode: string;
  percent: number;
  eventId: string;
}

/** The marks a check reads (outside a transaction) and what it pages through. */
export interface ThresholdStore {
  /** `rateCode@percent` of the marks of a subscription's period. */
  fired(subscriptionId: string, periodKey: string): Promise<Set<string>>;
  /** Active subscriptions on real time (clockId null) or one test clock with an id after `afterId`, by id. */
  activeAfter(clockId: string | null, afterId: string, limit: number): Promise<Subscription[]>;
}

/** Writes a mark in the transaction; false when it exists already (announced by another run). */
export interface ThresholdWrites {
  markThreshold(m: ThresholdMark, at: Date): Promise<boolean>;
}

/**
 * What a check reads of billing (the billing engine): rate cards, the used units per usage rate
 * of a period, the time, and a transaction to write marks and events in.
 */
export interface ThresholdBilling {
  reads: { card(environmentId: string, id: string): Promise<RateCard> };
  builder: { usedUnits(card: RateCard, s: Subscription, from: Date, to: Date): Promise<{ rate: UsageRate; used: Decimal }[]> };
  now(): Date;
  stores: { transaction<T>(fn: (tx: ThresholdWrites & EventWrites) => Promise<T>): Promise<T> };
}

export const DEFAULT_THRESHOLD_PERCENTS = [80, 100];

/** The key of a subscription's current period: its cycle (the epoch counts resumes). */
export function periodKey(s: Subscription): string {
  return `${s.cycleEpoch}.${s.cycleIndex}:${s.periodStart.toISOString()}`;
}

export class UsageThresholds {
  private lastRealTime = 0;

  constructor(
    private readonly engine: ThresholdBilling,
    private readonly store: ThresholdStore,
    private readonly percents: readonly number[] = DEFAULT_THRESHOLD_PERCENTS,
    private readonly realTimeEveryMs = 60_000,
    private readonly onError: (subscriptionId: string, err: unknown) => void = () => {},
  ) {}

  /** Checks every active subscription on the clock (or real time); returns how many events it wrote. */
  async check(clockId: string | null): Promise<number> {
    if (this.percents.length === 0) return 0;
    if (clockId === null) {
      const now = Date.now();
      if (now - this.lastRealTime < this.realTimeEveryMs) return 0;
      this.lastRealTime = now;
    }
    let n = 0;
    let after = "";
    for (;;) {
      const page = await this.store.activeAfter(clockId, after, 100);
      for (const s of page) {
        try {
          n += await this.checkOne(s);
        } catch (err) {
          this.onError(s.id, err);
        }
      }
      if (page.length < 100) return n;
      after = (page[page.length - 1] as Subscription).id;
    }
  }

  private async checkOne(s: Subscription): Promise<number> {
    const card = await this.engine.reads.card(s.environmentId, s.rateCardId);
    const key = periodKey(s);
    const fired = await this.store.fired(s.id, key);
    const crossed: { mark: ThresholdMark; event: NewEvent }[] = [];
    for (const { rate, used } of await this.engine.builder.usedUnits(card, s, s.usageSince, s.periodEnd)) {
      const included = dec(rate.includedUnits);
      if (!included.gt(0)) continue;
      for (const percent of this.percents) {
        if (fired.has(`${rate.code}@${percent}`) || used.lt(included.mul(percent).div(100))) continue;
        const eventId = newId("evt");
        const threshold: UsageThreshold = {
          subscriptionId: s.id,
          subjectId: s.subjectId,
          rateCode: rate.code,
          percent,
          includedUnits: rate.includedUnits,
          usedUnits: formatDecimal(used),
          periodStart: s.periodStart,
          periodEnd: s.periodEnd,
        };
        crossed.push({
          mark: { subscriptionId: s.id, periodKey: key, rateCode: rate.code, percent, eventId },
          event: { id: eventId, type: "usage.threshold_crossed", environmentId: s.environmentId, resource: { kind: "usage_threshold", threshold } },
        });
      }
    }
    if (crossed.length === 0) return 0;
    const at = this.engine.now();
    return this.engine.stores.transaction(async (tx) => {
      const events: NewEvent[] = [];
      for (const c of crossed) if (await tx.markThreshold(c.mark, at)) events.push(c.event);
      await tx.emit(events);
      return events.length;
    });
  }
}
