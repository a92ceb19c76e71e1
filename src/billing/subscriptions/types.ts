/** Subscriptions, invoices, checkouts, payment methods and test clocks: domain types (their storage ports are ports.ts). */
import type { CreditApplication } from "../credits/types.js";
import type { BookedDiscount, BookedTax } from "../invoicing/booking.js";
import type {
  CancelOutcome,
  CardSetupRequest,
  ChargeContext,
  ChargeOutcome,
  InvoicePayment,
  PaymentLookup,
  PaymentPageRequest,
  ProviderKind,
  RefundContext,
  RefundLookup,
  RefundOutcome,
} from "../payments/types.js";
import type { BillingDetails, SellerDetails } from "../taxes/types.js";
import type { Metadata } from "../metadata.js";
import { dec } from "../money.js";

export type SubscriptionStatus = "active" | "cancelled" | "paused";

export interface Subscription {
  id: string;
  environmentId: string;
  subjectId: string;
  rateCardId: string;
  status: SubscriptionStatus;
  cancelsAtEndOfCycle: boolean;
  /** effective_at: cycles are counted from it. */
  anchor: Date;
  cycleIndex: number;
  periodStart: Date;
  periodEnd: Date;
  /** Start of the usage not yet invoiced (the period start, or the last rate-card change). */
  usageSince: Date;
  /** The first-seen anchors of the usage window from usageSince (see UsageWindow.firstSeen); absent or null: none. */
  firstSeen?: Record<string, { at: Date; billedMultiplier?: string }> | null;
  /** The usage window's adjustments for changes of its usage terms (UsageTermsAdjustment); absent or null: none. */
  usageAdjustments?: UsageTermsAdjustment[] | null;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  metadata: Metadata;
  testClockId: string | null;
  timelineId: string | null;
  cancelledAt: Date | null;
  cancelReason: string | null;
  /** Set while the subscription's cycle close keeps failing (it is set aside, see BillingEngine). */
  billingFailure: BillingFailure | null;
  /** Late-usage reconciliation state of its finalized windows (see UsageCheck). */
  usageCheck: UsageCheck | null;
  /** While paused: since when, and when it resumes by itself (null: only by a call). */
  pausedAt: Date | null;
  resumesAt: Date | null;
  /** How many times it resumed: a resume starts cycles afresh from its instant (the anchor; the index starts over), the epoch keeps their keys apart. */
  cycleEpoch: number;
  /**
   * The terms the current period's fixed charges were billed at where they differ from the terms above
   * (a change with proration_behavior none applies from the next cycle's charges); every proration and
   * unused-time credit is computed from them (proration.ts, chargedTerms). Absent or null: the above.
   * `rateCardId`: the card they were billed on, where not the above (chargedAfterSwitch, proration.ts).
   */
  chargedTerms?: (Pick<Subscription, "fixedRateQuantities" | "rateMultipliers"> & { rateCardId?: string }) | null;
  /**
   * Proration credits no invoice could take yet (a seat decrease, unused time of a pause), oldest
   * first: each is a negative `proration` line of the subscription's next invoices, as much of it
   * as an invoice can take without going negative (see proration.ts). Absent or empty: none.
   */
  prorationCredits?: ProrationCredit[];
  /** Minimum commitment per period (DESIGN §14), in the card's currency's smallest units: `current` for the period under way (null: none), `next` (when present) from the next on (null: removed); absent: none. */
  commitment?: Commitment | null;
  createdAt: Date;
}

/** A subscription's minimum commitment per period in the card's currency (ISO 4217): the one in effect, and one pending for the next period. */
export interface Commitment {
  currency: string;
  current: string | null;
  next?: string | null;
}

/** The commitment a subscription shows: the newest asked for (pending, else in effect); null: none. */
export function shownCommitment(s: Pick<Subscription, "commitment">): string | null {
  return !s.commitment ? null : s.commitment.next !== undefined ? s.commitment.next : s.commitment.current;
}

/** A proration credit carried to a subscription's next invoices: what its line says, and the amount left (negative, whole smallest units). */
export interface ProrationCredit {
  description: string;
  amount: string;
  /** The whole credit, negative, once part of it went onto an invoice; absent before. */
  whole?: string;
  /** Negative or "0": the exclusive tax paid for `amount` (pauses.ts unusedTime), kept when carried (proration.ts takeCredits), granted with it; absent (stored before): none. */
  tax?: string;
  /** `tax` per rate as it was paid (negative; inclusive ones inside `amount`): the taxes of its line when it lands on an invoice (InvoiceLine.paidTax); absent (stored before): taxed there. */
  taxAmounts?: BookedTax[];
}

/** Why a subscription's cycle close failed, and when the scheduler tries it again (real time). */
export interface BillingFailure {
  message: string;
  attempts: number;
  failedAt: Date;
  retryAt: Date;
}

export type InvoiceStatus = "draft" | "open" | "paid" | "void" | "uncollectible";

/**
 * What a line is: a fixed charge (in advance), usage of the invoice's window (in arrears), an adjustment
 * for late usage of an earlier, finalized window, `carried_balance` (an earlier invoice's amount due
 * below the provider's minimum charge, payments/carries.ts), or `charge` (written before lines had kinds).
 */
export type InvoiceLineKind = "fixed" | "usage" | "minimum" | "maximum" | "proration" | "adjustment" | "charge" | "commitment_true_up" | "credit_purchase";

export interface InvoiceLine {
  description: string;
  quantity: string;
  unitAmount: string;
  amount: string;
  kind: InvoiceLineKind;
  /** Usage and adjustment lines: the rate (and cell) priced, stable across recomputations. */
  key: string | null;
  /** Adjustment lines: the invoice whose usage window this adjusts. */
  windowInvoiceId: string | null;
  /** DESIGN §15: what discounts took off this line, and its tax per rate (absent: none). */
  discountAmounts?: BookedDiscount[];
  taxAmounts?: BookedTax[];
  /** A credit for unused time: the taxes paid for that time, per rate (negative), booked as its taxes whatever the invoice's rates or the buyer's tax status now; absent: taxed as booked. */
  paidTax?: BookedTax[];
}

/** The usage window an invoice bills, and what it was priced from: enough to recompute its usage lines (a draft at finalization; a finalized one when late usage arrives). */
export interface UsageWindow {
  from: Date;
  to: Date;
  rateCardId: string;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  /** The billing cycle the window lies in (minimums and maximums are prorated by the window's share of it); absent on windows billed before it was kept. */
  cycleStart?: Date;
  cycleEnd?: Date;
  /** Per unique_count rate (first-seen.ts firstSeenKey: its metric and code), its first-seen anchor `at` and the multiplier `billedMultiplier` its earlier windows [at, from) were billed at (absent on anchors kept before it was: the one in force): the window bills its chain's count since `at` less that before `from`, as billed; absent: none. */
  firstSeen?: Record<string, { at: Date; billedMultiplier?: string }>;
  /** The window's adjustments for changes of its usage terms (see UsageTermsAdjustment); absent: none. */
  usageAdjustments?: UsageTermsAdjustment[];
}

/** A change of usage terms kept for its window (usage-term-changes.ts): rate `code` from multiplier `old` ("taken": not charged) to `new` at `changedAt`, settled as old − new of its usage of [`since`, changedAt) on the window's invoice (priced then); `settled`: what it billed at once for the rate's changes of the window up to it (a lowering), taken off their old − new priced then (netOfSettled). */
export type UsageTermsAdjustment = { code: string; since: string; changedAt: string; old: string; new: string; description: string; settled?: string };

/**
 * What a subscription's finalized usage windows were last reconciled with: the windows (invoice
 * IDs), the span [from, to) they cover, and the number of events per pricing metric in that span
 * then. Events are append-only, so equal counts now mean no late usage arrived since.
 */
export interface UsageCheck {
  windows: string[];
  from: string | null;
  to: string | null;
  counts: Record<string, string>;
}

export interface Invoice {
  id: string;
  environmentId: string;
  subjectId: string;
  subscriptionId: string;
  /** Unique per subscription: `cycle:<n>` for a cycle boundary, `change:<ms>`, `final`. */
  periodKey: string;
  status: InvoiceStatus;
  currency: string;
  total: string;
  lines: InvoiceLine[];
  /** The unguessable part of the hosted invoice URL. */
  hostedToken: string;
  periodStart: Date;
  periodEnd: Date;
  createdAt: Date;
  /** The usage window its usage lines bill (none for an invoice of fixed charges only). */
  window: UsageWindow | null;
  /** A draft finalizes then, on its subscription's clock (clockId; null: real time). */
  finalizesAt: Date | null;
  clockId: string | null;
  finalizedAt: Date | null;
  /**
   * Credit grants spent on it when it became open (DESIGN §14), in order; on a draft, what would
   * be spent if it finalized now (computed on read, nothing spent). Absent: none.
   */
  creditsApplied?: CreditApplication[];
  /** What is charged: total plus carriedIn less creditsApplied, never negative. Absent: the total. */
  amountDue?: string;
  /**
   * DESIGN §16 (payments/carries.ts): earlier invoices' amounts due below the minimum charge taken
   * by it, oldest first: outside its subtotal and total (their own invoices booked them), in its
   * amount due, as Stripe's starting_balance. Absent: none.
   */
  carriedIn?: { sourceInvoiceId: string; sourceNumber: string | null; amount: string }[];
  /**
   * DESIGN §15 (booking.ts): the number given at finalization (null on a draft and on an empty
   * invoice kept internal); the line amounts less totalDiscount make subtotal; total (above) is
   * subtotal plus exclusive tax. Absent on invoices written before: subtotal = total, the rest 0.
   */
  number?: string | null;
  subtotal?: string;
  totalDiscount?: string;
  totalTax?: string;
  discounts?: BookedDiscount[];
  taxAmounts?: BookedTax[];
  /** Legal notes printed on it (reverse charge, tax exempt). */
  notes?: string[];
  /** The buyer and seller as printed, kept from its finalization. */
  customer?: BillingDetails | null;
  customerName?: string | null;
  seller?: SellerDetails | null;
  /** What credit notes credited of it so far (absent: 0). */
  amountCredited?: string;
  /**
   * DESIGN §16: how many times it was charged (absent: 0), when dunning charges it next on its
   * clock (null: no retry planned), and the payment's state at the provider (payments/dunning.ts).
   */
  attemptCount?: number;
  nextPaymentAttempt?: Date | null;
  payment?: InvoicePayment | null;
}

/** An invoice with no lines and a zero total: kept internal (DESIGN §15): not numbered, charged, shown in the portal or announced. */
export function isInternal(i: Pick<Invoice, "lines" | "total">): boolean {
  return i.lines.length === 0 && dec(i.total).isZero();
}

/** What an invoice charges: its amount due, the total when no credit was applied. */
export function amountDueOf(i: Pick<Invoice, "total" | "amountDue">): string {
  return i.amountDue ?? i.total;
}

export interface PaymentMethod {
  id: string;
  environmentId: string;
  subjectId: string;
  brand: string;
  last4: string;
  /**
   * Test provider: what charges to this method do (DESIGN §16's test cards): succeed, fail
   * (attached, then every charge fails), fail for insufficient funds, or need authentication.
   * A method saved through Stripe: "succeeds" (Stripe decides).
   */
  behavior: "succeeds" | "charge_fails" | "insufficient_funds" | "requires_action";
  createdAt: Date;
  /** DESIGN §16: the provider that saved it ("test" when absent), its id there (Stripe `pm_…`) and the subject's customer there (`cus_…`). */
  provider?: ProviderKind;
  providerRef?: string | null;
  customerRef?: string | null;
}

export type CheckoutStatus = "open" | "completed" | "cancelled" | "expired";

export interface CheckoutSession {
  id: string;
  environmentId: string;
  token: string;
  subjectId: string;
  kind: "subscribe" | "change" | "timeline" | "credit";
  /** What completing it does: the validated subscription (or change) request. */
  payload: Record<string, unknown>;
  successUrl: string;
  cancelledUrl: string;
  status: CheckoutStatus;
  /** Amount due on completion (smallest units) and its currency, for the page. */
  amountDue: string;
  currency: string;
  description: string;
  expiresAt: Date;
  createdAt: Date;
}

/**
 * A customer portal session: the unguessable token of a hosted portal URL, for one subject, until
 * it expires (real time). What the portal shows is read afresh on every page.
 */
export interface PortalSession {
  id: string;
  environmentId: string;
  token: string;
  subjectId: string;
  /** Where the portal's return link goes (normalized like a checkout's callback URLs). */
  returnUrl: string;
  expiresAt: Date;
  createdAt: Date;
}

export interface TestClock {
  id: string;
  environmentId: string;
  name: string;
  frozenTime: Date;
  createdAt: Date;
}

export type TimelineStatus = "draft" | "pending" | "active" | "completed";

export interface Timeline {
  id: string;
  environmentId: string;
  subjectId: string;
  rateCardId: string;
  subscriptionId: string | null;
  status: TimelineStatus;
  effectiveAt: Date | null;
  /** When the timeline next needs the engine: start (pending) or the current item's end (active). */
  nextTransitionAt: Date | null;
  testClockId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface TimelineItem {
  id: string;
  timelineId: string;
  environmentId: string;
  start: Date;
  /** null: runs until the subscription is cancelled. */
  end: Date | null;
  rateCardId: string;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  createdAt: Date;
}

/** Whether a timeline item's period holds the instant `t` (ms): start inclusive, end exclusive. */
export function covers(i: TimelineItem, t: number): boolean {
  return i.start.getTime() <= t && (i.end === null || t < i.end.getTime());
}

/** What a subject is called, for the pages its customer sees (the customer portal). */
export interface SubjectProfile {
  name: string | null;
  email: string | null;
}

/** A subject as billing needs it. */
export interface BillingSubject {
  id: string;
  environmentId: string;
  testClockId: string | null;
  paymentMethodId: string | null;
}

/** A payment processor. The built-in test provider stands in for a real one. */
export interface PaymentProvider extends RefundLookup, PaymentLookup {
  /** A test provider (fake cards): never used by a live environment (see payments.ts). */
  readonly test: boolean;
  /** Which provider it is (DESIGN §16); absent: "test". */
  readonly kind?: ProviderKind;
  /**
   * A provider whose card entry happens on its own page (Stripe Checkout in setup mode): where the
   * customer of a hosted checkout (or the portal's card replacement) goes to save a card; the
   * provider's webhook or the return URL completes it (whichever comes first, once). Absent: the
   * card number is typed into the hosted page and `tokenize`d.
   */
  startCardSetup?(request: CardSetupRequest): Promise<{ url: string; reference: string }>;
  /**
   * How the hosted invoice page's form completes a charge waiting for the customer: confirmAction,
   * the provider confirms the charge under `reference` itself (the test provider); startPayment,
   * the provider's page takes the payment (Stripe Checkout). Neither: payment_state's action URL.
   */
  confirmAction?(reference: string): Promise<ChargeOutcome>;
  startPayment?(request: PaymentPageRequest): Promise<{ url: string; reference: string }>;
  /** A line the hosted checkout shows under the card field (the test cards), if any. */
  readonly cardHint?: string;
  /** Turns a card number typed into the hosted checkout into a saved method, or a decline. */
  tokenize(cardNumber: string): { ok: true; brand: string; last4: string; behavior: PaymentMethod["behavior"] } | { ok: false; message: string };
  /**
   * Charges `amount`. `idempotencyKey` is chargeKey(invoice, attempt): the provider answers a
   * repeat of one attempt (a crash between the charge and its commit, then a retry) with the
   * first charge's outcome, never a second charge.
   */
  charge(method: PaymentMethod, amount: string, currency: string, idempotencyKey: string, context?: ChargeContext): Promise<ChargeOutcome>;
  /**
   * Refunds `amount` (null: what is left, payments/cancels.ts) of the charge made with key `chargeKey`
   * (DESIGN §15), never more than was charged in all. A repeat of `idempotencyKey` answers the
   * first refund, never a second one, with its amount: a credit note's (context.creditNoteId) even
   * when asked for another amount (the caller compares). A refusal is final; unreachable throws.
   */
  refund(chargeKey: string, amount: string | null, currency: string, idempotencyKey: string, context?: RefundContext): Promise<RefundOutcome>;
  /** Cancels the payment `reference` waiting for the customer (an invoice voided meanwhile, payments/cancels.ts); a repeat of `idempotencyKey` acts once. */
  cancel?(reference: string, idempotencyKey: string): Promise<CancelOutcome>;
}

/**
 * The provider's idempotency key of one payment attempt of an invoice (DESIGN §12): the same for
 * a retried call of that attempt, another for the next attempt.
 */
export function chargeKey(invoiceId: string, attempt: number): string {
  return `${invoiceId}:attempt-${attempt}`;
}
