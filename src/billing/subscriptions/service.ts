/**
 * Subscription use cases: subscribe (at once, or through a hosted checkout), cancel, change rate
 * card, invoices, billing state and test clocks. Money is computed by the engine and invoicing/.
 */
import { type ChargedRates, chargedRates, offeredAddOns } from "../catalog/addons.js";
import type { RateCardStore } from "../catalog/rate-cards.js";
import type { RateCard } from "../catalog/types.js";
import { AbortedError, FailedPreconditionError, NotFoundError, Violations, invalid } from "../errors.js";
import { newId, randomBase62 } from "../ids.js";
import { cycleBounds } from "../invoicing/cycles.js";
import { type Line, line, total } from "../invoicing/lines.js";
import { type Metadata, checkMetadata } from "../metadata.js";
import { type Decimal, ZERO, amountProblem, dec, formatDecimal, parseDecimal, storageProblem, unitAmountProblem } from "../money.js";
import { type PageResult, checkPage } from "../pagination.js";
import { type Caller, systemCaller } from "../tenancy.js";
import { checkInstant } from "../time.js";
import { type BillingEngine, multiplierOf } from "./engine.js";
import { noPaymentProvider } from "./payments.js";
import { type BillingSubject, type CheckoutSession, type Invoice, type PaymentProvider, type Subscription, type TestClock, type TimelineItem, covers } from "./types.js";

export const CHECKOUT_TTL_MS = 24 * 3_600_000;

/** What a hosted checkout of an environment without a payment provider (live) tells the customer. */
export const NO_PROVIDER_PAGE_MESSAGE = "This environment has no payment provider configured, so this checkout cannot take a payment. Test cards are not accepted in live mode.";

export interface CallbackUrls {
  successUrl: string;
  cancelledUrl: string;
}

export interface CreateSubscriptionInput {
  rateCardId: string;
  subjectId: string;
  callbacks?: CallbackUrls;
  createCheckoutSession: string;
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  metadata: Metadata;
  timelineId: string;
}

/** How many times a cancellation or change that lost a race to a cycle close (or a deadlock) is tried in all. */
export const RACE_ATTEMPTS = 8;

/** The error of an attempt that lost a race: retried inside the service, `aborted` (409) if it must give up. */
/**
 * The fence of a cancel or change at `at`: the locked row's cycle must not have ended unclosed
 * before it, or the final or change invoice would span the cycle boundary (billing usage the
 * cycle close bills again, and skipping the next cycle's fixed charges). On the API's path
 * (`inCurrentPeriod`) a cycle ending exactly at `at` must be closed first too: a lost race with
 * the close, retried. On a timeline's path a transition at the cycle's end comes first; a cycle
 * that ended before it unclosed (its close failed, the subscription is set aside) makes the
 * transition wait for the next run.
 */
function checkCycleClosed(s: Subscription, at: Date, inCurrentPeriod: boolean): void {
  const end = s.periodEnd.getTime();
  if (inCurrentPeriod) {
    if (end <= at.getTime()) throw lostRace(s.id);
  } else if (end < at.getTime()) {
    const why = s.billingFailure ? ` (${s.billingFailure.message})` : "";
    throw new FailedPreconditionError("CYCLE_NOT_CLOSED", `subscription ${s.id}: its billing cycle that ended at ${s.periodEnd.toISOString()} is not closed yet${why}`, { subscription_id: s.id });
  }
}

/** After this long, a call that keeps losing races gives up (aborted) rather than try again. */
const RACE_BUDGET_MS = 5_000;

function lostRace(id: string): AbortedError {
  return new AbortedError("SUBSCRIPTION_CHANGED", `subscription ${id} changed meanwhile (a billing cycle closed or another change applied); try again`, { subscription_id: id });
}

/** A short jittered backoff before attempt `n + 1`: about 5, 10, 20, … ms, at most 160. */
function backoff(n: number): Promise<void> {
  const base = Math.min(160, 5 * 2 ** (n - 1));
  return new Promise((r) => setTimeout(r, base / 2 + Math.random() * base));
}

/**
 * Runs `attempt` until it does not lose a race (an AbortedError: the row moved on under it, or
 * the database gave up on a deadlock or lock wait), at most RACE_ATTEMPTS times with a short
 * jittered backoff. Each attempt must re-read what it decides on. Past the last attempt the
 * AbortedError goes to the caller (409, retryable); any other error at once.
 */
export async function retryingRaces<T>(attempt: (n: number) => Promise<T>, budgetMs = RACE_BUDGET_MS): Promise<T> {
  const started = Date.now();
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      // Attempts are also bounded in time: a lock wait timeout alone can take the database's
      // innodb_lock_wait_timeout (50 s by default), and the caller should hear `aborted` sooner.
      if (!(err instanceof AbortedError) || n >= RACE_ATTEMPTS || Date.now() - started > budgetMs) throw err;
      await backoff(n);
    }
  }
}

export type StartResult = { kind: "success"; subscription: Subscription } | { kind: "requires_action"; checkoutUrl: string };

function checkDecimals(map: Record<string, string>, v: Violations): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, raw] of Object.entries(map)) {
    const d = parseDecimal(raw);
    if (!d) v.add(k, "must be a decimal number");
    else if (d.isNegative() && !d.isZero()) v.add(k, "must be at least 0");
    else if (storageProblem(d)) v.add(k, storageProblem(d) as string);
    else out[k] = formatDecimal(d);
  }
  return out;
}

/** The longest callback URL kept (the column holds 2000 characters), after normalizing. */
export const MAX_CALLBACK_URL_LENGTH = 2000;

/**
 * A callback URL as it is kept and later sent in a Location header: the WHATWG URL
 * serialization (`new URL(u).href`), which is ASCII only — the host in punycode, everything else
 * beyond ASCII percent-encoded as UTF-8 — so the redirect after a payment cannot fail on it.
 * Undefined when it is not an absolute http(s) URL.
 */
export function normalizeCallbackUrl(url: string): string | undefined {
  // The URL parser drops tabs and line breaks and trims spaces: refused rather than guessed at.
  if (/[\s\u0000-\u001f\u007f]/.test(url)) return undefined;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return undefined;
  const href = u.href;
  // Defensive: a serialization is ASCII; anything else could not be a header value.
  return /^[\x21-\x7e]+$/.test(href) ? href : undefined;
}

/** Checks the callback URLs (every problem) and returns them normalized (normalizeCallbackUrl). */
function checkUrls(c: CallbackUrls | undefined, v: Violations): CallbackUrls {
  const cv = v.at("checkout_callback_urls");
  if (!c) {
    cv.add("", "is required: this needs a checkout (no payment method on file, or create_checkout_session is always)");
    return { successUrl: "", cancelledUrl: "" };
  }
  const out: CallbackUrls = { successUrl: "", cancelledUrl: "" };
  for (const [field, key] of [["success_url", "successUrl"], ["cancelled_url", "cancelledUrl"]] as const) {
    const url = c[key];
    const normalized = normalizeCallbackUrl(url);
    if (normalized === undefined) cv.add(field, url === "" ? "is required" : "must be an http or https URL");
    else if (normalized.length > MAX_CALLBACK_URL_LENGTH) cv.add(field, `must have at most ${MAX_CALLBACK_URL_LENGTH} characters once encoded (it has ${normalized.length})`);
    else out[key] = normalized;
  }
  return out;
}

export class SubscriptionService {
  constructor(
    readonly engine: BillingEngine,
    private readonly cards: RateCardStore,
    private readonly publicBaseUrl: () => string,
  ) {}

  get store() {
    return this.engine.store;
  }

  /** What runs everything due up to a time: cycle closes, and (once wired) timeline transitions. */
  private runDue: (now: Date, clockId: string | null) => Promise<number> = (now, clockId) => this.engine.closeDue(now, clockId);

  useDueRunner(run: (now: Date, clockId: string | null) => Promise<number>): void {
    this.runDue = run;
  }

  /** Starts a timeline whose checkout completed (wired by the timeline service). */
  private timelineStarter?: (caller: Caller, payload: Record<string, unknown>) => Promise<void>;

  useTimelineStarter(start: (caller: Caller, payload: Record<string, unknown>) => Promise<void>): void {
    this.timelineStarter = start;
  }

  /** The subject's "now": its test clock's time, or real time. */
  async nowFor(subject: Pick<BillingSubject, "environmentId" | "testClockId">): Promise<Date> {
    if (!subject.testClockId) return this.engine.now();
    const clock = await this.store.clock(subject.environmentId, subject.testClockId);
    return clock ? clock.frozenTime : this.engine.now();
  }

  async subject(caller: Caller, key: string, field = "subject_id"): Promise<BillingSubject> {
    if (key === "") invalid(field, "is required");
    const s = await this.store.subject(caller.environmentId, key);
    if (!s) throw new NotFoundError("SUBJECT_NOT_FOUND", `${field}: subject ${JSON.stringify(key)} not found`, { subject_id: key });
    return s;
  }

  async cardOf(caller: Caller, id: string, field = "rate_card_id"): Promise<RateCard> {
    const card = id === "" ? undefined : await this.cards.get(caller.environmentId, id);
    if (!card) throw new NotFoundError("RATE_CARD_NOT_FOUND", `${field}: rate card ${JSON.stringify(id)} not found`, { rate_card_id: id });
    return card;
  }

  /** Checks quantities and multipliers against the card (and its catalog add-ons). */
  async checkTerms(card: RateCard, quantitiesIn: Record<string, string>, multipliersIn: Record<string, string>, v: Violations) {
    const quantities = checkDecimals(quantitiesIn, v.at("fixed_rate_quantities"));
    const multipliers = checkDecimals(multipliersIn, v.at("rate_price_multipliers"));
    const catalogRates = card.rateCatalogId ? await this.engine.catalogs.ratesFor(card.environmentId, card.rateCatalogId, card.billingInterval) : [];
    const addOns = offeredAddOns(card, catalogRates);
    const fixedCodes = new Set(card.fixedRates.map((r) => r.code));
    const addOnCodes = new Set(addOns.map((r) => r.rate.code));
    const allCodes = new Set([...fixedCodes, ...card.usageRates.map((r) => r.code), ...addOnCodes]);
    const missing = card.fixedRates.filter((r) => !(r.code in quantitiesIn)).map((r) => r.code);
    if (missing.length > 0) v.add("fixed_rate_quantities", `every fixed rate needs a quantity; missing: ${missing.join(", ")}`);
    for (const code of Object.keys(quantitiesIn)) {
      if (!fixedCodes.has(code) && !addOnCodes.has(code)) v.at("fixed_rate_quantities").add(code, "is not a fixed rate of the rate card or of its catalog");
    }
    for (const code of Object.keys(multipliersIn)) {
      if (!allCodes.has(code)) v.at("rate_price_multipliers").add(code, "is not a rate code of the rate card");
    }
    // The rates charged at these terms, from the catalog rates looked up above (once).
    const rates = chargedRates(card, catalogRates, quantities);
    if (v.empty) {
      this.checkBillable(rates, { fixedRateQuantities: quantities, rateMultipliers: multipliers }, (kind, code, message) =>
        kind === "total" ? v.add("fixed_rate_quantities", message) : v.at(kind === "fixed" ? "fixed_rate_quantities" : "rate_price_multipliers").add(code, message),
      );
    }
    return { quantities, multipliers, rates };
  }

  /**
   * Whether a card's charged `rates` at `terms` can always be invoiced (DESIGN §6: nothing
   * accepted may fail later for its size): each fixed charge and a cycle's fixed total below
   * 10^53 smallest units, and each usage rate's price × multiplier below 10^20 per unit.
   * Reports each problem found.
   */
  checkBillable(rates: ChargedRates, terms: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">, report: (kind: "fixed" | "usage" | "total", code: string, message: string) => void): void {
    const lines: Line[] = [];
    let ok = true;
    for (const rate of rates.fixed) {
      for (const l of this.engine.fixedLinesOf([rate], terms)) {
        const problem = amountProblem(l.amount);
        if (problem) {
          report("fixed", rate.code, `its charge (quantity × price × multiplier) ${problem}`);
          ok = false;
        }
        lines.push(l);
      }
    }
    const problem = ok ? amountProblem(total(lines)) : undefined;
    if (problem) report("total", "", `the fixed charges of one cycle ${problem}`);
    for (const rate of rates.usage) {
      const prices = rate.type === "simple" ? [rate.price] : rate.cells.map((c) => c.price);
      const m = multiplierOf(terms, rate.code);
      const largest = prices.reduce((acc, p) => (dec(p.amount.value).gt(acc) ? dec(p.amount.value) : acc), ZERO);
      const unitProblem = unitAmountProblem(largest.times(m));
      if (unitProblem) report("usage", rate.code, unitProblem);
    }
  }

  newSubscription(caller: Caller, subject: BillingSubject, card: RateCard, terms: { quantities: Record<string, string>; multipliers: Record<string, string> }, metadata: Metadata, at: Date): Subscription {
    const period = cycleBounds(at, 0, card.billingInterval);
    return {
      id: newId("sub"),
      environmentId: caller.environmentId,
      subjectId: subject.id,
      rateCardId: card.id,
      status: "active",
      cancelsAtEndOfCycle: false,
      anchor: at,
      cycleIndex: 0,
      periodStart: period.start,
      periodEnd: period.end,
      usageSince: period.start,
      fixedRateQuantities: terms.quantities,
      rateMultipliers: terms.multipliers,
      metadata,
      testClockId: subject.testClockId,
      timelineId: null,
      cancelledAt: null,
      cancelReason: null,
      billingFailure: null,
      createdAt: at,
    };
  }

  async create(caller: Caller, input: CreateSubscriptionInput): Promise<StartResult> {
    const v = new Violations();
    if (input.rateCardId === "") v.add("rate_card_id", "is required");
    if (input.subjectId === "") v.add("subject_id", "is required");
    if (!["", "when_required", "always"].includes(input.createCheckoutSession)) v.add("create_checkout_session", "must be when_required or always");
    checkMetadata(input.metadata, v.at("metadata"));
    v.throwIfAny();
    const subject = await this.subject(caller, input.subjectId);
    if (input.timelineId !== "") {
      const tl = await this.store.timeline(caller.environmentId, input.timelineId);
      if (!tl) v.add("subscription_timeline_id", "no subscription timeline with this ID exists");
      else if (tl.subjectId !== subject.id) v.add("subscription_timeline_id", "belongs to another subject");
      else if (tl.status !== "draft") throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${tl.id} is ${tl.status}; only a draft can be linked`);
    }
    const card = await this.cardOf(caller, input.rateCardId);
    const terms = await this.checkTerms(card, input.fixedRateQuantities, input.rateMultipliers, v);
    v.throwIfAny();

    const now = await this.nowFor(subject);
    const draft = { ...this.newSubscription(caller, subject, card, terms, input.metadata, now), timelineId: input.timelineId || null };
    const { fixed } = terms.rates;
    const firstLines = this.engine.fixedLinesOf(fixed, draft);
    const free = fixed.every((r) => dec(r.price.amount.value).isZero());
    const needsCheckout = input.createCheckoutSession === "always" || (!free && !subject.paymentMethodId);
    if (!this.paymentsFor(caller)) {
      // A live environment (no provider): only what needs no payment, now or later in its timeline.
      if (!free) throw noPaymentProvider(`rate card ${card.id} has fixed charges, which need a payment`);
      if (needsCheckout) throw noPaymentProvider("create_checkout_session always needs a checkout, which needs a payment provider");
      if (input.timelineId !== "" && (await this.anyPaidItem(caller, await this.store.timelineItems(input.timelineId)))) {
        throw noPaymentProvider("the linked subscription timeline has items with fixed charges, which need a payment");
      }
    }
    if (!needsCheckout) return { kind: "success", subscription: await this.start(draft, card, firstLines, subject.paymentMethodId) };

    const session = await this.openCheckout(caller, subject, "subscribe", { request: { ...input, fixedRateQuantities: terms.quantities, rateMultipliers: terms.multipliers } }, input.callbacks, card, total(firstLines), `Subscribe to ${card.name}`, now);
    return { kind: "requires_action", checkoutUrl: this.checkoutUrl(session) };
  }

  /** The payment provider of the caller's environment (by its mode): none for a live one. */
  paymentsFor(caller: Caller): PaymentProvider | undefined {
    return this.engine.payments.forMode(caller.mode);
  }

  /** Whether any of these timeline items has a fixed charge (needs a payment). */
  async anyPaidItem(caller: Caller, items: TimelineItem[]): Promise<boolean> {
    for (const item of items) {
      const card = await this.cardOf(caller, item.rateCardId);
      const { fixed } = await this.engine.rates(card, item.fixedRateQuantities);
      if (fixed.some((r) => !dec(r.price.amount.value).isZero())) return true;
    }
    return false;
  }

  checkoutUrl(session: CheckoutSession): string {
    return `${this.publicBaseUrl()}/hosted/checkout/${session.token}`;
  }

  /** Opens a hosted checkout; the callback URLs are required and checked here, for every kind. */
  async openCheckout(caller: Caller, subject: BillingSubject, kind: CheckoutSession["kind"], payload: Record<string, unknown>, given: CallbackUrls | undefined, card: RateCard, amountDue: Decimal, description: string, now: Date) {
    // Nothing that cannot be paid is opened (callers check first; this is the last guard).
    if (!this.paymentsFor(caller)) throw noPaymentProvider("a hosted checkout cannot take a payment");
    const v = new Violations();
    const callbacks = checkUrls(given, v);
    v.throwIfAny();
    const tooLarge = amountProblem(amountDue);
    if (tooLarge) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the amount due ${tooLarge}`);
    const session: CheckoutSession = {
      id: newId("cs"),
      environmentId: caller.environmentId,
      token: randomBase62(40),
      subjectId: subject.id,
      kind,
      payload,
      successUrl: callbacks.successUrl,
      cancelledUrl: callbacks.cancelledUrl,
      status: "open",
      amountDue: formatDecimal(amountDue),
      currency: card.currency ?? "USD",
      description,
      expiresAt: new Date(now.getTime() + CHECKOUT_TTL_MS),
      createdAt: now,
    };
    await this.store.insertCheckout(session);
    return session;
  }

  /** Starts a subscription: writes it and its first invoice (fixed charges in advance), then charges. */
  /**
   * Starts a subscription: writes it and its first invoice (fixed charges in advance), then
   * charges. A subscription linked to a draft timeline makes that timeline active.
   */
  async start(draft: Subscription, card: RateCard, firstLines: Line[], paymentMethodId: string | null): Promise<Subscription> {
    const invoice = this.engine.newInvoice(draft, card, "cycle:0", firstLines, draft.periodStart, draft.periodEnd, draft.anchor);
    const items = draft.timelineId ? await this.store.timelineItems(draft.timelineId) : [];
    await this.store.transaction(async (tx) => {
      if (draft.timelineId) {
        const tl = await tx.lockTimeline(draft.environmentId, draft.timelineId);
        if (!tl || !["draft", "pending"].includes(tl.status)) throw new FailedPreconditionError("TIMELINE_NOT_DRAFT", `subscription timeline ${draft.timelineId} is ${tl?.status ?? "gone"}`);
        const current = items.find((i) => covers(i, draft.anchor.getTime()));
        await tx.updateTimeline({ ...tl, status: "active", subscriptionId: draft.id, effectiveAt: draft.anchor, nextTransitionAt: current?.end ?? null, updatedAt: draft.anchor });
      }
      await tx.insertSubscription(draft);
      await this.engine.writeInvoice(tx, invoice);
    });
    await this.engine.settle(invoice, paymentMethodId);
    return draft;
  }

  async get(caller: Caller, id: string): Promise<Subscription> {
    const s = id === "" ? undefined : await this.store.subscription(caller.environmentId, id);
    if (!s) throw new NotFoundError("SUBSCRIPTION_NOT_FOUND", `subscription ${JSON.stringify(id)} not found`, { subscription_id: id });
    return s;
  }

  async list(caller: Caller, filter: { subjectId: string; rateCardId: string }, limit?: number, offset?: number): Promise<PageResult<Subscription>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    if (filter.subjectId !== "" && filter.rateCardId !== "") v.add("rate_card_id", "cannot be used together with subject_id");
    v.throwIfAny();
    const subjectId = filter.subjectId === "" ? undefined : (await this.subject(caller, filter.subjectId)).id;
    return this.store.listSubscriptions(caller.environmentId, { subjectId, rateCardId: filter.rateCardId || undefined }, page);
  }

  /**
   * Closes the cycles of `s` that ended by `at` — the scheduler may not have reached them yet — so
   * that a cancellation or change applies to the cycle it happens in; returns the fresh row.
   */
  private async caughtUp(s: Subscription, at: Date): Promise<Subscription> {
    let current = s;
    while (current.status === "active" && current.periodEnd.getTime() <= at.getTime()) {
      const failedBefore = current.billingFailure?.attempts ?? 0;
      await this.engine.closeCycles([current]);
      const fresh = await this.store.subscription(current.environmentId, current.id);
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
    const found = await this.get(caller, id);
    const subject = await this.subject(caller, found.subjectId);
    const done = await retryingRaces(async (n) => {
      const now = await this.nowFor(subject);
      const current = await this.caughtUp(n === 1 ? found : await this.get(caller, id), now);
      if (input.atEndOfCycle) {
        const flagged = await this.store.transaction(async (tx) => {
          const s = await tx.lockSubscription(caller.environmentId, id);
          if (!s || s.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${id} is ${s?.status ?? "gone"}`);
          if (s.cancelsAtEndOfCycle) throw new FailedPreconditionError("SUBSCRIPTION_ALREADY_CANCELLING", `subscription ${id} already cancels at the end of its cycle`);
          // A cycle that ended but is not closed yet (another runner holds it): wait for it, so
          // that the flag applies to the cycle `now` is in.
          if (s.periodEnd.getTime() <= now.getTime()) throw lostRace(id);
          const next = { ...s, cancelsAtEndOfCycle: true, cancelReason: input.reason || null };
          await tx.updateSubscription(next);
          return next;
        });
        return { subscription: flagged, invoice: undefined };
      }
      return this.tryCancelAt(current, now, input.reason || null, true);
    });
    if (done.invoice) await this.engine.settle(done.invoice, subject.paymentMethodId);
    return done.subscription;
  }

  /** Cancels now (at `at`): a final invoice for the usage since the last one, no new fixed charges. */
  async cancelAt(current: Subscription, at: Date, reason: string | null, paymentMethodId: string | null): Promise<Subscription> {
    const { subscription, invoice } = await this.tryCancelAt(current, at, reason, false);
    await this.engine.settle(invoice, paymentMethodId);
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
    const card = await this.engine.card(current.environmentId, current.rateCardId);
    const lines = await this.engine.usageLines(card, current, current.usageSince, at);
    const invoice = this.engine.newInvoice(current, card, "final", lines, current.usageSince, at, at);
    const cancelled = await this.store.transaction(async (tx) => {
      const s = await tx.lockSubscription(current.environmentId, current.id);
      if (!s || s.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${current.id} is already ${s?.status ?? "gone"}`);
      if (s.rateCardId !== current.rateCardId || s.usageSince.getTime() !== current.usageSince.getTime() || s.cycleIndex !== current.cycleIndex) throw lostRace(current.id);
      checkCycleClosed(s, at, inCurrentPeriod);
      if (!(await this.engine.writeInvoice(tx, invoice))) throw lostRace(current.id);
      const next: Subscription = { ...s, status: "cancelled", cancelsAtEndOfCycle: false, cancelledAt: at, cancelReason: reason ?? s.cancelReason, billingFailure: null };
      await tx.updateSubscription(next);
      return next;
    });
    return { subscription: cancelled, invoice };
  }

  /** Per-cycle fixed total of a card at the given terms, unrounded. */
  private async fixedTotal(card: RateCard, s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">): Promise<Decimal> {
    const lines = await this.engine.fixedLines(card, s);
    return lines.reduce((acc, l) => acc.plus(l.quantity.times(l.unitAmount)), ZERO);
  }

  async changeRateCard(caller: Caller, id: string, input: { rateCardId: string; behavior: string; callbacks?: CallbackUrls }): Promise<StartResult> {
    const v = new Violations();
    if (input.rateCardId === "") v.add("rate_card_id", "is required");
    if (!["", "prorate", "rate_difference"].includes(input.behavior)) v.add("upgrade_behavior", "must be prorate or rate_difference");
    v.throwIfAny();
    const found = await this.get(caller, id);
    const newCard = await this.cardOf(caller, input.rateCardId);
    // A cycle close racing the change makes the attempt start over from a fresh read (retryingRaces).
    const done = await retryingRaces(async (n): Promise<{ result: StartResult; invoice?: Invoice; paymentMethodId?: string | null }> => {
      const fresh = n === 1 ? found : await this.get(caller, id);
      const current = await this.caughtUp(fresh, await this.nowFor({ environmentId: fresh.environmentId, testClockId: fresh.testClockId }));
      if (current.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${id} is ${current.status}`);
      const oldCard = await this.engine.card(current.environmentId, current.rateCardId);
      if (newCard.id === oldCard.id) throw new FailedPreconditionError("SAME_RATE_CARD", "the subscription is already on this rate card");
      if (newCard.billingInterval !== oldCard.billingInterval) throw new FailedPreconditionError("INTERVAL_MISMATCH", `the new rate card is ${newCard.billingInterval}; the subscription is ${oldCard.billingInterval}`);
      if (newCard.currency && oldCard.currency && newCard.currency !== oldCard.currency) throw new FailedPreconditionError("CURRENCY_MISMATCH", `the new rate card charges ${newCard.currency}, not ${oldCard.currency}`);
      const subject = await this.subject(caller, current.subjectId);
      const now = await this.nowFor(subject);

      // The new card's terms: quantities of codes it shares with the old one carry over; its other fixed rates get 1.
      const quantities: Record<string, string> = {};
      for (const r of newCard.fixedRates) quantities[r.code] = current.fixedRateQuantities[r.code] ?? "1";
      const codes = new Set([...newCard.fixedRates.map((r) => r.code), ...newCard.usageRates.map((r) => r.code)]);
      const multipliers = Object.fromEntries(Object.entries(current.rateMultipliers).filter(([code]) => codes.has(code)));
      const next = { fixedRateQuantities: quantities, rateMultipliers: multipliers };
      // The carried-over terms must be billable on the new card too (DESIGN §6).
      const refused: string[] = [];
      this.checkBillable(await this.engine.rates(newCard, quantities), next, (kind, code, message) => refused.push(kind === "total" ? message : `${code}: ${message}`));
      if (refused.length > 0) invalid("rate_card_id", `at this subscription's quantities and multipliers, the new rate card cannot be invoiced: ${refused.join("; ")}`);

      const plan = await this.switchPlan(current, oldCard, newCard, next, now, input.behavior);
      if (plan.upgrade.gt(0) && !this.paymentsFor(caller)) throw noPaymentProvider("this change is an upgrade, which needs a payment");
      // A checkout is needed to pay for an upgrade without a card on file; the old card's usage is
      // invoiced either way (and stays open without a card, like any cycle invoice).
      if (plan.upgrade.gt(0) && !subject.paymentMethodId) {
        const session = await this.openCheckout(caller, subject, "change", { subscriptionId: id, rateCardId: newCard.id, behavior: input.behavior }, input.callbacks, newCard, total(plan.lines), `Change to ${newCard.name}`, now);
        return { result: { kind: "requires_action", checkoutUrl: this.checkoutUrl(session) } };
      }
      const { subscription, invoice } = await this.trySwitch(current, newCard, next, now, plan.lines, true);
      return { result: { kind: "success", subscription }, invoice, paymentMethodId: subject.paymentMethodId };
    });
    if (done.invoice) await this.engine.settle(done.invoice, done.paymentMethodId ?? null);
    return done.result;
  }

  /** What moving to `newCard` at `at` invoices: the old card's usage so far, and an upgrade charge. */
  private async switchPlan(current: Subscription, oldCard: RateCard, newCard: RateCard, next: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">, at: Date, behavior: string) {
    const diff = (await this.fixedTotal(newCard, next)).minus(await this.fixedTotal(oldCard, current));
    const lines = await this.engine.usageLines(oldCard, current, current.usageSince, at);
    let upgrade = ZERO;
    if (diff.gt(0)) {
      const span = current.periodEnd.getTime() - current.periodStart.getTime();
      const left = Math.max(0, current.periodEnd.getTime() - at.getTime());
      const prorate = behavior !== "rate_difference";
      upgrade = prorate ? diff.times(left).div(span) : diff;
      if (upgrade.gt(0)) {
        lines.push(
          line(`Upgrade from ${oldCard.name} to ${newCard.name}${prorate ? ` (prorated: ${formatDecimal(dec(left).div(span).times(100).toDecimalPlaces(2))}% of the period left)` : ""}`, dec(1), upgrade),
        );
      }
    }
    return { lines, upgrade };
  }

  /** Writes a switch to `newCard` with `next` terms at `at`, invoices what it owes, charges. */
  private async applySwitch(current: Subscription, newCard: RateCard, next: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">, at: Date, lines: Line[], paymentMethodId: string | null): Promise<Subscription> {
    const { subscription, invoice } = await this.trySwitch(current, newCard, next, at, lines, false);
    await this.engine.settle(invoice, paymentMethodId);
    return subscription;
  }

  /**
   * One attempt at the switch, committed or not at all: the old card's usage since usage_since
   * (the fence) is invoiced up to `at`, which becomes the new usage_since. Throws lostRace when
   * the locked row moved on, or — with `inCurrentPeriod`, the API's case — when its cycle ended by
   * `at` without being closed yet.
   */
  private async trySwitch(current: Subscription, newCard: RateCard, next: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">, at: Date, lines: Line[], inCurrentPeriod: boolean): Promise<{ subscription: Subscription; invoice: Invoice }> {
    const oldCard = await this.engine.card(current.environmentId, current.rateCardId);
    // Several changes can happen at one instant (a frozen test clock): each gets its own key; the
    // locked row's re-check below is what keeps one change from being applied twice.
    const invoice = this.engine.newInvoice(current, oldCard, `change:${at.getTime()}:${randomBase62(8)}`, lines, current.usageSince, at, at);
    const changed = await this.store.transaction(async (tx) => {
      const s = await tx.lockSubscription(current.environmentId, current.id);
      if (!s) throw new NotFoundError("SUBSCRIPTION_NOT_FOUND", `subscription ${JSON.stringify(current.id)} not found`, { subscription_id: current.id });
      if (s.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${current.id} is ${s.status}`);
      if (s.rateCardId !== current.rateCardId || s.usageSince.getTime() !== current.usageSince.getTime() || s.cycleIndex !== current.cycleIndex) throw lostRace(current.id);
      checkCycleClosed(s, at, inCurrentPeriod);
      if (!(await this.engine.writeInvoice(tx, invoice))) throw lostRace(current.id);
      const updated: Subscription = { ...s, rateCardId: newCard.id, ...next, usageSince: at };
      await tx.updateSubscription(updated);
      return updated;
    });
    return { subscription: changed, invoice };
  }

  /** A timeline's move to its next item at `at`: the change of rate card and terms, always applied. */
  async switchTo(current: Subscription, card: RateCard, terms: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">, at: Date): Promise<Subscription> {
    const oldCard = await this.engine.card(current.environmentId, current.rateCardId);
    const subject = await this.store.subject(current.environmentId, current.subjectId);
    const plan = await this.switchPlan(current, oldCard, card, terms, at, "prorate");
    return this.applySwitch(current, card, terms, at, plan.lines, subject?.paymentMethodId ?? null);
  }

  // ---- hosted checkout ----

  /**
   * A checkout as its page shows it: usable (open, not expired), and the provider it would be
   * paid through — none in a live environment, where it cannot be paid (test cards refused).
   */
  async checkout(token: string): Promise<{ session: CheckoutSession; usable: boolean; now: Date; provider: PaymentProvider | undefined }> {
    const session = await this.store.checkout(token);
    if (!session) throw new NotFoundError("CHECKOUT_NOT_FOUND", "no such checkout");
    const subject = await this.store.subject(session.environmentId, session.subjectId);
    const now = subject ? await this.nowFor(subject) : this.engine.now();
    const provider = await this.engine.providerFor(session.environmentId);
    return { session, usable: session.status === "open" && now.getTime() < session.expiresAt.getTime(), now, provider };
  }

  /**
   * Completes a checkout with a card number: declined cards change nothing; a good one is saved
   * on the subject and what the checkout was for happens. A completed, cancelled or expired
   * checkout cannot be used again.
   */
  async completeCheckout(token: string, cardNumber: string): Promise<{ ok: true; redirect: string } | { ok: false; message: string; gone?: boolean; noProvider?: boolean }> {
    const { session, usable, provider } = await this.checkout(token);
    if (!usable) return { ok: false, gone: true, message: "This checkout is no longer available." };
    // A live environment has no provider: no card is taken (test cards are refused), nothing changes.
    if (!provider) return { ok: false, noProvider: true, message: NO_PROVIDER_PAGE_MESSAGE };
    const card = provider.tokenize(cardNumber);
    if (!card.ok) return { ok: false, message: card.message };
    const caller = systemCaller(session.environmentId, (await this.engine.modeOf(session.environmentId)) ?? "test");
    const subject = await this.store.subject(session.environmentId, session.subjectId);
    // What the checkout was for must still be possible before the card is taken and the checkout used.
    const stale = { ok: false as const, gone: true, message: "This checkout can no longer be completed: the subscription or plan changed meanwhile." };
    if (!subject) return stale;
    if (session.kind === "change") {
      const p = session.payload as { subscriptionId: string; rateCardId: string };
      const sub = await this.store.subscription(session.environmentId, p.subscriptionId);
      if (!sub || sub.status !== "active" || sub.rateCardId === p.rateCardId) return stale;
    } else if (session.kind === "timeline") {
      const tl = await this.store.timeline(session.environmentId, (session.payload as { timelineId: string }).timelineId);
      if (!tl || tl.status !== "draft") return stale;
    } else if ((session.payload as { request: CreateSubscriptionInput }).request.timelineId) {
      const tl = await this.store.timeline(session.environmentId, (session.payload as { request: CreateSubscriptionInput }).request.timelineId);
      if (!tl || tl.status !== "draft") return stale;
    }
    const pmId = newId("pm_card");
    const claimed = await this.store.transaction(async (tx) => {
      const locked = await tx.lockCheckout(token);
      if (!locked || locked.status !== "open") return false;
      await tx.insertPaymentMethod({ id: pmId, environmentId: session.environmentId, subjectId: subject.id, brand: card.brand, last4: card.last4, behavior: card.behavior, createdAt: this.engine.now() });
      await tx.setSubjectPaymentMethod(subject.id, pmId);
      await tx.updateCheckoutStatus(session.id, "completed");
      return true;
    });
    if (!claimed) return { ok: false, gone: true, message: "This checkout is no longer available." };
    if (session.kind === "subscribe") {
      const input = (session.payload as { request: CreateSubscriptionInput }).request;
      const withPm = { ...subject, paymentMethodId: pmId };
      const rateCard = await this.cardOf(caller, input.rateCardId);
      const now = await this.nowFor(withPm);
      const draft = {
        ...this.newSubscription(caller, withPm, rateCard, { quantities: input.fixedRateQuantities, multipliers: input.rateMultipliers }, input.metadata, now),
        timelineId: input.timelineId || null,
      };
      await this.start(draft, rateCard, await this.engine.fixedLines(rateCard, draft), pmId);
    } else if (session.kind === "change") {
      const p = session.payload as { subscriptionId: string; rateCardId: string; behavior: string };
      await this.changeRateCard(caller, p.subscriptionId, { rateCardId: p.rateCardId, behavior: p.behavior });
    } else {
      await this.timelineStarter?.(caller, session.payload);
    }
    return { ok: true, redirect: session.successUrl };
  }

  /** Cancels an open checkout (a POST from its page; a GET only asks to confirm); returns where to send the customer. */
  async cancelCheckout(token: string): Promise<string> {
    const { session } = await this.checkout(token);
    if (session.status === "open") {
      await this.store.transaction(async (tx) => {
        const locked = await tx.lockCheckout(token);
        if (locked?.status === "open") await tx.updateCheckoutStatus(session.id, "cancelled");
      });
    }
    return session.cancelledUrl;
  }

  // ---- invoices ----

  async listInvoices(caller: Caller, subjectKey: string, limit?: number, offset?: number): Promise<PageResult<Invoice>> {
    const v = new Violations();
    if (subjectKey === "") v.add("subject_id", "is required");
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    const subject = await this.subject(caller, subjectKey);
    return this.store.listInvoices(caller.environmentId, subject.id, page);
  }

  async invoice(caller: Caller, id: string): Promise<Invoice> {
    const inv = id === "" ? undefined : await this.store.invoice(caller.environmentId, id);
    if (!inv) throw new NotFoundError("INVOICE_NOT_FOUND", `invoice ${JSON.stringify(id)} not found`, { invoice_id: id });
    return inv;
  }

  async setInvoiceStatus(caller: Caller, id: string, to: "void" | "uncollectible"): Promise<Invoice> {
    const inv = await this.invoice(caller, id);
    if (!(await this.store.setInvoiceStatus(inv.id, "open", to, this.engine.now()))) {
      throw new FailedPreconditionError("INVOICE_NOT_OPEN", `invoice ${id} is ${inv.status}; only an open invoice can become ${to}`);
    }
    return this.invoice(caller, id);
  }

  hostedInvoiceUrl(inv: Invoice): string {
    return `${this.publicBaseUrl()}/hosted/invoices/${inv.hostedToken}`;
  }

  invoiceByToken(token: string): Promise<Invoice | undefined> {
    return this.store.invoiceByToken(token);
  }

  // ---- billing state ----

  async billingState(caller: Caller, subjectKey: string) {
    const subject = await this.subject(caller, subjectKey);
    const now = await this.nowFor(subject);
    const active = await this.store.activeSubscriptions(caller.environmentId, subject.id);
    const usage: { includedUnits: string; pricingMetricId: string; rateName: string; usedUnits: string }[] = [];
    let overage = false;
    for (const s of active) {
      const card = await this.engine.card(s.environmentId, s.rateCardId);
      for (const { rate, used } of await this.engine.usedUnits(card, s, s.usageSince, s.periodEnd)) {
        if (used.gt(dec(rate.includedUnits))) overage = true;
        usage.push({ includedUnits: rate.includedUnits, pricingMetricId: rate.pricingMetricId, rateName: rate.name, usedUnits: formatDecimal(used) });
      }
    }
    return {
      hasActiveSubscription: active.length > 0,
      hasOverage: overage,
      active: active.map((s) => ({ rateCardId: s.rateCardId, subscriptionId: s.id })),
      usage,
    };
  }

  // ---- test clocks ----

  async createClock(caller: Caller, input: { name: string; frozenTime?: Date }): Promise<TestClock> {
    if (caller.mode !== "test") throw new FailedPreconditionError("TEST_CLOCKS_TEST_ONLY", "test clocks exist only in test environments");
    const v = new Violations();
    if (input.name.length > 255) v.add("name", "must have at most 255 characters");
    if (!input.frozenTime) v.add("frozen_time", "is required");
    const frozenTime = checkInstant(input.frozenTime, v, "frozen_time");
    v.throwIfAny();
    const clock: TestClock = { id: newId("clk"), environmentId: caller.environmentId, name: input.name, frozenTime: frozenTime as Date, createdAt: this.engine.now() };
    await this.store.insertClock(clock);
    return clock;
  }

  async clock(caller: Caller, id: string): Promise<TestClock> {
    const c = id === "" ? undefined : await this.store.clock(caller.environmentId, id);
    if (!c) throw new NotFoundError("TEST_CLOCK_NOT_FOUND", `test clock ${JSON.stringify(id)} not found`, { test_clock_id: id });
    return c;
  }

  /** Moves the clock forward and runs every cycle close due up to the new time before returning. */
  async advanceClock(caller: Caller, id: string, to: Date | undefined): Promise<TestClock> {
    const clock = await this.clock(caller, id);
    const v = new Violations();
    if (!to) v.add("frozen_time", "is required");
    checkInstant(to, v, "frozen_time");
    v.throwIfAny();
    if (!to) invalid("frozen_time", "is required");
    if (to.getTime() < clock.frozenTime.getTime()) {
      invalid("frozen_time", `must not be before the clock's time ${clock.frozenTime.toISOString()}: clocks only move forward`);
    }
    if (to.getTime() > clock.frozenTime.getTime() && !(await this.store.advanceClock(caller.environmentId, id, to))) {
      throw new AbortedError("TEST_CLOCK_MOVED", "the clock was moved past this time meanwhile");
    }
    await this.runDue(to, id);
    return this.clock(caller, id);
  }
}
