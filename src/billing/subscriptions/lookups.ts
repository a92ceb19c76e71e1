/**
 * What every subscription use case looks up: a subject, a rate card, a subscription, the time it
 * is for a subject (its test clock's, or real time) and the payment provider of the caller's
 * environment. Each refuses a missing one with the API's not-found error.
 */
import type { RateCardStore } from "../catalog/rate-cards.js";
import type { RateCard } from "../catalog/types.js";
import { FailedPreconditionError, NotFoundError, invalid } from "../errors.js";
import type { Caller } from "../tenancy.js";
import { steppedTime } from "./clock-step.js";
import type { BillingEngine } from "./engine.js";
import type { BillingSubject, PaymentProvider, Subscription } from "./types.js";

/** The error of a subject key that names no subject of the caller's environment. */
export function subjectNotFound(key: string, field = "subject_id"): NotFoundError {
  return new NotFoundError("SUBJECT_NOT_FOUND", `${field}: subject ${JSON.stringify(key)} not found`, { subject_id: key });
}

export class Lookups {
  constructor(
    readonly engine: BillingEngine,
    private readonly cards: Pick<RateCardStore, "get">,
  ) {}

  get stores() {
    return this.engine.stores;
  }

  /** The subject's "now": its test clock's time (as of the advance's step running, clock-step.ts), or real time. */
  async nowFor(subject: Pick<BillingSubject, "environmentId" | "testClockId">): Promise<Date> {
    if (!subject.testClockId) return this.engine.now();
    const stepped = steppedTime(subject.testClockId);
    if (stepped) return stepped;
    const clock = await this.stores.clocks.get(subject.environmentId, subject.testClockId);
    return clock ? clock.frozenTime : this.engine.now();
  }

  async subject(caller: Caller, key: string, field = "subject_id"): Promise<BillingSubject> {
    if (key === "") invalid(field, "is required");
    const s = await this.stores.directory.subject(caller.environmentId, key);
    if (!s) throw subjectNotFound(key, field);
    return s;
  }

  async cardOf(caller: Caller, id: string, field = "rate_card_id"): Promise<RateCard> {
    const card = id === "" ? undefined : await this.cards.get(caller.environmentId, id);
    if (!card) throw new NotFoundError("RATE_CARD_NOT_FOUND", `${field}: rate card ${JSON.stringify(id)} not found`, { rate_card_id: id });
    return card;
  }

  /**
   * A rate card for a new use: a new subscription, timeline or timeline item, or a change of
   * rate card. An archived card is refused (FAILED_PRECONDITION, reason RATE_CARD_ARCHIVED);
   * subscriptions already on it keep it (their cycles read it through the engine, not here).
   */
  async cardForNewUse(caller: Caller, id: string, field = "rate_card_id"): Promise<RateCard> {
    const card = await this.cardOf(caller, id, field);
    if (card.archivedAt) {
      throw new FailedPreconditionError(
        "RATE_CARD_ARCHIVED",
        `${field}: rate card ${card.id} was archived at ${card.archivedAt.toISOString()}; no new subscription, timeline item or rate-card change may use it`,
        { rate_card_id: card.id },
      );
    }
    return card;
  }

  async subscription(caller: Caller, id: string): Promise<Subscription> {
    const s = id === "" ? undefined : await this.stores.subscriptions.get(caller.environmentId, id);
    if (!s) throw new NotFoundError("SUBSCRIPTION_NOT_FOUND", `subscription ${JSON.stringify(id)} not found`, { subscription_id: id });
    return s;
  }

  /** The payment provider of the caller's environment (its payment settings' choice), if it has one. */
  paymentsFor(caller: Caller): Promise<PaymentProvider | undefined> {
    return this.engine.payments.forEnvironment(caller.environmentId, caller.mode);
  }
}
