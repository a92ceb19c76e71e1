/**
 * Credit use cases (DESIGN §14): grant, read, list and void credit; a subject's ledger and its
 * per-currency settings; expiry of grants whose time has come. Paid grants are bought through
 * purchase.ts.
 *
 * A promotional grant is active at once with its "grant" ledger entry (it counts in the balance
 * from then; it is spendable from effective_at, by default now: the subject's test clock time when
 * it has one). Voiding takes what is left off the balance; expiry does the same at expires_at.
 */
import { FailedPreconditionError, NotFoundError, Violations } from "../errors.js";
import { creditGrantEvent } from "../events/types.js";
import { type Page, type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import type { CallbackUrls } from "../subscriptions/checkout.js";
import type { Lookups } from "../subscriptions/lookups.js";
import type { CreditStore } from "./ports.js";
import { type CreditPurchases, type PurchaseResult, newGrantId } from "./purchase.js";
import type { CreditGrant, CreditSettings, LedgerEntry } from "./types.js";
import { type AmountInput, type CreateGrantInput, checkCurrency, checkGrant, checkPriority, checkStatus, checkWholeAmount } from "./validation.js";

/**
 * The answer to a purchase whose charge the payment provider refused for good (its credentials or
 * account, not the card): an error, not a pending purchase, naming what was written (the grant
 * failed, its invoice void, nothing charged), so the same request is not sent blindly again.
 */
function providerRefused(g: CreditGrant, message: string): FailedPreconditionError {
  const what = `the grant ${g.id} failed and its invoice ${g.invoiceId} is void; nothing was charged`;
  return new FailedPreconditionError("PAYMENT_PROVIDER_REFUSED", `the payment provider refused the charge (${message}): ${what}; fix the provider's settings before buying again`, {
    credit_grant_id: g.id,
    invoice_id: g.invoiceId ?? "",
  });
}

export interface ListGrantsInput {
  limit?: number;
  offset?: number;
  subjectId: string;
  status: string;
}

export interface LedgerInput {
  limit?: number;
  offset?: number;
  currency: string;
  /** Newest first (the pages); oldest first by default (the API). */
  newestFirst?: boolean;
}

export interface SettingsInput {
  currency: string;
  lowBalanceThreshold?: AmountInput;
  autoTopUp?: { threshold?: AmountInput; amount?: AmountInput; priority?: number };
}

export class Credits {
  /** Told after a change of a subject's balance (a grant, a void): credit alerts are evaluated then. */
  changed: ((environmentId: string, subjectId: string) => Promise<unknown>) | undefined = undefined;

  constructor(
    private readonly store: CreditStore,
    private readonly lookups: Lookups,
    readonly purchases: CreditPurchases,
  ) {}

  /** Creates a grant; see the contract (CreateCreditGrant) for the rules and errors. */
  async create(caller: Caller, input: CreateGrantInput): Promise<PurchaseResult> {
    const v = new Violations();
    const g = checkGrant(input, v);
    if (input.subjectId === "") v.add("subject_id", "is required");
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, input.subjectId);
    const now = await this.lookups.nowFor(subject);
    const effectiveAt = g.effectiveAt ?? now;
    if (g.expiresAt && g.expiresAt.getTime() <= effectiveAt.getTime()) {
      v.add("expires_at", `must be after effective_at (${effectiveAt.toISOString()})`);
      v.throwIfAny();
    }
    if (g.category === "paid") {
      const bought = await this.purchases.purchase(caller, subject, { ...g, effectiveAt }, input.callbacks as CallbackUrls | undefined, now);
      await this.changed?.(caller.environmentId, subject.id);
      if (bought.refused !== undefined) throw providerRefused(bought.grant, bought.refused);
      return bought;
    }
    const grant: CreditGrant = {
      id: newGrantId(),
      environmentId: caller.environmentId,
      subjectId: subject.id,
      currency: g.currency,
      amount: g.amount,
      remaining: g.amount,
      category: "promotional",
      priority: g.priority,
      effectiveAt,
      expiresAt: g.expiresAt,
      appliesToRateCodes: g.appliesToRateCodes,
      metadata: g.metadata,
      status: "active",
      invoiceId: null,
      createdAt: now,
      voidedAt: null,
      expiredAt: null,
    };
    await this.store.transaction(async (tx) => {
      await tx.insertGrant(grant, { type: "grant", invoiceId: null, description: "Promotional credit" });
      await tx.emit([creditGrantEvent("credit_grant.created", grant)]);
    });
    await this.changed?.(caller.environmentId, subject.id);
    return { grant, checkoutUrl: null };
  }

  async get(caller: Caller, id: string): Promise<CreditGrant> {
    const g = id === "" ? undefined : await this.store.get(caller.environmentId, id);
    if (!g) throw new NotFoundError("CREDIT_GRANT_NOT_FOUND", `credit grant ${JSON.stringify(id)} not found`, { credit_grant_id: id });
    return g;
  }

  async list(caller: Caller, input: ListGrantsInput): Promise<PageResult<CreditGrant>> {
    const v = new Violations();
    const page = checkPage(input.limit, input.offset, v);
    const status = checkStatus(input.status, v);
    v.throwIfAny();
    const subjectId = input.subjectId === "" ? undefined : (await this.lookups.subject(caller, input.subjectId)).id;
    return this.store.list(caller.environmentId, { subjectId, status }, page);
  }

  /** Voids what is left of a grant (FAILED_PRECONDITION unless it is active or depleted). */
  async void(caller: Caller, id: string): Promise<CreditGrant> {
    const before = await this.get(caller, id);
    // The subject's clock time; real time when the subject was deleted since (its grants remain).
    const subject = await this.lookups.stores.directory.subject(caller.environmentId, before.subjectId);
    const now = subject ? await this.lookups.nowFor(subject) : this.lookups.engine.now();
    const voided = await this.store.transaction(async (tx) => {
      const g = await tx.close(caller.environmentId, id, "void", now);
      if (!g) {
        const current = (await tx.lockGrant(caller.environmentId, id)) ?? before;
        throw new FailedPreconditionError("CREDIT_GRANT_NOT_VOIDABLE", `credit grant ${id} is ${current.status}; only an active or depleted grant can be voided`, {
          credit_grant_id: id,
          status: current.status,
        });
      }
      await tx.emit([creditGrantEvent("credit_grant.voided", g)]);
      return g;
    });
    await this.changed?.(caller.environmentId, before.subjectId);
    return voided;
  }

  async ledger(caller: Caller, subjectKey: string, input: LedgerInput): Promise<PageResult<LedgerEntry>> {
    const v = new Violations();
    const page: Page = checkPage(input.limit, input.offset, v);
    const currency = input.currency === "" ? undefined : checkCurrency(input.currency, "currency_code", v);
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, subjectKey);
    return this.store.ledger(caller.environmentId, subject.id, currency, page, input.newestFirst ?? false);
  }

  async settings(caller: Caller, subjectKey: string, currencyCode: string): Promise<CreditSettings> {
    const v = new Violations();
    const currency = checkCurrency(currencyCode, "currency_code", v);
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, subjectKey);
    return (await this.store.getSettings(caller.environmentId, subject.id, currency)) ?? { subjectId: subject.id, currency, lowBalanceThreshold: null, autoTopUp: null };
  }

  async updateSettings(caller: Caller, subjectKey: string, input: SettingsInput): Promise<CreditSettings> {
    const v = new Violations();
    const currency = checkCurrency(input.currency, "currency_code", v);
    const amountIn = (a: AmountInput | undefined, field: string, positive: boolean): string => {
      if (!a) {
        v.add(field, "is required");
        return "0";
      }
      if (a.currency !== "" && a.currency.toUpperCase() !== currency) v.add(`${field}.currency_code`, `must be the settings' currency ${currency} (or empty)`);
      return checkWholeAmount(a.value, `${field}.value`, v, positive);
    };
    const low = input.lowBalanceThreshold ? amountIn(input.lowBalanceThreshold, "low_balance_threshold", false) : null;
    const t = input.autoTopUp;
    const autoTopUp = t
      ? {
          threshold: amountIn(t.threshold, "auto_top_up.threshold", false),
          amount: amountIn(t.amount, "auto_top_up.amount", true),
          priority: checkPriority(t.priority === 0 ? undefined : t.priority, "auto_top_up.priority", v),
        }
      : null;
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, subjectKey);
    const settings: CreditSettings = { subjectId: subject.id, currency, lowBalanceThreshold: low, autoTopUp };
    const now = await this.lookups.nowFor(subject);
    await this.store.transaction((tx) => tx.putSettings(caller.environmentId, settings, now));
    return settings;
  }

  /**
   * Expires the grants due by `now` on real time (clockId null) or one test clock, optionally of
   * one environment: each in its own transaction, its rest leaving the balance as an "expiry"
   * ledger entry dated at its expires_at, with `credit_grant.expired`. Safe with N servers: a
   * grant another server expired first is skipped (close finds it expired). Returns how many.
   */
  async expireDue(now: Date, clockId: string | null, environmentId: string | null = null): Promise<number> {
    let count = 0;
    for (;;) {
      const due = await this.store.dueExpiries(now, clockId, 100, environmentId);
      let changed = 0;
      for (const g of due) {
        const done = await this.store.transaction(async (tx) => {
          const closed = await tx.close(g.environmentId, g.id, "expiry", g.expiresAt ?? now);
          if (closed) await tx.emit([creditGrantEvent("credit_grant.expired", closed)]);
          return closed !== undefined;
        });
        if (done) changed++;
      }
      count += changed;
      if (due.length < 100 || changed === 0) return count;
    }
  }
}
