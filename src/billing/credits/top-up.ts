/**
 * Auto top-up (DESIGN §14): when a subject's available credit falls below its top-up threshold
 * (alerts.ts decides the crossing, once, through the `top_up` state row), a paid grant of the set
 * amount is bought and charged to the payment method on file. The purchase's key (its grant's and
 * invoice's IDs, its charge's idempotency key) is derived from the crossing's number on the state
 * row (alerts.ts topUpKey), so a retried purchase of the same crossing never buys nor charges twice.
 * Without a payment method on file nothing is bought: the skip is told (logged) once, at the
 * crossing. A card saved while available credit is still below the line buys that crossing's
 * top-up at the next evaluation (alerts.ts asks `canBuy` first, which tells nothing); otherwise the
 * next top-up is for the next crossing.
 */
import type { Caller } from "../tenancy.js";
import type { BillingDirectory } from "../subscriptions/ports.js";
import type { BillingSubject } from "../subscriptions/types.js";
import type { TopUpBuyer } from "./alerts.js";
import type { CreditSettings } from "./types.js";
import type { CheckedGrant } from "./validation.js";

/** The paid grant a top-up buys: a checked grant, as CreditPurchases.purchase takes it (purchase.ts). */
export type TopUpGrant = CheckedGrant;

/** Buys a paid grant charged to the payment method on file (CreditPurchases, purchase.ts). */
export interface GrantPurchases {
  /** `idempotencyKey`: the same key buys (and charges) once, whoever calls with it. */
  purchase(caller: Caller, subject: BillingSubject, g: TopUpGrant, callbacks: undefined, now: Date, idempotencyKey?: string): Promise<unknown>;
}

/** The metadata key of a grant bought by an auto top-up: the crossing it was bought for. */
export const TOP_UP_METADATA_KEY = "auto_top_up";

export class AutoTopUps implements TopUpBuyer {
  constructor(
    private readonly directory: Pick<BillingDirectory, "subject" | "environmentMode">,
    private readonly purchases: GrantPurchases,
    /** Told of a crossing that bought nothing (no payment method on file). */
    private readonly skipped: (environmentId: string, subjectId: string, currency: string, reason: string) => void = () => {},
  ) {}

  async canBuy(environmentId: string, subjectId: string): Promise<boolean> {
    return Boolean((await this.directory.subject(environmentId, subjectId))?.paymentMethodId);
  }

  async topUp(environmentId: string, settings: CreditSettings, crossingKey: string, at: Date): Promise<number> {
    const top = settings.autoTopUp;
    if (!top) return 0;
    const subject = await this.directory.subject(environmentId, settings.subjectId);
    const mode = await this.directory.environmentMode(environmentId);
    if (!subject || !mode) return 0;
    if (!subject.paymentMethodId) {
      this.skipped(environmentId, settings.subjectId, settings.currency, "no payment method on file: no auto top-up for this crossing");
      return 0;
    }
    const grant: TopUpGrant = {
      currency: settings.currency,
      amount: top.amount,
      category: "paid",
      priority: top.priority,
      effectiveAt: at,
      expiresAt: null,
      appliesToRateCodes: [],
      metadata: { [TOP_UP_METADATA_KEY]: crossingKey },
    };
    await this.purchases.purchase({ environmentId, mode, keyKind: "secret" }, subject, grant, undefined, at, crossingKey);
    return 1;
  }
}
