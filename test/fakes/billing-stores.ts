/**
 * In-memory fakes of billing's storage ports (src/billing/subscriptions/ports.ts), for unit tests
 * of the engine and the use cases without a database. A transaction runs alone (one at a time)
 * and is committed or not at all: on an error every map is put back as it was.
 */
import type { NewEvent } from "../../src/billing/events/types.js";
import { AlreadyExistsError } from "../../src/billing/errors.js";
import { dec, formatDecimal } from "../../src/billing/money.js";
import type { Page, PageResult } from "../../src/billing/pagination.js";
import type { BillingStores, BillingTx, StoredTestClock } from "../../src/billing/subscriptions/ports.js";
import type { BillingSubject, CheckoutSession, Invoice, InvoiceLine, PaymentMethod, PortalSession, Subscription, Timeline, TimelineItem } from "../../src/billing/subscriptions/types.js";
import type { EnvironmentMode } from "../../src/billing/tenancy.js";

function page<T>(all: T[], p: Page): PageResult<T> {
  return { items: all.slice(p.offset, p.offset + p.limit), hasMore: all.length > p.offset + p.limit };
}

/** Everything the fake holds: plain maps a test may read or seed directly. */
export class BillingState {
  environments = new Map<string, EnvironmentMode>();
  subjects = new Map<string, BillingSubject>();
  subscriptions = new Map<string, Subscription>();
  invoices = new Map<string, Invoice>();
  paymentMethods = new Map<string, PaymentMethod>();
  checkouts = new Map<string, CheckoutSession>();
  portals = new Map<string, PortalSession>();
  timelines = new Map<string, Timeline>();
  timelineItems = new Map<string, TimelineItem>();
  clocks = new Map<string, StoredTestClock>();
  /** Draft grace period per environment, in seconds; an environment not in it has none (final at once). */
  graceSeconds = new Map<string, number>();
  /** When each ended subscription's late usage was last checked. */
  checkedAt = new Map<string, Date>();
  /** The outbox: events emitted by committed transactions, in order (keyed by their position). */
  events = new Map<string, NewEvent>();
  /** Usage thresholds announced, by subscription, period, rate and percentage. */
  thresholdMarks = new Map<string, string>();

  snapshot(): BillingState {
    const copy = new BillingState();
    for (const key of Object.keys(this) as (keyof BillingState)[]) {
      const map = this[key];
      if (map instanceof Map) (copy[key] as Map<string, unknown>) = new Map([...map].map(([k, v]) => [k, structuredClone(v)]));
    }
    return copy;
  }

  restore(from: BillingState): void {
    Object.assign(this, from);
  }
}

/** A fault a test injects: runs before each transaction write; throw from it to make that write fail. */
export type WriteFault = (write: keyof BillingTx, arg: unknown) => void;

export class FakeBillingStores implements BillingStores {
  readonly state = new BillingState();
  /** Set by a test to make a write fail. */
  fault: WriteFault = () => {};
  private running: Promise<unknown> = Promise.resolve();

  readonly subscriptions: BillingStores["subscriptions"] = {
    get: async (env, id) => this.copy(this.state.subscriptions.get(id), env),
    list: async (env, filter, p) =>
      page(
        [...this.state.subscriptions.values()]
          .filter((s) => s.environmentId === env && (!filter.subjectId || s.subjectId === filter.subjectId) && (!filter.rateCardId || s.rateCardId === filter.rateCardId))
          .map((s) => structuredClone(s)),
        p,
      ),
    failing: async (env, p) =>
      page(
        [...this.state.subscriptions.values()]
          .filter((s) => s.environmentId === env && s.billingFailure)
          .sort((a, b) => (a.billingFailure as { retryAt: Date }).retryAt.getTime() - (b.billingFailure as { retryAt: Date }).retryAt.getTime())
          .map((s) => structuredClone(s)),
        p,
      ),
    listAll: async (env, filter, p) =>
      page(
        [...this.state.subscriptions.values()]
          .filter((s) => s.environmentId === env && (!filter.status || s.status === filter.status) && (!filter.rateCardId || s.rateCardId === filter.rateCardId))
          .reverse()
          .map((s) => structuredClone(s)),
        p,
      ),
    runningOfKey: async (env, key) => {
      const subject = this.state.subjects.get(key);
      return subject && subject.environmentId === env ? this.subscriptions.running(env, subject.id) : undefined;
    },
    running: async (env, subjectId) =>
      [...this.state.subscriptions.values()].filter((s) => s.environmentId === env && s.subjectId === subjectId && (s.status === "active" || s.status === "paused")).map((s) => structuredClone(s)),
    due: async (now, clockId, limit, strict, realNow) =>
      [...this.state.subscriptions.values()]
        .filter((s) => s.status === "active" && (strict ? s.periodEnd < now : s.periodEnd <= now) && s.testClockId === clockId && (!s.billingFailure || s.billingFailure.retryAt <= realNow))
        .sort((a, b) => a.periodEnd.getTime() - b.periodEnd.getTime())
        .slice(0, limit)
        .map((s) => structuredClone(s)),
    setBillingFailure: async (s, failure) => {
      const row = this.state.subscriptions.get(s.id);
      if (row?.status !== "active" || row.cycleIndex !== s.cycleIndex || row.usageSince.getTime() !== s.usageSince.getTime()) return false;
      row.billingFailure = structuredClone(failure);
      return true;
    },
    ended: async (clockId, limit, checkedBefore) =>
      [...this.state.subscriptions.values()]
        .filter((s) => s.status === "cancelled" && s.testClockId === clockId && (!checkedBefore || !this.state.checkedAt.has(s.id) || (this.state.checkedAt.get(s.id) as Date) < checkedBefore))
        .sort((a, b) => (this.state.checkedAt.get(a.id)?.getTime() ?? 0) - (this.state.checkedAt.get(b.id)?.getTime() ?? 0))
        .slice(0, limit)
        .map((s) => structuredClone(s)),
    dueResumes: async (now, clockId, limit) =>
      [...this.state.subscriptions.values()]
        .filter((s) => s.status === "paused" && s.resumesAt !== null && s.resumesAt <= now && s.testClockId === clockId)
        .sort((a, b) => (a.resumesAt as Date).getTime() - (b.resumesAt as Date).getTime())
        .slice(0, limit)
        .map((s) => structuredClone(s)),
    markChecked: async (ids, at) => {
      for (const id of ids) this.state.checkedAt.set(id, at);
    },
  };

  readonly invoices: BillingStores["invoices"] = {
    get: async (env, id) => this.copy(this.state.invoices.get(id), env),
    byToken: async (token) => structuredClone([...this.state.invoices.values()].find((i) => i.hostedToken === token)),
    byPeriodKey: async (subscriptionId, periodKey) => structuredClone([...this.state.invoices.values()].find((i) => i.subscriptionId === subscriptionId && i.periodKey === periodKey)),
    billedWithin: async (subscriptionId, environmentId, from, to) =>
      [...this.state.invoices.values()]
        .filter((i) => i.subscriptionId === subscriptionId && i.environmentId === environmentId && i.status !== "void" && i.periodStart >= from && i.periodEnd <= to)
        .map((i) => structuredClone(i)),
    list: async (env, subjectId, p) =>
      page(
        [...this.state.invoices.values()].filter((i) => i.environmentId === env && i.subjectId === subjectId).map((i) => structuredClone(i)),
        p,
      ),
    revenue: async (env, from, to) => {
      const by = new Map<string, { currency: string; total: string; count: number }>();
      for (const i of this.state.invoices.values()) {
        if (i.environmentId !== env || !i.finalizedAt || i.finalizedAt < from || i.finalizedAt >= to || !["open", "paid", "uncollectible"].includes(i.status)) continue;
        const r = by.get(i.currency) ?? { currency: i.currency, total: "0", count: 0 };
        by.set(i.currency, { currency: i.currency, total: formatDecimal(dec(r.total).plus(dec(i.total))), count: r.count + 1 });
      }
      return [...by.values()].sort((a, b) => (a.currency < b.currency ? -1 : 1));
    },
    listAll: async (env, filter, p) =>
      page(
        [...this.state.invoices.values()]
          .filter((i) => i.environmentId === env && (!filter.status || i.status === filter.status) && (!filter.subscriptionId || i.subscriptionId === filter.subscriptionId))
          .reverse()
          .map((i) => structuredClone(i)),
        p,
      ),
    recent: async (env, subjectId, limit) =>
      [...this.state.invoices.values()]
        .filter((i) => i.environmentId === env && i.subjectId === subjectId)
        .reverse()
        .slice(0, limit)
        .map((i) => structuredClone(i)),
    dueDrafts: async (now, clockId, limit) =>
      [...this.state.invoices.values()]
        .filter((i) => i.status === "draft" && i.finalizesAt !== null && i.finalizesAt <= now && i.clockId === clockId)
        .sort((a, b) => (a.finalizesAt as Date).getTime() - (b.finalizesAt as Date).getTime())
        .slice(0, limit)
        .map((i) => structuredClone(i)),
    nextDraftDue: async (after, upTo, clockId) => {
      const due = [...this.state.invoices.values()].flatMap((i) =>
        i.status === "draft" && i.clockId === clockId && i.finalizesAt && i.finalizesAt <= upTo && (!after || i.finalizesAt > after) ? [i.finalizesAt.getTime()] : [],
      );
      return due.length > 0 ? new Date(Math.min(...due)) : null;
    },
    windows: async (subscriptionId, environmentId) => (await this.invoices.windowsOf([subscriptionId], environmentId)).get(subscriptionId) ?? [],
    windowsOf: async (subscriptionIds, environmentId) => {
      const out = new Map<string, { invoice: Invoice; billed: InvoiceLine[] }[]>();
      for (const subscriptionId of subscriptionIds) {
        const list = this.windowsOne(subscriptionId, environmentId);
        if (list.length > 0) out.set(subscriptionId, list);
      }
      return out;
    },
    createdWithin: async (subscriptionId, environmentId, from, to) => {
      const all = [...this.state.invoices.values()].filter((i) => i.environmentId === environmentId);
      return all
        .filter((i) => i.subscriptionId === subscriptionId && i.createdAt > from && i.createdAt <= to)
        .map((i) => ({ invoice: structuredClone(i), tied: all.flatMap((o) => o.lines.filter((l) => l.windowInvoiceId === i.id)).map((l) => structuredClone(l)) }));
    },
  };

  private windowsOne(subscriptionId: string, environmentId: string): { invoice: Invoice; billed: InvoiceLine[] }[] {
    const all = [...this.state.invoices.values()].filter((i) => i.environmentId === environmentId);
    return all
      .filter((i) => i.subscriptionId === subscriptionId && i.status !== "draft" && i.window !== null)
      .map((i) => ({
        invoice: { ...structuredClone(i), lines: [] },
        billed: [
          ...i.lines.filter((l) => l.kind === "usage" || l.kind === "minimum" || l.kind === "maximum" || l.kind === "commitment_true_up"),
          ...all.flatMap((o) => o.lines.filter((l) => l.windowInvoiceId === i.id)),
        ].map((l) => structuredClone(l)),
      }));
  }

  readonly paymentMethods: BillingStores["paymentMethods"] = {
    get: async (id, environmentId) => {
      const pm = this.state.paymentMethods.get(id);
      return pm?.environmentId === environmentId ? structuredClone(pm) : undefined;
    },
    ofSubjects: async (subjectIds, environmentId) => {
      const out = new Map<string, PaymentMethod>();
      for (const id of subjectIds) {
        const pmId = [...this.state.subjects.values()].find((s) => s.id === id && s.environmentId === environmentId)?.paymentMethodId;
        const pm = pmId ? this.state.paymentMethods.get(pmId) : undefined;
        if (pm) out.set(id, structuredClone(pm));
      }
      return out;
    },
  };

  readonly checkouts: BillingStores["checkouts"] = {
    insert: async (c) => void this.state.checkouts.set(c.token, structuredClone(c)),
    get: async (token) => structuredClone(this.state.checkouts.get(token)),
    expiredOpen: async (before, limit) =>
      [...this.state.checkouts.values()]
        .filter((c) => c.status === "open" && c.expiresAt.getTime() <= before.getTime())
        .sort((a, b) => a.expiresAt.getTime() - b.expiresAt.getTime())
        .slice(0, limit)
        .map((c) => structuredClone(c)),
  };

  readonly portals: BillingStores["portals"] = {
    insert: async (p) => void this.state.portals.set(p.token, structuredClone(p)),
    get: async (token) => structuredClone(this.state.portals.get(token)),
  };

  readonly timelines: BillingStores["timelines"] = {
    insert: async (t) => void this.state.timelines.set(t.id, structuredClone(t)),
    get: async (env, id) => this.copy(this.state.timelines.get(id), env),
    list: async (env, p) =>
      page(
        [...this.state.timelines.values()].filter((t) => t.environmentId === env).map((t) => structuredClone(t)),
        p,
      ),
    items: async (timelineId) =>
      [...this.state.timelineItems.values()]
        .filter((i) => i.timelineId === timelineId)
        .sort((a, b) => a.start.getTime() - b.start.getTime())
        .map((i) => structuredClone(i)),
    due: async (now, clockId, limit) =>
      [...this.state.timelines.values()]
        .filter((t) => (t.status === "pending" || t.status === "active") && t.nextTransitionAt !== null && t.nextTransitionAt <= now && t.testClockId === clockId)
        .sort((a, b) => (a.nextTransitionAt as Date).getTime() - (b.nextTransitionAt as Date).getTime())
        .slice(0, limit)
        .map((t) => structuredClone(t)),
  };

  readonly clocks: BillingStores["clocks"] = {
    insert: async (c) => void this.state.clocks.set(c.id, { ...structuredClone(c), status: "ready", advanceStartedAt: null }),
    get: async (env, id) => this.copy(this.state.clocks.get(id), env),
    list: async (env, p) =>
      page(
        [...this.state.clocks.values()]
          .filter((c) => c.environmentId === env)
          .reverse()
          .map((c) => structuredClone(c)),
        p,
      ),
    advance: async (env, id, to, startedAt) => {
      const c = this.state.clocks.get(id);
      if (!c || c.environmentId !== env || c.frozenTime > to) return false;
      c.frozenTime = to;
      c.status = "advancing";
      c.advanceStartedAt = startedAt;
      return true;
    },
    finish: async (env, id, at) => {
      const c = this.state.clocks.get(id);
      if (!c || c.environmentId !== env || c.frozenTime.getTime() !== at.getTime()) return false;
      c.status = "ready";
      return true;
    },
    stalled: async (before, limit) =>
      [...this.state.clocks.values()]
        .filter((c) => c.status === "advancing" && c.advanceStartedAt !== null && c.advanceStartedAt <= before)
        .sort((a, b) => (a.advanceStartedAt?.getTime() ?? 0) - (b.advanceStartedAt?.getTime() ?? 0))
        .slice(0, limit)
        .map((c) => structuredClone(c)),
    takeOver: async (env, id, at, startedAt, now) => {
      const c = this.state.clocks.get(id);
      if (!c || c.environmentId !== env || c.status !== "advancing" || c.frozenTime.getTime() !== at.getTime() || c.advanceStartedAt?.getTime() !== startedAt.getTime()) return false;
      c.advanceStartedAt = now;
      return true;
    },
  };

  readonly directory: BillingStores["directory"] = {
    subject: async (env, key) => this.copy(this.state.subjects.get(key), env),
    profile: async (env, id) => (this.copy(this.state.subjects.get(id), env) ? { name: null, email: null } : undefined),
    environmentMode: async (env) => this.state.environments.get(env),
    invoiceGraceSeconds: async (env) => this.state.graceSeconds.get(env) ?? 0,
  };

  private copy<T extends { environmentId: string }>(row: T | undefined, env: string): T | undefined {
    return row && row.environmentId === env ? structuredClone(row) : undefined;
  }

  /** No idempotency keys here: the work is simply run. */
  asScheduler<T>(fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  transaction<T>(fn: (tx: BillingTx) => Promise<T>): Promise<T> {
    const run = this.running.then(async () => {
      const before = this.state.snapshot();
      try {
        return await fn(this.tx());
      } catch (err) {
        this.state.restore(before);
        throw err;
      }
    });
    this.running = run.catch(() => undefined);
    return run;
  }

  private tx(): BillingTx {
    const s = this.state;
    const write = <A>(name: keyof BillingTx, arg: A) => this.fault(name, arg);
    const tx: BillingTx = {
      lockSubscription: async (env, id) => this.copy(s.subscriptions.get(id), env),
      lockSubscriptions: async (ids) => ids.flatMap((id) => (s.subscriptions.has(id) ? [structuredClone(s.subscriptions.get(id) as Subscription)] : [])),
      insertSubscription: async (sub) => {
        write("insertSubscription", sub);
        s.subscriptions.set(sub.id, structuredClone(sub));
      },
      updateSubscription: async (sub) => {
        write("updateSubscription", sub);
        s.subscriptions.set(sub.id, structuredClone(sub));
      },
      updateSubscriptions: async (list) => {
        for (const sub of list) await tx.updateSubscription(sub);
      },
      insertInvoices: async (list) => {
        write("insertInvoices", list);
        for (const i of list) {
          const taken = [...s.invoices.values()].some((x) => x.subscriptionId === i.subscriptionId && x.periodKey === i.periodKey);
          if (taken) throw new AlreadyExistsError("INVOICE_EXISTS", `subscription ${i.subscriptionId} already has an invoice for its period`);
          s.invoices.set(i.id, structuredClone(i));
        }
      },
      insertInvoice: (i) => tx.insertInvoices([i]),
      lockDraft: async (_env, id) => s.invoices.get(id)?.status === "draft",
      finalizeDraft: async (i, at) => {
        write("finalizeDraft", i);
        const row = s.invoices.get(i.id);
        if (row?.status !== "draft") return false;
        s.invoices.set(i.id, { ...structuredClone(i), status: "open", finalizedAt: at });
        return true;
      },
      moveInvoices: async (ids, from, to, _at, environmentId) => {
        const moved = ids.filter((id) => s.invoices.get(id)?.status === from && s.invoices.get(id)?.environmentId === environmentId);
        for (const id of moved) (s.invoices.get(id) as Invoice).status = to;
        return moved;
      },
      markThreshold: async (m) => {
        const key = `${m.subscriptionId}|${m.periodKey}|${m.rateCode}|${m.percent}`;
        if (s.thresholdMarks.has(key)) return false;
        s.thresholdMarks.set(key, m.eventId);
        return true;
      },
      emit: async (events) => {
        for (const e of events) s.events.set(String(s.events.size).padStart(8, "0"), structuredClone(e));
      },
      lockCheckout: async (token) => structuredClone(s.checkouts.get(token)),
      updateCheckoutStatus: async (id, status, _env, payload) => {
        for (const c of s.checkouts.values()) if (c.id === id) Object.assign(c, { status }, payload ? { payload: structuredClone(payload) } : {});
      },
      insertPaymentMethod: async (pm) => void s.paymentMethods.set(pm.id, structuredClone(pm)),
      setSubjectPaymentMethod: async (subjectId, pmId) => {
        const subject = s.subjects.get(subjectId);
        if (subject) subject.paymentMethodId = pmId;
      },
      lockTimeline: async (env, id) => this.copy(s.timelines.get(id), env),
      updateTimeline: async (t) => void s.timelines.set(t.id, structuredClone(t)),
      insertTimelineItems: async (items) => {
        for (const i of items) s.timelineItems.set(i.id, structuredClone(i));
      },
    };
    return tx;
  }
}
