/** A subject's billing state (customer access): its active subscriptions and each usage rate's units used against those included. */
import { dec, formatDecimal } from "../money.js";
import type { Caller } from "../tenancy.js";
import { invalid } from "../errors.js";
import { type Lookups, subjectNotFound } from "./lookups.js";

export class BillingStates {
  constructor(private readonly lookups: Lookups) {}

  async billingState(caller: Caller, subjectKey: string) {
    const { engine, stores } = this.lookups;
    // The subject and its subscriptions in one read, which also tells a key that names no subject
    // (the error every subject lookup gives, without looking it up again).
    if (subjectKey === "") invalid("subject_id", "is required");
    const running = await stores.subscriptions.runningOfKey(caller.environmentId, subjectKey);
    if (running === undefined) throw subjectNotFound(subjectKey);
    const active = running.filter((s) => s.status === "active");
    const usage: { includedUnits: string; pricingMetricId: string; rateName: string; usedUnits: string }[] = [];
    let overage = false;
    for (const s of active) {
      const card = await engine.reads.card(s.environmentId, s.rateCardId);
      for (const { rate, used } of await engine.builder.usedUnits(card, s, s.usageSince, s.periodEnd)) {
        if (used.gt(dec(rate.includedUnits))) overage = true;
        usage.push({ includedUnits: rate.includedUnits, pricingMetricId: rate.pricingMetricId, rateName: rate.name, usedUnits: formatDecimal(used) });
      }
    }
    // Paused subscriptions are listed apart, so an app can gate access on them (no usage: none is billed while paused).
    const paused = running.filter((s) => s.status === "paused");
    return {
      hasActiveSubscription: active.length > 0,
      paused: paused.map((s) => ({ rateCardId: s.rateCardId, subscriptionId: s.id })),
      hasOverage: overage,
      active: active.map((s) => ({ rateCardId: s.rateCardId, subscriptionId: s.id })),
      usage,
    };
  }
}
