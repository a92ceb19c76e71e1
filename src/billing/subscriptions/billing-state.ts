/**
 * A subject's billing state (customer access): its active subscriptions, each usage rate's units
 * used against those included, and per currency its credit balance and available credit
 * (credits/available.ts: the credit the current periods' closes can draw on less what their usage
 * costs so far).
 */
import { type CreditReads, type CurrencyAmount, creditFields, takenOffBalance } from "../credits/available.js";
import { dec, formatDecimal } from "../money.js";
import type { Caller } from "../tenancy.js";
import { invalid } from "../errors.js";
import { type Lookups, subjectNotFound } from "./lookups.js";
import type { Subscription } from "./types.js";

export class BillingStates {
  constructor(
    private readonly lookups: Lookups,
    /** Absent (credits not wired): no credit, no currency. */
    private readonly credits?: CreditReads & { balances(environmentId: string, subjectId: string): Promise<{ currency: string; balance: string }[]> },
  ) {}

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
    const subjectId = running[0]?.subjectId ?? (await this.lookups.subject(caller, subjectKey)).id;
    const credit = await this.creditOf(caller.environmentId, subjectId, active);
    // Still owed whatever became of its subscription: what was below the minimum charge, carried to the next invoice (payments/carries.ts).
    const carried = (await stores.carried?.pending(caller.environmentId, subjectId)) ?? [];
    return {
      hasActiveSubscription: active.length > 0,
      paused: paused.map((s) => ({ rateCardId: s.rateCardId, subscriptionId: s.id })),
      hasOverage: overage,
      active: active.map((s) => ({ rateCardId: s.rateCardId, subscriptionId: s.id })),
      usage,
      creditBalance: credit.balance,
      availableCredit: credit.available,
      carriedBalance: carried.map((c) => ({ currencyCode: c.currency, value: c.amount })),
    };
  }

  /** Balance (the ledger's sum) and available credit per currency (what the closes can draw on less the usage so far). */
  private async creditOf(environmentId: string, subjectId: string, active: Subscription[]): Promise<{ balance: CurrencyAmount[]; available: CurrencyAmount[] }> {
    const credits = this.credits;
    const balances = credits ? await credits.balances(environmentId, subjectId) : [];
    // Without any credit there is nothing to subtract the usage from: the usage is not priced.
    if (!credits || balances.length === 0) return { balance: [], available: [] };
    const byCurrency = new Map(balances.map((b) => [b.currency, b.balance]));
    return creditFields(byCurrency, await takenOffBalance(this.lookups.engine, credits, { environmentId, subjectId }, active, byCurrency));
  }
}
