/**
 * Storage ports of billing, one per aggregate: what the use cases and the engine read, and what
 * they write inside one transaction (a cycle close locks subscriptions and writes invoices; a
 * completed checkout saves a payment method on the subject). src/db implements them on SQL;
 * test/fakes in memory.
 */
import type { ProviderEventWrites } from "../payments/event-writes.js";
import type { BookingDiscount } from "../coupons/types.js";
import type { CouponWrites } from "../coupons/ports.js";
import type { GivenBackWrites, InvoiceVoidNoteWrites } from "../credit-notes/ports.js";
import type { CreditWrites } from "../credits/ports.js";
import type { CreditGrant, LedgerEntry } from "../credits/types.js";
import type { DunningWrites } from "../payments/dunning.js";
import type { CarryReads, CarryWrites } from "../payments/carries.js";
import type { BillingDetails, SellerDetails, TaxProvider } from "../taxes/types.js";
import type { ThresholdWrites } from "../events/thresholds.js";
import type { EventWrites } from "../events/types.js";
import type { Page, PageResult } from "../pagination.js";
import type { EnvironmentMode } from "../tenancy.js";
import type {
  BillingFailure,
  BillingSubject,
  CheckoutSession,
  CheckoutStatus,
  Invoice,
  InvoiceLine,
  InvoiceStatus,
  PaymentMethod,
  PortalSession,
  SubjectProfile,
  Subscription,
  SubscriptionStatus,
  TestClock,
  Timeline,
  TimelineItem,
} from "./types.js";

export interface SubscriptionStore {
  get(environmentId: string, id: string): Promise<Subscription | undefined>;
  list(environmentId: string, filter: { subjectId?: string; rateCardId?: string }, page: Page): Promise<PageResult<Subscription>>;
  /** The environment's subscriptions set aside (their cycle close keeps failing), the next retry first. */
  failing(environmentId: string, page: Page): Promise<PageResult<Subscription>>;
  /** The environment's subscriptions, newest first, of one status and/or rate card (the dashboard's list). */
  listAll(environmentId: string, filter: { status?: SubscriptionStatus; rateCardId?: string }, page: Page): Promise<PageResult<Subscription>>;
  /** A subject's active and paused subscriptions, oldest first, in one read (billing state needs both). */
  running(environmentId: string, subjectId: string): Promise<Subscription[]>;
  /**
   * The same for the subject a key names (its ID, or its external ID: an ID match wins), in one
   * read when it has some; undefined when no subject has that key.
   */
  runningOfKey(environmentId: string, key: string): Promise<Subscription[] | undefined>;
  /**
   * Active subscriptions whose period ended by `now` (before it when strict), on real time
   * (clockId null) or one test clock, oldest first; those set aside until after `realNow` are not due.
   */
  due(now: Date, clockId: string | null, limit: number, strict: boolean, realNow: Date): Promise<Subscription[]>;
  /**
   * Records a failed cycle close on the subscription row (outside any transaction), only if the
   * row is still active in the cycle `s` was in; false when it had moved on.
   */
  setBillingFailure(s: Subscription, failure: BillingFailure): Promise<boolean>;
  /**
   * Cancelled subscriptions on real time (clockId null) or one test clock, whose late usage has
   * not been checked since `checkedBefore` (null: all), least recently checked first.
   */
  ended(clockId: string | null, limit: number, checkedBefore: Date | null): Promise<Subscription[]>;
  /** Paused subscriptions whose resumes_at is at or before `now`, on real time (clockId null) or one test clock, earliest first. */
  dueResumes(now: Date, clockId: string | null, limit: number): Promise<Subscription[]>;
  /** Records that these subscriptions' late usage was checked at `at` (real time). */
  markChecked(ids: string[], at: Date): Promise<void>;
}

/** What GET /invoices filters on (DESIGN §15); every field absent: no filter. created is [from, to). */
export interface InvoiceFilter {
  subjectId?: string;
  status?: InvoiceStatus;
  createdFrom?: Date;
  createdTo?: Date;
  number?: string;
}

export interface InvoiceStore {
  get(environmentId: string, id: string): Promise<Invoice | undefined>;
  byToken(token: string): Promise<Invoice | undefined>;
  /** A subscription's invoice of one period key (e.g. the one that opened a cycle), with its lines. */
  byPeriodKey(subscriptionId: string, periodKey: string): Promise<Invoice | undefined>;
  /** A subscription's invoices, not void, whose period lies within [from, to], with their lines: what was billed for a billing period (commitments.ts). */
  billedWithin(subscriptionId: string, environmentId: string, from: Date, to: Date): Promise<Invoice[]>;
  /** The environment's invoices matching `filter` (every one when empty), oldest first (by seq). */
  list(environmentId: string, filter: InvoiceFilter, page: Page): Promise<PageResult<Invoice>>;
  /**
   * Totals of the invoices finalized in [from, to) that bill something (open, paid or
   * uncollectible: not void), per currency, exact decimal text in the smallest unit.
   */
  revenue(environmentId: string, from: Date, to: Date): Promise<{ currency: string; total: string; count: number }[]>;
  /** The environment's invoices across subjects, newest first, of one status or any, of one subscription or any (the dashboard's lists). */
  listAll(environmentId: string, filter: { status?: InvoiceStatus; subscriptionId?: string }, page: Page): Promise<PageResult<Invoice>>;
  /** A subject's `limit` newest invoices, newest first (the customer portal's list). */
  recent(environmentId: string, subjectId: string, limit: number): Promise<Invoice[]>;
  /** Drafts whose grace period ended by `now` on real time (clockId null) or one test clock, earliest first. */
  dueDrafts(now: Date, clockId: string | null, limit: number): Promise<Invoice[]>;
  /** When the next of test clock `clockId`'s drafts is due: the earliest finalizes_at after `after` (if given) and by `upTo`; null if none (Scheduler.stepUpTo). */
  nextDraftDue(after: Date | null, upTo: Date, clockId: string): Promise<Date | null>;
  /**
   * A subscription's finalized invoices that bill a usage window (without their lines), each
   * with what was billed for its window so far: its usage lines, its commitment_true_up lines
   * (the period's true-up when the window closed it), and every line tied to it (windowInvoiceId:
   * adjustments of it, corrections of its period's true-up).
   */
  windows(subscriptionId: string, environmentId: string): Promise<{ invoice: Invoice; billed: InvoiceLine[] }[]>;
  /**
   * The windows (as `windows`) of each of these subscriptions of one environment, in one read:
   * what a cycle close of a batch needs. `environmentId`: theirs (the billing code gives it).
   */
  windowsOf(subscriptionIds: string[], environmentId: string): Promise<Map<string, { invoice: Invoice; billed: InvoiceLine[] }[]>>;
  /**
   * A subscription's invoices created in (from, to], any status, oldest first (by seq), each with
   * its lines and every line tied to it (windowInvoiceId, on any invoice): the invoice that closed
   * the billing period [from, to) is among them, with the corrections of its true-up (late-usage.ts).
   */
  createdWithin(subscriptionId: string, environmentId: string, from: Date, to: Date): Promise<{ invoice: Invoice; tied: InvoiceLine[] }[]>;
}

/** `environmentId`: the environment of the method or subjects, named in every statement (the sharding key); the billing code gives it. */
export interface PaymentMethodStore {
  get(id: string, environmentId: string): Promise<PaymentMethod | undefined>;
  /** The saved payment method of each of these subjects (of one environment) that has one. */
  ofSubjects(subjectIds: string[], environmentId: string): Promise<Map<string, PaymentMethod>>;
}

export interface CheckoutStore {
  insert(c: CheckoutSession): Promise<void>;
  get(token: string): Promise<CheckoutSession | undefined>;
  /** Open checkouts of subjects on real time whose expiry passed by `before`, oldest first, at most `limit`, in every environment (checkout-expiry.ts). */
  expiredOpen(before: Date, limit: number): Promise<CheckoutSession[]>;
}

/** Customer portal sessions, found by their token (which is unique). */
export interface PortalSessionStore {
  insert(s: PortalSession): Promise<void>;
  get(token: string): Promise<PortalSession | undefined>;
}

export interface TimelineStore {
  insert(t: Timeline): Promise<void>;
  get(environmentId: string, id: string): Promise<Timeline | undefined>;
  list(environmentId: string, page: Page): Promise<PageResult<Timeline>>;
  /** Every item of a timeline, in time order. */
  items(timelineId: string, environmentId: string): Promise<TimelineItem[]>;
  /** Pending or active timelines whose next transition is at or before `now`, earliest first. */
  due(now: Date, clockId: string | null, limit: number): Promise<Timeline[]>;
}

/** Where a clock's advance is: "advancing" from the move of its time until everything due by then has run, then "ready". */
export type TestClockStatus = "ready" | "advancing";

/** A test clock as stored: with its advance's status and when that advance moved it. */
export interface StoredTestClock extends TestClock {
  status: TestClockStatus;
  advanceStartedAt: Date | null;
}

export interface TestClockStore {
  /** Stores a new clock, `ready`. */
  insert(c: TestClock): Promise<void>;
  get(environmentId: string, id: string): Promise<StoredTestClock | undefined>;
  /** The environment's clocks, newest first. */
  list(environmentId: string, page: Page): Promise<PageResult<StoredTestClock>>;
  /**
   * Moves the clock to `to` if it is not past it already, and in the same statement sets it
   * `advancing` since `startedAt`; false if it is past `to`.
   */
  advance(environmentId: string, id: string, to: Date, startedAt: Date): Promise<boolean>;
  /** Sets the clock `ready` if its time is still `at` (a later advance owns it otherwise); false then. */
  finish(environmentId: string, id: string, at: Date): Promise<boolean>;
  /**
   * Clocks of every environment `advancing` since before `startedBefore` (their advance was cut
   * short, or is still running past its lease), oldest first: the scheduler finishes them.
   */
  stalled(startedBefore: Date, limit: number): Promise<StoredTestClock[]>;
  /**
   * Takes over a stalled advance: renews its lease (advance_started_at to `now`) if it is still
   * `advancing` at `at` since `startedAt`; false if another runner or an advance took it meanwhile.
   */
  takeOver(environmentId: string, id: string, at: Date, startedAt: Date, now: Date): Promise<boolean>;
}

/** Who billing bills: a subject as billing needs it (by ID or external ID), and an environment's mode. */
export interface BillingDirectory {
  subject(environmentId: string, key: string): Promise<BillingSubject | undefined>;
  /** A live subject's name and email, by its ID (what the customer portal greets). */
  profile(environmentId: string, subjectId: string): Promise<SubjectProfile | undefined>;
  /** The mode of an environment (undefined when there is no such environment). */
  environmentMode(environmentId: string): Promise<EnvironmentMode | undefined>;
  /** How long an environment's cycle invoices stay drafts, in seconds (0: finalized at once). */
  invoiceGraceSeconds(environmentId: string): Promise<number>;
}

/** Subscription writes inside a transaction. */
export interface SubscriptionWrites {
  /** The subscription, locked until the transaction ends. */
  lockSubscription(environmentId: string, id: string): Promise<Subscription | undefined>;
  /** Locks the subscriptions of environment `environmentId` it can (on MySQL, rows another transaction holds are skipped). */
  lockSubscriptions(ids: string[], environmentId: string): Promise<Subscription[]>;
  insertSubscription(s: Subscription): Promise<void>;
  updateSubscription(s: Subscription): Promise<void>;
  /** Several subscriptions at once (a cycle close's batch): on MySQL in one round trip. */
  updateSubscriptions(list: Subscription[]): Promise<void>;
}

/** Invoice writes inside a transaction. */
export interface InvoiceWrites {
  /** Throws AlreadyExistsError when the subscription already has an invoice for that period key. */
  insertInvoice(i: Invoice): Promise<void>;
  /** Several invoices at once (multi-row inserts); the same unique key applies. */
  insertInvoices(list: Invoice[]): Promise<void>;
  /** Locks a draft's row before its credit is spent (two runs finalizing it meet there); false when it is no longer a draft. */
  lockDraft(environmentId: string, id: string): Promise<boolean>;
  /** Writes a draft's final lines and total and makes it open, if it is still a draft; false otherwise. */
  finalizeDraft(i: Invoice, at: Date): Promise<boolean>;
  /**
   * Moves these invoices from `from` to `to` (those still in `from`, locked); returns the ids it
   * moved. `environmentId`: theirs, named in every statement (the sharding key); the billing
   * code gives it.
   */
  moveInvoices(ids: string[], from: InvoiceStatus, to: InvoiceStatus, at: Date, environmentId: string): Promise<string[]>;
}

/** Checkout writes inside a transaction. */
export interface CheckoutWrites {
  lockCheckout(token: string): Promise<CheckoutSession | undefined>;
  /** `payload`: the checkout's payload written with it (a completion records the invoice it charges). */
  updateCheckoutStatus(id: string, status: CheckoutStatus, environmentId: string, payload?: Record<string, unknown>): Promise<void>;
}

/** Payment-method writes inside a transaction: a saved card, and the subject it is saved on. */
export interface PaymentMethodWrites {
  insertPaymentMethod(pm: PaymentMethod): Promise<void>;
  /** `environmentId`: the subject's, named in the statement (the sharding key); the billing code gives it. */
  setSubjectPaymentMethod(subjectId: string, paymentMethodId: string, environmentId: string): Promise<void>;
}

/** Timeline writes inside a transaction. */
export interface TimelineWrites {
  lockTimeline(environmentId: string, id: string): Promise<Timeline | undefined>;
  updateTimeline(t: Timeline): Promise<void>;
  insertTimelineItems(items: TimelineItem[]): Promise<void>;
}

/** What an invoice prints about its parties, and the tax rates its rate card brings (DESIGN §15). */
export interface InvoiceParties {
  /** The subject's display name. */
  customerName: string | null;
  customer: BillingDetails | null;
  seller: SellerDetails | null;
  /** The default tax rates of the rate card the invoice priced (its usage window's, else its subscription's; empty: none). */
  cardTaxRateIds: string[];
  /**
   * The default tax rates of the card of each earlier usage window its adjustment lines adjust, by
   * that window's invoice ID, when another card priced it (a change of rate card came between);
   * and of the card a change's credit or charge line names, by the line's key (change-lines.ts).
   */
  adjustedCardTaxRateIds?: Map<string, string[]>;
}

/** A "once" discount an upgrade's change lines took (BookingTx.holdOnce): its once_taken as booked (`read`), and what to hold (`taken`; absent: spent). */
export interface OnceHold {
  discountId: string;
  read: string | null;
  taken?: string;
}

/**
 * What booking an invoice reads and writes in its finalizing transaction (DESIGN §15; see
 * booking.ts in this folder): discounts, parties, taxes, numbers.
 */
export interface BookingTx {
  /** The discounts that apply to `inv` finalized at `at` (its currency, its subscription's and subject's, active), in the order they apply. */
  discountsFor(inv: Invoice, at: Date): Promise<BookingDiscount[]>;
  /** Records that these discounts (of environment `environmentId`) discounted invoice `invoiceId` (a "once" discount ends). */
  discounted(discountIds: string[], invoiceId: string, at: Date, environmentId: string): Promise<void>;
  /**
   * Locks these "once" discounts (of environment `environmentId`) that an upgrade's change lines
   * took, booked for invoice `invoiceId` from an unlocked read, and answers false, writing nothing,
   * unless each is still as that read found it: active, on no invoice yet, held for no other invoice,
   * its once_taken `read`. Then holds those with a `taken` (a decimal string, added to what was
   * taken before) for `invoiceId`: they discount no other invoice, and an amount off is offered to
   * that one less what was taken; those without are spent (`discounted` records them) (change-credit.ts).
   */
  holdOnce(holds: readonly OnceHold[], invoiceId: string, environmentId: string): Promise<boolean>;
  parties(inv: Invoice): Promise<InvoiceParties>;
  /**
   * This booking for a batch `list` booked together (finalizeAllOpen): what it reads of each of
   * them (parties, their cards' tax rates, which discounts could apply) is read at once, with
   * set-based reads, and its discountsFor and parties answer from that, the same as one by one
   * (an invoice not in `list` is read on its own). Optional: without it, each is read on its own.
   */
  prefetch?(list: readonly Invoice[]): Promise<BookingTx>;
  /** The tax engine (the built-in rates, or another adapter). */
  taxes: TaxProvider;
  /**
   * Takes the next `count` numbers of the environment's `kind` sequence, its row locked until the
   * transaction ends (so numbers are gapless: a rollback gives them back): the prefix and the first.
   */
  nextNumbers(environmentId: string, kind: "invoice" | "credit_note", count: number): Promise<{ prefix: string; first: number }>;
}

/** What a batch's finalization asks of spendable credit: a subject's grants in `currency` spendable at `at`. */
export interface SpendableQuery {
  subjectId: string;
  currency: string;
  at: Date;
}

/** Credit writes in a billing transaction; `spendableOfAll` (optional): a batch's spendable grants in one read. */
export interface BillingCreditWrites extends CreditWrites {
  /** CreditWrites.spendable of each query (subjects of environment `environmentId`), in their order, from one read. */
  spendableOfAll?(environmentId: string, queries: readonly SpendableQuery[]): Promise<CreditGrant[][]>;
  /**
   * Gives back what invoice `invoiceId` of subject `subjectId` spent, in the transaction that
   * voids it: for each of its "application" entries a "reinstatement" entry of the same amount at
   * `at`, and the grant's remaining restored (depleted → active), each grant locked first. A grant
   * expired, voided or past its expires_at by `at` lets the amount go again at once: an "expiry"
   * (or "void") entry of −amount on the invoice, its remaining unchanged. At most once per
   * application: a second reinstatement throws AlreadyExistsError (the ledger's unique key).
   * The new entries.
   */
  reinstate?(environmentId: string, subjectId: string, invoiceId: string, at: Date): Promise<LedgerEntry[]>;
}

/**
 * Everything billing writes in one transaction, and the events of those changes (the outbox);
 * `credits`: spending and granting credit in the same transaction (a finalization's credits);
 * `booking`: discounts, taxes and numbers (DESIGN §15); both absent only where a store keeps none
 * (the in-memory fake of the tests).
 */
export type BillingTx = SubscriptionWrites &
  InvoiceWrites &
  CheckoutWrites &
  PaymentMethodWrites &
  TimelineWrites &
  EventWrites &
  ThresholdWrites & {
    credits?: BillingCreditWrites;
    booking?: BookingTx;
    coupons?: CouponWrites;
    providerEvents?: ProviderEventWrites;
    dunning?: DunningWrites;
    /** Amounts due below the provider's minimum charge, carried to the next invoice (payments/carries.ts). */
    carries?: CarryWrites;
    /**
     * The invoice's credit notes, voided with it (credit-notes/invoice-void.ts); and what a seat
     * decrease gives back of an invoice, on its amount credited under its row lock (given-back.ts).
     */
    creditNotes?: InvoiceVoidNoteWrites & GivenBackWrites;
  };

/** Billing's storage: a port per aggregate, and the transaction that spans them. */
export interface BillingStores {
  subscriptions: SubscriptionStore;
  invoices: InvoiceStore;
  paymentMethods: PaymentMethodStore;
  checkouts: CheckoutStore;
  portals: PortalSessionStore;
  timelines: TimelineStore;
  clocks: TestClockStore;
  directory: BillingDirectory;
  /** Debits carried to a subject's next invoice and not taken yet (payments/carries.ts); absent: none kept. */
  carried?: CarryReads;
  /**
   * `fn` in one transaction, committed or not at all. A deadlock or lock wait timeout (rolled
   * back in full) is an AbortedError, which callers may retry.
   */
  transaction<T>(fn: (tx: BillingTx) => Promise<T>): Promise<T>;
  /**
   * Runs `fn` as the scheduler's work, not the calling request's change: its commits do not mark
   * the request's Idempotency-Key (DESIGN §12). A cancel first closes the cycle that ended
   * (SubscriptionChanges.caughtUp), as the scheduler would have; a cancel that fails after that
   * close is run again by a retry with its key, not answered IDEMPOTENCY_OUTCOME_LOST.
   */
  asScheduler<T>(fn: () => Promise<T>): Promise<T>;
}
