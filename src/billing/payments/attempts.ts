/**
 * Dunning (DESIGN §16), the use case: every charge of an invoice is one attempt, made and recorded
 * here under the invoice's row lock — the first when it is settled (settlement.ts), the retries the
 * scheduler finds due (on real time or a test clock as it is advanced), one at once when the
 * customer replaces the card in the portal, and the completion of a charge that waited for the
 * customer (the hosted invoice page). The rules are dunning.ts.
 *
 * The charge runs inside the transaction that holds the invoice's row lock, keyed
 * chargeKey(invoice, n) with n the attempt count read under that lock: a crash (or a rolled-back
 * transaction) between the charge and its commit leaves the count as it was, so the next try
 * sends the same key, the provider first asked for a payment made under it (plan-ahead.ts).
 */
import { FailedPreconditionError } from "../errors.js";
import type { EngineEvents } from "../subscriptions/engine-context.js";
import type { BillingStores } from "../subscriptions/ports.js";
import { retryingRaces } from "../subscriptions/races.js";
import { awaitsCheckout } from "../credits/purchase-states.js";
import type { BillingReads } from "../subscriptions/reads.js";
import { type Invoice, type PaymentMethod, type PaymentProvider, amountDueOf, chargeKey } from "../subscriptions/types.js";
import { type Caller, systemCaller } from "../tenancy.js";
import type { PaymentCancels } from "./cancels.js";
import { endAfterLast } from "./last-attempt.js";
import { type AttemptResult, type Tx, recordDecisions } from "./record.js";
import { maySendAgain, planAhead } from "./plan-ahead.js";
import { lookUpProcessing } from "./processing.js";
import { type AttemptDecision, type DunningStore, type PaymentSettingsSource, decide, isCollectible, isRetryable } from "./dunning.js";
import type { AfterLastAttempt, ChargeContext, ChargeOutcome, PaymentSettings, ProviderKind } from "./types.js";
import { cancelWaiting, waitingOn } from "./waiting.js";

export type { AttemptResult };

/** What the policy after the last attempt does to a subscription (the API's own use cases). */
export interface SubscriptionPolicies {
  cancelNow(caller: Caller, subscriptionId: string): Promise<unknown>;
  pause(caller: Caller, subscriptionId: string): Promise<unknown>;
}

/** A provider that can complete a charge waiting for the customer itself (the test provider simulates the authentication). */
export interface ConfirmsActions {
  confirmAction(reference: string): Promise<ChargeOutcome>;
}

function confirms(p: PaymentProvider | undefined): (PaymentProvider & ConfirmsActions) | undefined {
  return p && typeof (p as Partial<ConfirmsActions>).confirmAction === "function" ? (p as PaymentProvider & ConfirmsActions) : undefined;
}

/** The outcome of an attempt with no saved card: a failure like any other (it counts, the schedule goes on). */
const NO_METHOD: ChargeOutcome = { ok: false, message: "No payment method is saved for this customer.", code: "no_payment_method" };

/** How far ahead a first charge is planned (see attempt): longer than any charge takes. */
const FIRST_ATTEMPT_GRACE_MS = 60_000;

/** How many due invoices one read of a run takes. */
const DUE_BATCH = 50;

/** How long after its finalization a first charge that was never planned is looked for (twice the grace above). */
const UNPLANNED_AFTER_MS = 2 * FIRST_ATTEMPT_GRACE_MS;

/** How many first charges of a batch run at once (attemptFirsts), and how many invoices one of its charge transactions takes. */
const CHARGES_AT_ONCE = 8;
const CHARGE_BATCH = 25;

/** What the provider is told of a charge of invoice `i`. */
const metaOf = (i: Invoice, sentBefore = false): ChargeContext => ({ invoiceId: i.id, environmentId: i.environmentId, subjectId: i.subjectId, sentBefore, description: i.number ?? undefined });

/** The invoice a charge waiting for the customer belongs to (its clock, when on a test clock). */
export type ActionRef = Pick<Invoice, "environmentId" | "id"> & { clockId?: string | null };

export class Dunning {
  constructor(
    private readonly stores: BillingStores,
    private readonly reads: BillingReads,
    private readonly store: DunningStore,
    /** An environment's payment settings: the payment settings store once wired, the defaults until then. */
    public settings: PaymentSettingsSource,
    private readonly policies: SubscriptionPolicies,
    private readonly now: () => Date,
    private readonly events: EngineEvents = {},
  ) {}

  /** Cancels the payment of an invoice that ended while it waited for the customer (a purchase's), once wired. */
  cancels?: PaymentCancels;
  /**
   * Charges the invoice once more (attempt attempt_count + 1) to `pm` and records what came of it
   * (dunning.ts decide), with its event, in one transaction under the invoice's row lock; then,
   * after its last attempt failed, applies the environment's policy to the subscription. `at`:
   * the attempt's time on the invoice's clock. `dueBy`: a scheduled retry (only if still due by
   * then; a row another runner holds is skipped). Undefined: nothing charged (not collectible, not
   * due, held elsewhere, no provider, or a purchase awaiting its checkout: never planned either).
   */
  async attempt(ref: Pick<Invoice, "environmentId" | "id">, pm: PaymentMethod | undefined, at: (i: Invoice) => Date, dueBy?: Date): Promise<AttemptResult | undefined> {
    const provider = await this.reads.providerFor(ref.environmentId);
    if (!provider) return undefined;
    const settings = await this.settings.settingsOf(ref.environmentId);
    // A charge dunning did not plan (a first one, a new card's) is planned a minute ahead first: a crash leaves it due (plan-ahead.ts).
    const deps = { stores: this.stores, writes: (tx: Tx) => this.writes(tx), now: this.now };
    if (!dueBy && pm) await planAhead(deps, ref, (i) => new Date(at(i).getTime() + FIRST_ATTEMPT_GRACE_MS));
    // A payment still waiting for the customer is cancelled first, committed with the next attempt planned (waiting.ts).
    const first = await cancelWaiting(deps, provider, ref, at, settings, dueBy);
    if (!first || "result" in first) return first?.result;
    const lookUp = { provider, settings, now: this.now, failed: (id: string, err: unknown) => this.events.settleFailed?.(id, err) };
    const done = await retryingRaces(() =>
      this.stores.transaction(async (tx): Promise<AttemptResult | Invoice | undefined> => {
        const i = await this.writes(tx).claim(ref.environmentId, ref.id, dueBy);
        if (!i || !(dueBy ? isRetryable(i) : isCollectible(i)) || awaitsCheckout(i)) return undefined;
        // Its last attempt failed and the policy was never applied (the process died), its payment waiting or not: no charge, the policy below.
        if (i.payment?.pendingPolicy) return i;
        // No second charge next to a payment processing (a bank debit: a planned run looks it up, processing.ts) or waiting for the customer.
        if (i.payment?.processing) return dueBy ? lookUpProcessing({ ...lookUp, tx, writes: this.writes(tx) }, i, at(i), dueBy) : undefined;
        if (waitingOn(i) && provider.cancel) return undefined;
        const n = (i.attemptCount ?? 0) + 1;
        const outcome = pm ? await provider.charge(pm, amountDueOf(i), i.currency, chargeKey(i.id, n), metaOf(i, maySendAgain(i, at(i), dueBy))) : NO_METHOD;
        return (await recordDecisions(tx, this.writes(tx), this.now(), [{ i, d: decide(i, n, outcome, at(i), settings), at: at(i) }]))[0];
      }),
    );
    if (done === undefined) return undefined;
    if (!("decision" in done)) return this.finishLast(done);
    if (done.invoice.payment?.cancel) await this.cancels?.settle(done.invoice);
    return done.invoice.payment?.pendingPolicy ? this.finishLast(done.invoice, done.decision) : done;
  }

  /** Plans the first charge of each of `ids` (of one environment) at `at` under their row locks, those collectible and never attempted nor planned; one transaction. */
  private async planFirsts(environmentId: string, ids: readonly string[], at: (i: Invoice) => Date): Promise<void> {
    await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        const first = (await this.writes(tx).claimAll(environmentId, ids)).filter((i) => isCollectible(i) && (i.attemptCount ?? 0) === 0 && !awaitsCheckout(i));
        await this.writes(tx).planFirsts(
          environmentId,
          first.map((i) => ({ id: i.id, at: at(i) })),
        );
      }),
    );
  }

  /**
   * The first charge of each of many invoices just written (a cycle close's batch), as attempt
   * makes it, in a few transactions per environment rather than two per invoice: the plans, then
   * the charges (CHARGES_AT_ONCE at a time, each keyed as attempt keys it) and their records with
   * their events, under the invoices' row locks, CHARGE_BATCH invoices per transaction. A charge
   * that throws leaves its invoice planned (dunning makes it again with the same key) and the
   * others go on. A last attempt's policy runs after the commit, as attempt runs it.
   */
  async attemptFirsts(items: readonly { invoice: Invoice; pm: PaymentMethod }[], at: (i: Invoice) => Date): Promise<void> {
    for (const environmentId of new Set(items.map((x) => x.invoice.environmentId))) {
      const pmOf = new Map(items.filter((x) => x.invoice.environmentId === environmentId).map((x) => [x.invoice.id, x.pm]));
      const ids = [...pmOf.keys()];
      try {
        await this.firstsOf(environmentId, ids, pmOf, at);
      } catch (err) {
        // Each stays open, planned or not: dunning makes its first charge (planUnplanned, due).
        for (const id of ids) this.events.settleFailed?.(id, err);
      }
    }
  }

  /** attemptFirsts for the invoices `ids` of one environment: the plans, then the charges a batch at a time. */
  private async firstsOf(environmentId: string, ids: string[], pmOf: Map<string, PaymentMethod>, at: (i: Invoice) => Date): Promise<void> {
    const provider = await this.reads.providerFor(environmentId);
    if (!provider) return;
    const settings = await this.settings.settingsOf(environmentId);
    await this.planFirsts(environmentId, ids, (i) => new Date(at(i).getTime() + FIRST_ATTEMPT_GRACE_MS));
    // CHARGE_BATCH invoices per transaction: a slow provider holds each batch's row locks a few seconds at most.
    for (let k = 0; k < ids.length; k += CHARGE_BATCH) {
      const part = ids.slice(k, k + CHARGE_BATCH);
      try {
        const { results, pending } = await this.chargeFirsts(environmentId, part, pmOf, provider, settings, at);
        // Last attempts failed with a policy (a schedule of one attempt), and policies a dead process left.
        // A last attempt that ended its invoice while its payment waits (leave_active, uncollectible): that payment cancelled after the commit.
        for (const r of results) if (r.invoice.payment?.cancel) await this.cancels?.settle(r.invoice);
        for (const r of results) if (r.invoice.payment?.pendingPolicy) await this.finishLast(r.invoice, r.decision);
        for (const i of pending) await this.finishLast(i);
      } catch (err) {
        // This batch stays planned (dunning charges it with the same keys); the next batches go on.
        for (const id of part) this.events.settleFailed?.(id, err);
      }
    }
  }

  /** attemptFirsts' second step for `ids`: their charges and records, in one transaction under their row locks. */
  private chargeFirsts(environmentId: string, ids: string[], pmOf: Map<string, PaymentMethod>, provider: PaymentProvider, settings: PaymentSettings, at: (i: Invoice) => Date) {
    return retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        const claimed = (await this.writes(tx).claimAll(environmentId, ids)).filter(isCollectible);
        // Only what was planned: a first charge not made yet. Another runner may have made it meanwhile
        // (its plan came due): that attempt stands, and the next is dunning's, on its schedule.
        const toCharge = claimed.filter((i) => (i.attemptCount ?? 0) === 0 && !i.payment?.actionRequired && !i.payment?.pendingPolicy);
        const decided = new Map<string, AttemptDecision>();
        let next = 0;
        const charge = async () => {
          for (let i = toCharge[next++]; i !== undefined; i = toCharge[next++]) {
            const n = (i.attemptCount ?? 0) + 1;
            try {
              decided.set(i.id, decide(i, n, await provider.charge(pmOf.get(i.id) as PaymentMethod, amountDueOf(i), i.currency, chargeKey(i.id, n), metaOf(i)), at(i), settings));
            } catch (err) {
              this.events.settleFailed?.(i.id, err);
            }
          }
        };
        await Promise.all(Array.from({ length: Math.min(CHARGES_AT_ONCE, toCharge.length) }, charge));
        const made = toCharge.filter((i) => decided.has(i.id)).map((i) => ({ i, d: decided.get(i.id) as AttemptDecision, at: at(i) }));
        return { results: await recordDecisions(tx, this.writes(tx), this.now(), made), pending: claimed.filter((i) => i.payment?.pendingPolicy) };
      }),
    );
  }

  private writes(tx: Tx) {
    if (!tx.dunning) throw new Error("this store keeps no dunning state");
    return tx.dunning;
  }

  /**
   * After the last attempt failed with a policy pending (record): the policy applied to the
   * subscription, then in one transaction the invoice's end: uncollectible if so configured, no
   * next attempt, nothing pending. Undefined when the policy could not be applied now (it stays
   * pending and due: the next run tries again) or another runner finished it. `decision`: the
   * attempt's, when it was just made (a run finishing what a dead process left has none).
   */
  private async finishLast(i: Invoice, decision?: AttemptDecision): Promise<AttemptResult | undefined> {
    const pending = i.payment?.pendingPolicy;
    if (!pending || !(await this.afterLast(i, pending.policy))) return undefined;
    const ended = await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        const cur = await this.writes(tx).claim(i.environmentId, i.id);
        return cur?.payment?.pendingPolicy ? endAfterLast(tx, this.writes(tx), cur, pending.markUncollectible, this.now()) : undefined;
      }),
    );
    if (!ended) return undefined;
    // Made uncollectible while its payment waited for the customer: that payment cancelled after the commit (cancels.ts; the sweep if this fails).
    if (ended.payment?.cancel) await this.cancels?.settle(ended);
    const status = ended.status === "uncollectible" ? "uncollectible" : "open";
    return {
      decision: decision ?? { status, attemptCount: ended.attemptCount ?? 0, nextPaymentAttempt: null, payment: ended.payment ?? {}, event: "invoice.payment_failed", afterLast: pending.policy },
      invoice: ended,
    };
  }

  /**
   * The environment's policy after the last failed attempt: the subscription cancelled now,
   * paused, or left active. False when it could not be applied now (an error other than "already
   * so": it stays pending for the next run).
   */
  private async afterLast(i: Invoice, policy: AfterLastAttempt): Promise<boolean> {
    // Nothing to cancel or pause for an invoice of no subscription (a credit purchase).
    if (policy === "leave_active" || i.subscriptionId === "") return true;
    const mode = await this.reads.modeOf(i.environmentId);
    if (!mode) return true;
    const caller = systemCaller(i.environmentId, mode);
    try {
      if (policy === "cancel") await this.policies.cancelNow(caller, i.subscriptionId);
      else await this.policies.pause(caller, i.subscriptionId);
      return true;
    } catch (err) {
      // Already cancelled or paused (or following a timeline): nothing to do.
      if (err instanceof FailedPreconditionError) return true;
      this.events.settleFailed?.(i.id, err);
      return false;
    }
  }

  /**
   * Retries every invoice due by `now` on real time (clockId null) or one test clock, each at its
   * planned time; a retry that fails and plans the next by `now` is tried again in the same run.
   * `skipped`: invoices not tried again (those skipped or deferred are added; an advance passes one list to all its steps).
   * Returns how many attempts were made.
   */
  async runDue(now: Date, clockId: string | null, breathe?: () => Promise<void>, skipped: string[] = []): Promise<number> {
    await this.planUnplanned(now, clockId);
    let n = 0;
    for (;;) {
      const due = await this.store.due(now, clockId, DUE_BATCH, skipped);
      if (due.length === 0) return n;
      for (const d of due) {
        await breathe?.();
        try {
          const pm = (await this.stores.paymentMethods.ofSubjects([d.subjectId], d.environmentId)).get(d.subjectId);
          const done = await this.attempt(d, pm, (i) => i.nextPaymentAttempt ?? now, now);
          if (done) n++;
          else skipped.push(d.id);
        } catch (err) {
          skipped.push(d.id);
          this.events.settleFailed?.(d.id, err);
        }
      }
    }
  }

  /**
   * First charges that never got their plan (attempt's first step did not commit: the database
   * went away under it, the process died) are planned at `now`, so the run below makes them.
   */
  private async planUnplanned(now: Date, clockId: string | null): Promise<void> {
    for (const d of await this.store.unplanned(new Date(now.getTime() - UNPLANNED_AFTER_MS), clockId, DUE_BATCH)) {
      try {
        await this.planFirsts(d.environmentId, [d.id], () => now);
      } catch (err) {
        this.events.settleFailed?.(d.id, err);
      }
    }
  }

  /**
   * A new card from the portal: the subject's open invoices with something due are charged to it at once (their next attempt; a payment waiting
   * for the customer cancelled first), at `at` on the subject's clock; never a purchase awaiting its checkout (awaitsCheckout). Returns how many were paid.
   */
  async retrySubject(environmentId: string, subjectId: string, pm: PaymentMethod, at: Date): Promise<number> {
    let paid = 0;
    const { items } = await this.stores.invoices.list(environmentId, { subjectId, status: "open" }, { limit: 100, offset: 0 });
    for (const i of items.filter((x) => isCollectible(x) && !awaitsCheckout(x))) {
      try {
        if ((await this.attempt(i, pm, () => at))?.decision.status === "paid") paid++;
      } catch (err) {
        this.events.settleFailed?.(i.id, err);
      }
    }
    return paid;
  }

  /**
   * Whether the invoice waits for the customer, and how the hosted page completes it: its form
   * (`confirmHere`: the test provider confirms it, or Stripe's Checkout page it leads to, startPayment)
   * or the provider's own page for the payment (`actionUrl`), if it gave one.
   */
  async pendingAction(i: Invoice): Promise<{ confirmHere: boolean; actionUrl: string | null; providerPage?: ProviderKind } | undefined> {
    if (!isCollectible(i) || !i.payment?.actionRequired) return undefined;
    const provider = await this.reads.providerFor(i.environmentId);
    const onPage = provider?.startPayment !== undefined;
    const confirmHere = (confirms(provider) !== undefined && !i.payment.actionUrl) || onPage;
    // providerPage: the form's POST ends on that provider's page (the hosted page's form-action allows it).
    return { confirmHere, actionUrl: i.payment.actionUrl ?? null, ...(onPage ? { providerPage: provider?.kind ?? "test" } : {}) };
  }

  /**
   * The hosted page's form, for a provider that takes the waiting payment on its own page (Stripe
   * Checkout in payment mode): that page for the amount due, one per attempt (a double click gets
   * the same). Its webhook pays the invoice (actionResolved). Undefined: nothing waits, or the
   * provider has no such page. `returnPath`: the hosted invoice page.
   */
  async startPayment(i: Invoice, returnPath: string): Promise<{ url: string } | undefined> {
    if (!isCollectible(i) || !i.payment?.actionRequired) return undefined;
    const provider = await this.reads.providerFor(i.environmentId);
    if (!provider?.startPayment) return undefined;
    const { url } = await provider.startPayment({
      invoiceId: i.id,
      subjectId: i.subjectId,
      amount: amountDueOf(i),
      currency: i.currency,
      attempt: Math.max(i.attemptCount ?? 1, 1),
      description: i.number ? `Invoice ${i.number}` : `Invoice ${i.id}`,
      returnPath,
    });
    return { url };
  }

  /**
   * The customer completed the authentication on the hosted invoice page (a provider that confirms
   * it itself: the test provider): the waiting charge is confirmed, the same attempt, and the
   * invoice paid (`invoice.paid`). Undefined: nothing was waiting (paid meanwhile, or not this provider's).
   */
  async completeAction(ref: ActionRef): Promise<AttemptResult | undefined> {
    const provider = confirms(await this.reads.providerFor(ref.environmentId));
    if (!provider) return undefined;
    return this.resolveAction(ref, (reference) => provider.confirmAction(reference));
  }

  /**
   * A provider with its own page (Stripe) tells how a charge that waited for the customer ended
   * (its webhook): recorded as that attempt's outcome, once — paid (`invoice.paid`), or failed
   * with the next attempt planned. `reference`: the provider's payment it is about (another one,
   * or an invoice no longer waiting: undefined, nothing changes).
   */
  actionResolved(ref: ActionRef, reference: string, outcome: ChargeOutcome): Promise<AttemptResult | undefined> {
    return this.resolveAction(ref, async (waiting) => (waiting === reference ? outcome : undefined));
  }

  private async resolveAction(ref: ActionRef, outcomeOf: (reference: string) => Promise<ChargeOutcome | undefined>): Promise<AttemptResult | undefined> {
    const settings = await this.settings.settingsOf(ref.environmentId);
    // On the invoice's clock: a failure here may be its first (the schedule counts from it).
    const clock = ref.clockId ? await this.stores.clocks.get(ref.environmentId, ref.clockId) : undefined;
    const at = clock?.frozenTime ?? this.now();
    const done = await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        const i = await this.writes(tx).claim(ref.environmentId, ref.id);
        const reference = i?.payment?.reference;
        if (!i || !isCollectible(i) || !(i.payment?.actionRequired || i.payment?.processing) || !reference) return undefined;
        const outcome = await outcomeOf(reference);
        if (!outcome) return undefined;
        return (await recordDecisions(tx, this.writes(tx), this.now(), [{ i, d: decide(i, Math.max(i.attemptCount ?? 1, 1), outcome, at, settings), at }]))[0];
      }),
    );
    // Paid by another payment (a pay link's): the one that waited is cancelled after the commit (cancels.ts; the sweep if this fails).
    if (done?.invoice.payment?.cancel) await this.cancels?.settle(done.invoice);
    // A policy only for an invoice still unpaid (paid() clears it).
    return done?.invoice.payment?.pendingPolicy && done.decision.status !== "paid" ? this.finishLast(done.invoice, done.decision) : done;
  }
}
