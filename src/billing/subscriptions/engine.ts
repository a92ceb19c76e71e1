/**
 * The billing engine (DESIGN §8): what a subscription owes at each cycle boundary, at a
 * cancellation and at a rate-card change, written once per (subscription, period) — the unique
 * key makes a repeated or concurrent run unable to bill twice — and charged to the saved method.
 */
import { type ChargedRates, chargedRates } from "../catalog/addons.js";
import type { RateCardStore } from "../catalog/rate-cards.js";
import type { RateCatalogStore } from "../catalog/rate-catalogs.js";
import { coordinatesKey } from "../catalog/rates.js";
import type { PricingMetric, RateCard } from "../catalog/types.js";
import type { PricingMetricStore } from "../catalog/metrics.js";
import { AbortedError, AlreadyExistsError, BillingError, FailedPreconditionError } from "../errors.js";
import { invoiceEvent, newInvoiceEvents, subscriptionEvent } from "../events/types.js";
import { newId, randomBase62 } from "../ids.js";
import { cycleBounds } from "../invoicing/cycles.js";
import { type Line, dimensionalLines, fixedLine, simpleUsageLine, total } from "../invoicing/lines.js";
import type { SummaryService } from "../metering/usage.js";
import { type Decimal, SCALE, ZERO, amountProblem, dec, formatDecimal } from "../money.js";
import { type Yielder, yielder } from "../yielding.js";
import type { EnvironmentMode } from "../tenancy.js";
import type { PaymentProviders } from "./payments.js";
import { retryingRaces } from "./races.js";
import type { BillingStores, BillingTx } from "./ports.js";
import type { BillingFailure, Invoice, InvoiceLine, InvoiceLineKind, PaymentMethod, PaymentProvider, Subscription, UsageCheck, UsageWindow } from "./types.js";
import { chargeKey } from "./types.js";

const ONE = dec(1);

/** A priced line and what it is: fixed, usage of the invoice's window (keyed by rate and cell), or an adjustment of an earlier window. */
export type BillLine = Line & { kind: InvoiceLineKind; key: string | null; windowInvoiceId: string | null };

export function fixedBillLines(lines: Line[]): BillLine[] {
  return lines.map((l) => ({ ...l, kind: "fixed", key: null, windowInvoiceId: null }));
}

/** How an invoice is written: the usage window it bills, and until when it is a draft (null: final at once). */
export interface InvoiceTerms {
  window?: UsageWindow | null;
  finalizesAt?: Date | null;
}

/** How long an environment's grace period setting is cached (an operator may change it). */
const GRACE_CACHE_MS = 5_000;

/** An ended subscription's late usage is looked for again after this long (real time). */
export const ENDED_RECHECK_MS = 3_600_000;

/** How many ended subscriptions one real-time scheduler run looks at for late usage. */
const ENDED_PER_RUN = 200;

/** The (subscription, period) key of the invoice that opens cycle `n` (of the current epoch). */
export function cycleKey(s: Pick<Subscription, "cycleEpoch">, n: number): string {
  return s.cycleEpoch === 0 ? `cycle:${n}` : `cycle:${s.cycleEpoch}.${n}`;
}

/** A priced line as an invoice keeps it. */
function storedLine(l: BillLine): InvoiceLine {
  return {
    description: l.description,
    quantity: formatDecimal(l.quantity),
    // Unit prices are kept to 12 decimal places (DECIMAL(38,12)), the same on both stores.
    unitAmount: formatDecimal(l.unitAmount.toDecimalPlaces(SCALE)),
    amount: formatDecimal(l.amount),
    kind: l.kind,
    key: l.key,
    windowInvoiceId: l.windowInvoiceId,
  };
}

function sameCheck(a: UsageCheck | null, b: UsageCheck | null): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function day(d: Date): string {
  return d.toISOString().replace(".000Z", "Z");
}

/**
 * How long a subscription whose cycle close failed is set aside before the next try, after
 * `attempts` failures: 30 s, doubling, at most 1 hour, each with up to 20% jitter so that many
 * subscriptions that failed together are not retried together.
 */
export function retryDelayMs(attempts: number, random = Math.random()): number {
  const base = Math.min(30_000 * 2 ** Math.max(0, attempts - 1), 3_600_000);
  return Math.round(base * (1 + 0.2 * random));
}

/**
 * What is kept and shown of an error that failed a cycle close: a billing rule's message; for
 * anything unexpected only that it was (the cause, which may be a driver's text, is logged).
 */
function failureMessage(err: unknown, at: Date): string {
  if (err instanceof BillingError) return err.message;
  return `internal error at ${at.toISOString()}; the server log has the cause`;
}

/** A subscription's finalized usage windows as the invoice store reads them (InvoiceStore.windows). */
type WindowsOf = Awaited<ReturnType<BillingStores["invoices"]["windows"]>>;

/** What the engine reports of failures no caller sees: the scheduler's work. */
export interface EngineEvents {
  /** A subscription was set aside because its cycle close failed. */
  setAside?(s: Subscription, failure: BillingFailure, err: unknown): void;
  /** Charging or marking a committed invoice failed: it stays open. */
  settleFailed?(invoiceId: string, err: unknown): void;
  /** Finalizing a draft (or billing an ended subscription's late usage) failed: tried again on the next run. */
  finalizeFailed?(id: string, err: unknown): void;
  /** Resuming a paused subscription at its `resumes_at` failed unexpectedly: tried again on the next run. */
  resumeFailed?(subscriptionId: string, err: unknown): void;
}

/** A cycle close's outcome: how many cycles it closed and how many subscriptions it set aside. */
interface CloseOutcome {
  closed: number;
  setAside: number;
}

export function multiplierOf(s: Pick<Subscription, "rateMultipliers">, code: string): Decimal {
  const m = s.rateMultipliers[code];
  return m === undefined ? ONE : dec(m);
}

/** What the engine reads of the catalog: cards and metrics by ID, a catalog's rates (add-ons). */
export interface EngineCatalog {
  cards: Pick<RateCardStore, "get">;
  catalogs: Pick<RateCatalogStore, "ratesFor">;
  metrics: Pick<PricingMetricStore, "getMany">;
}

/** What the engine reads of usage: a metric's value for a subject over [from, to), grouped by dimensions. */
export type UsageMeter = Pick<SummaryService, "measure">;

export class BillingEngine {
  private readonly cards: EngineCatalog["cards"];
  readonly catalogs: EngineCatalog["catalogs"];
  private readonly metrics: EngineCatalog["metrics"];

  constructor(
    readonly stores: BillingStores,
    catalog: EngineCatalog,
    private readonly usage: UsageMeter,
    /** The payment provider of each environment mode (payments.ts): none for live, so far. */
    readonly payments: PaymentProviders,
    readonly now: () => Date,
    /** Told what went wrong where no caller can be (to log it). */
    readonly events: EngineEvents = {},
  ) {
    this.cards = catalog.cards;
    this.catalogs = catalog.catalogs;
    this.metrics = catalog.metrics;
  }

  // An environment's mode never changes (environments are created with it), so it is cached.
  private readonly modeCache = new Map<string, EnvironmentMode>();

  /**
   * The payment provider of an environment, by its mode: undefined for a live environment (no
   * real processor is configured), so nothing of a live environment is ever charged through the
   * test provider. An unknown environment has none either.
   */
  async providerFor(environmentId: string): Promise<PaymentProvider | undefined> {
    const mode = await this.modeOf(environmentId);
    return mode === undefined ? undefined : this.payments.forMode(mode);
  }

  /** An environment's mode (cached), or undefined when there is no such environment. */
  async modeOf(environmentId: string): Promise<EnvironmentMode | undefined> {
    let mode = this.modeCache.get(environmentId);
    if (mode === undefined) {
      mode = await this.stores.directory.environmentMode(environmentId);
      if (mode === undefined) return undefined;
      if (this.modeCache.size > 10_000) this.modeCache.clear();
      this.modeCache.set(environmentId, mode);
    }
    return mode;
  }

  // Rate cards and pricing metrics never change once created, so they are cached for ever.
  private readonly cardCache = new Map<string, RateCard>();
  private readonly metricCache = new Map<string, PricingMetric>();

  async card(environmentId: string, id: string): Promise<RateCard> {
    const key = `${environmentId}/${id}`;
    const hit = this.cardCache.get(key);
    if (hit) return hit;
    const card = await this.cards.get(environmentId, id);
    if (!card) throw new Error(`rate card ${id} vanished`);
    if (this.cardCache.size > 10_000) this.cardCache.clear();
    this.cardCache.set(key, card);
    return card;
  }

  private async metricsOf(environmentId: string, ids: string[]): Promise<Map<string, PricingMetric>> {
    const missing = ids.filter((id) => !this.metricCache.has(`${environmentId}/${id}`));
    if (missing.length > 0) {
      if (this.metricCache.size > 10_000) this.metricCache.clear();
      for (const m of await this.metrics.getMany(environmentId, missing)) this.metricCache.set(`${environmentId}/${m.id}`, m);
    }
    return new Map(ids.map((id) => [id, this.metricCache.get(`${environmentId}/${id}`) as PricingMetric]));
  }

  /** The card's rates a subscription is charged for, catalog add-ons included. */
  async rates(card: RateCard, quantities: Record<string, string>) {
    const catalogRates = card.rateCatalogId ? await this.catalogs.ratesFor(card.environmentId, card.rateCatalogId, card.billingInterval) : [];
    return chargedRates(card, catalogRates, quantities);
  }

  /** Fixed charges of one cycle, in advance. */
  async fixedLines(card: RateCard, s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">): Promise<BillLine[]> {
    return this.fixedLinesOf((await this.rates(card, s.fixedRateQuantities)).fixed, s);
  }

  /** Fixed charges of one cycle from rates already looked up (see rates). */
  fixedLinesOf(fixed: ChargedRates["fixed"], s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">): BillLine[] {
    return fixedBillLines(fixed.flatMap((r) => fixedLine(r.name, r.price, dec(s.fixedRateQuantities[r.code] ?? "0"), multiplierOf(s, r.code))));
  }

  /** Usage of [from, to) priced by the card's usage-based rates, in arrears. */
  async usageLines(card: RateCard, s: Pick<Subscription, "subjectId" | "fixedRateQuantities" | "rateMultipliers">, from: Date, to: Date): Promise<BillLine[]> {
    return this.usageLinesOf(card, (await this.rates(card, s.fixedRateQuantities)).usage, s, from, to);
  }

  private async usageLinesOf(card: RateCard, usage: ChargedRates["usage"], s: Pick<Subscription, "subjectId" | "rateMultipliers">, from: Date, to: Date): Promise<BillLine[]> {
    const metrics = await this.metricsOf(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))]);
    const out: BillLine[] = [];
    const keyed = (code: string, lines: Line[]): BillLine[] => lines.map((l) => ({ ...l, kind: "usage", key: `${code}|${l.cell ?? ""}`, windowInvoiceId: null }));
    for (const rate of usage) {
      const metric = metrics.get(rate.pricingMetricId) as PricingMetric;
      const included = dec(rate.includedUnits);
      const m = multiplierOf(s, rate.code);
      if (rate.type === "simple") {
        const [measured] = await this.usage.measure(metric, s.subjectId, from, to, []);
        out.push(...keyed(rate.code, simpleUsageLine(rate.name, rate.price, measured?.value ?? ZERO, included, m)));
      } else {
        const keys = rate.dimensions.map((d) => d.key);
        const measured = await this.usage.measure(metric, s.subjectId, from, to, keys);
        out.push(
          ...keyed(
            rate.code,
            dimensionalLines(
              rate.name,
              rate.cells,
              measured.map((x) => ({ coordinates: x.coordinates, used: x.value })),
              included,
              m,
              coordinatesKey,
            ),
          ),
        );
      }
    }
    return out;
  }

  /** Used units per usage-based rate for [from, to) (dimensional: the total over every cell). */
  async usedUnits(card: RateCard, s: Subscription, from: Date, to: Date) {
    const { usage } = await this.rates(card, s.fixedRateQuantities);
    const metrics = await this.metricsOf(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))]);
    const out: { rate: (typeof usage)[number]; used: Decimal }[] = [];
    for (const rate of usage) {
      const measured = await this.usage.measure(metrics.get(rate.pricingMetricId) as PricingMetric, s.subjectId, from, to, []);
      out.push({ rate, used: measured[0]?.value ?? ZERO });
    }
    return out;
  }

  /**
   * The invoice of `lines`. Every amount must fit the stored sums (DESIGN §6): a line beyond
   * 53 integer digits is refused here, before anything is written.
   */
  newInvoice(s: Subscription, card: RateCard, periodKey: string, lines: BillLine[], periodStart: Date, periodEnd: Date, at: Date, terms: InvoiceTerms = {}): Invoice {
    for (const l of lines) {
      for (const [what, d] of [
        ["quantity", l.quantity],
        ["unit amount", l.unitAmount],
        ["amount", l.amount],
      ] as const) {
        const problem = amountProblem(d);
        if (problem) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the ${what} of invoice line "${l.description}" ${problem}`);
      }
    }
    const sum = total(lines);
    const problem = amountProblem(sum);
    if (problem) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the invoice total ${problem}`);
    return {
      id: newId("inv"),
      environmentId: s.environmentId,
      subjectId: s.subjectId,
      subscriptionId: s.id,
      periodKey,
      status: terms.finalizesAt ? "draft" : "open",
      currency: card.currency ?? "USD",
      total: formatDecimal(sum),
      lines: lines.map(storedLine),
      hostedToken: randomBase62(32),
      periodStart,
      periodEnd,
      createdAt: at,
      window: terms.window ?? null,
      finalizesAt: terms.finalizesAt ?? null,
      clockId: s.testClockId,
      finalizedAt: terms.finalizesAt ? null : this.now(),
    };
  }

  private readonly graceCache = new Map<string, { seconds: number; until: number }>();

  /** An environment's draft grace period in seconds (cached a few seconds). */
  async graceSeconds(environmentId: string): Promise<number> {
    const hit = this.graceCache.get(environmentId);
    if (hit && hit.until > Date.now()) return hit.seconds;
    const seconds = await this.stores.directory.invoiceGraceSeconds(environmentId);
    if (this.graceCache.size > 10_000) this.graceCache.clear();
    this.graceCache.set(environmentId, { seconds, until: Date.now() + GRACE_CACHE_MS });
    return seconds;
  }

  /**
   * The terms of an invoice that bills the usage of [from, to) of `s` (priced by `s`'s card and
   * terms), written at `at` on the subscription's clock: a draft until the environment's grace
   * period has passed, or final at once when it is 0. None for a card without usage-based rates.
   */
  async windowTerms(s: Subscription, from: Date, to: Date, at: Date): Promise<InvoiceTerms> {
    // A card without usage-based rates, or an empty window, bills no usage: nothing can come late.
    if (to.getTime() <= from.getTime()) return {};
    const card = await this.card(s.environmentId, s.rateCardId);
    if ((await this.rates(card, s.fixedRateQuantities)).usage.length === 0) return {};
    const grace = await this.graceSeconds(s.environmentId);
    return {
      window: { from, to, rateCardId: s.rateCardId, fixedRateQuantities: s.fixedRateQuantities, rateMultipliers: s.rateMultipliers },
      finalizesAt: grace > 0 ? new Date(at.getTime() + grace * 1000) : null,
    };
  }

  /** A window's usage lines as they are now, from the committed usage. */
  private async windowLines(environmentId: string, subjectId: string, w: UsageWindow): Promise<BillLine[]> {
    const card = await this.card(environmentId, w.rateCardId);
    return this.usageLines(card, { subjectId, fixedRateQuantities: w.fixedRateQuantities, rateMultipliers: w.rateMultipliers }, w.from, w.to);
  }

  /**
   * A draft as it would finalize now: its usage lines recomputed from the committed usage of its
   * window (late events of the period land on it), the other lines as written. Anything else is
   * returned as stored.
   */
  async preview(inv: Invoice): Promise<Invoice> {
    if (inv.status !== "draft" || !inv.window) return inv;
    const usage = await this.windowLines(inv.environmentId, inv.subjectId, inv.window);
    const lines = [...inv.lines.filter((l) => l.kind === "fixed" || l.kind === "charge"), ...usage.map(storedLine), ...inv.lines.filter((l) => l.kind === "adjustment")];
    for (const l of lines) {
      const problem = amountProblem(dec(l.amount));
      if (problem) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the amount of invoice line "${l.description}" ${problem}`);
    }
    const sum = lines.reduce((acc, l) => acc.plus(dec(l.amount)), ZERO);
    const problem = amountProblem(sum);
    if (problem) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the invoice total ${problem}`);
    return { ...inv, lines, total: formatDecimal(sum) };
  }

  /**
   * Finalizes a draft: its usage lines recomputed one last time, then open, then charged. Once:
   * only the run that moves it out of draft writes it (another runner, or an operator's call,
   * finds it finalized). Returns the invoice as it ended up, or undefined when it was no longer a draft.
   */
  async finalizeDraft(draft: Invoice): Promise<Invoice | undefined> {
    const at = this.now();
    const final: Invoice = { ...(await this.preview(draft)), status: "open", finalizedAt: at };
    const done = await this.stores.transaction(async (tx) => {
      const moved = await tx.finalizeDraft(final, at);
      if (moved) await tx.emit([invoiceEvent("invoice.finalized", final)]);
      return moved;
    });
    if (!done) return undefined;
    await this.settleMany([final]);
    return final;
  }

  /** Finalizes every draft whose grace period ended by `now` (on real time or one test clock); returns how many. */
  async finalizeDue(now: Date, clockId: string | null, breathe: Yielder = yielder()): Promise<number> {
    let n = 0;
    const failed = new Set<string>();
    for (;;) {
      await breathe();
      const due = (await this.stores.invoices.dueDrafts(now, clockId, 100)).filter((i) => !failed.has(i.id));
      if (due.length === 0) return n;
      for (const inv of due) {
        try {
          if (await this.finalizeDraft(inv)) n++;
        } catch (err) {
          // It stays a draft and is tried again on the next run; the others go on.
          failed.add(inv.id);
          this.events.finalizeFailed?.(inv.id, err);
        }
      }
    }
  }

  /**
   * Late usage of a subscription's finalized windows: for each window whose usage changed since
   * it was billed, an adjustment line per rate (and cell) for the difference between what its
   * usage costs now and what was billed for it (its usage lines and earlier adjustments); and the
   * reconciliation state to keep. Cheap when nothing changed: per pricing metric, a count of the
   * subject's events over the span of the windows (events are append-only, so an equal count
   * means no late event). Counts are read before any usage is measured, so an event committed
   * meanwhile is at worst checked again next time, never missed. `read`: the subscription's
   * windows when the caller has read them already (a cycle close reads its batch's at once).
   */
  async lateUsage(s: Subscription, read?: WindowsOf): Promise<{ lines: BillLine[]; check: UsageCheck | null }> {
    const windows = read ?? (await this.stores.invoices.windows(s.id));
    if (windows.length === 0) return { lines: [], check: s.usageCheck };
    const cards = new Map<string, RateCard>();
    const metricIdsOf = new Map<string, string[]>();
    for (const { invoice } of windows) {
      const w = invoice.window as UsageWindow;
      const card = cards.get(w.rateCardId) ?? (await this.card(s.environmentId, w.rateCardId));
      cards.set(card.id, card);
      metricIdsOf.set(invoice.id, [...new Set((await this.rates(card, w.fixedRateQuantities)).usage.map((r) => r.pricingMetricId))]);
    }
    const allMetrics = [...new Set([...metricIdsOf.values()].flat())];
    const metrics = await this.metricsOf(s.environmentId, allMetrics);
    const count = async (metricId: string, from: Date, to: Date): Promise<string> => {
      const m = metrics.get(metricId) as PricingMetric;
      const [c] = await this.usage.measure({ ...m, aggregation: { type: "count", valueField: null } }, s.subjectId, from, to, []);
      return formatDecimal(c?.value ?? ZERO);
    };
    const from = new Date(Math.min(...windows.map((w) => (w.invoice.window as UsageWindow).from.getTime())));
    const to = new Date(Math.max(...windows.map((w) => (w.invoice.window as UsageWindow).to.getTime())));
    const prev = s.usageCheck;
    const recheck = new Set<string>();
    const known = new Set(prev?.windows ?? []);
    for (const { invoice } of windows) if (!known.has(invoice.id)) recheck.add(invoice.id);
    if (prev?.from && prev.to) {
      for (const metricId of allMetrics) {
        const before = prev.counts[metricId];
        if (before === undefined || (await count(metricId, new Date(prev.from), new Date(prev.to))) !== before) {
          for (const { invoice } of windows) if ((metricIdsOf.get(invoice.id) ?? []).includes(metricId)) recheck.add(invoice.id);
        }
      }
    }
    const counts: Record<string, string> = {};
    for (const metricId of allMetrics) counts[metricId] = await count(metricId, from, to);
    const check: UsageCheck = { windows: windows.map((w) => w.invoice.id), from: from.toISOString(), to: to.toISOString(), counts };
    const lines: BillLine[] = [];
    for (const { invoice, billed } of windows) {
      if (!recheck.has(invoice.id)) continue;
      const w = invoice.window as UsageWindow;
      const now = await this.windowLines(s.environmentId, s.subjectId, w);
      const was = new Map<string, { quantity: Decimal; amount: Decimal; unitAmount: Decimal; description: string }>();
      for (const l of billed) {
        const k = l.key ?? l.description;
        const p = was.get(k);
        was.set(k, {
          quantity: (p?.quantity ?? ZERO).plus(dec(l.quantity)),
          amount: (p?.amount ?? ZERO).plus(dec(l.amount)),
          unitAmount: dec(l.unitAmount),
          description: p?.description ?? l.description,
        });
      }
      const keys = new Set([...was.keys(), ...now.map((l) => l.key ?? l.description)]);
      for (const k of keys) {
        const n = now.find((l) => (l.key ?? l.description) === k);
        const b = was.get(k);
        const dq = (n?.quantity ?? ZERO).minus(b?.quantity ?? ZERO);
        const da = (n?.amount ?? ZERO).minus(b?.amount ?? ZERO);
        if (dq.isZero() && da.isZero()) continue;
        const what = n?.description ?? b?.description ?? k;
        lines.push({
          description: `Late usage adjustment: ${what.replace(/^Late usage adjustment: /, "").replace(/ \(period [^)]*\)$/, "")} (period ${day(w.from)} to ${day(w.to)})`,
          quantity: dq,
          unitAmount: n?.unitAmount ?? b?.unitAmount ?? ZERO,
          amount: da,
          kind: "adjustment",
          key: k,
          windowInvoiceId: invoice.id,
        });
      }
    }
    return { lines, check };
  }

  /**
   * Bills the late usage of ended (cancelled) subscriptions on real time (clockId null) or one test
   * clock: a final adjustment invoice per subscription that has some, finalized at once. On real
   * time each subscription is looked at again after ENDED_RECHECK_MS, at most ENDED_PER_RUN of them
   * a run (least recently checked first), so that a large backlog never delays cycle closes; on a
   * test clock all of them, every run. Returns how many adjustment invoices it wrote.
   */
  async billEndedLateUsage(clockId: string | null, breathe: Yielder = yielder()): Promise<number> {
    let n = 0;
    const seen = new Set<string>();
    for (;;) {
      if (clockId === null && seen.size >= ENDED_PER_RUN) return n;
      await breathe();
      const realNow = new Date();
      const batch = (await this.stores.subscriptions.ended(clockId, 100, clockId === null ? new Date(realNow.getTime() - ENDED_RECHECK_MS) : null)).filter((s) => !seen.has(s.id));
      if (batch.length === 0) return n;
      for (const s of batch) {
        seen.add(s.id);
        try {
          if (await this.billLateUsageOf(s)) n++;
        } catch (err) {
          this.events.finalizeFailed?.(s.id, err);
        }
      }
      await this.stores.subscriptions.markChecked(
        batch.map((s) => s.id),
        realNow,
      );
    }
  }

  /** One ended subscription's late usage, as a final adjustment invoice; false when it had none (or another runner billed it). */
  private async billLateUsageOf(s: Subscription): Promise<boolean> {
    const { lines, check } = await this.lateUsage(s);
    if (lines.length === 0 && sameCheck(check, s.usageCheck)) return false;
    const card = await this.card(s.environmentId, s.rateCardId);
    const at = s.testClockId ? ((await this.stores.clocks.get(s.environmentId, s.testClockId))?.frozenTime ?? this.now()) : this.now();
    const invoice = lines.length > 0 ? this.newInvoice(s, card, `adjustment:${at.getTime()}:${randomBase62(8)}`, lines, s.cancelledAt ?? at, s.cancelledAt ?? at, at) : undefined;
    const wrote = await this.stores.transaction(async (tx) => {
      const locked = await tx.lockSubscription(s.environmentId, s.id);
      if (locked?.status !== "cancelled" || !sameCheck(locked.usageCheck, s.usageCheck)) return false;
      if (invoice) {
        await tx.insertInvoice(invoice);
        await tx.emit(newInvoiceEvents(invoice));
      }
      await tx.updateSubscription({ ...locked, usageCheck: check });
      return invoice !== undefined;
    });
    if (wrote && invoice) await this.settleMany([invoice]);
    return wrote;
  }

  /**
   * Writes an invoice in the transaction unless it has no lines and no usage window; false when the subscription
   * already has one for that period (a repeated or concurrent run), which the caller must treat
   * as "done by someone else".
   */
  async writeInvoice(tx: BillingTx, invoice: Invoice): Promise<boolean> {
    // An invoice of a usage window is written even without lines (usage within the included
    // units, or none): late usage of that window can still land on it or be adjusted later.
    if (invoice.lines.length === 0 && !invoice.window) return true;
    try {
      await tx.insertInvoice(invoice);
      await tx.emit(newInvoiceEvents(invoice));
      return true;
    } catch (err) {
      if (err instanceof AlreadyExistsError) return false;
      throw err;
    }
  }

  /**
   * Settles one invoice just written, charging `paymentMethodId` (the subject's, or the one its
   * checkout saved); see settleWith.
   */
  async settle(invoice: Invoice, paymentMethodId: string | null): Promise<void> {
    if ((invoice.lines.length === 0 && !invoice.window) || invoice.status !== "open") return;
    await this.settleWith([invoice], async () => {
      const pm = paymentMethodId ? await this.stores.paymentMethods.get(paymentMethodId) : undefined;
      return () => pm;
    });
  }

  /**
   * Open invoices become paid, each with its `invoice.paid` event in the same transaction (only
   * those still open: another runner or a void got there first otherwise). A transaction that
   * loses a deadlock to a cycle close is run again (retryingRaces): the card was charged, and
   * the invoice must say so.
   */
  private async markPaid(list: Invoice[], at: Date): Promise<void> {
    if (list.length === 0) return;
    await retryingRaces(() =>
      this.stores.transaction(async (tx) => {
        const moved = new Set(
          await tx.moveInvoices(
            list.map((i) => i.id),
            "open",
            "paid",
            at,
          ),
        );
        await tx.emit(list.filter((i) => moved.has(i.id)).map((i) => invoiceEvent("invoice.paid", { ...i, status: "paid" })));
      }),
    );
  }

  /** A declined charge: the invoice stays open; `invoice.payment_failed` says so (written again if its transaction loses a deadlock). */
  private async paymentFailed(list: Invoice[]): Promise<void> {
    if (list.length === 0) return;
    await retryingRaces(() => this.stores.transaction((tx) => tx.emit(list.map((i) => invoiceEvent("invoice.payment_failed", i)))));
  }

  /**
   * The invoice that closes a subscription's current cycle, computed from committed usage: the
   * next period's fixed charges, the usage of the period that ended (a draft for the grace
   * period), and adjustments for late usage of earlier, finalized periods; with the
   * reconciliation state to keep.
   */
  private async closingInvoice(s: Subscription, windows?: WindowsOf): Promise<{ invoice: Invoice; check: UsageCheck | null }> {
    const late = await this.lateUsage(s, windows);
    const card = await this.card(s.environmentId, s.rateCardId);
    const rates = await this.rates(card, s.fixedRateQuantities);
    const usageLines = await this.usageLinesOf(card, rates.usage, s, s.usageSince, s.periodEnd);
    const next = cycleBounds(s.anchor, s.cycleIndex + 1, card.billingInterval);
    const fixed = s.cancelsAtEndOfCycle ? [] : this.fixedLinesOf(rates.fixed, s);
    const terms = await this.windowTerms(s, s.usageSince, s.periodEnd, s.periodEnd);
    const invoice = this.newInvoice(s, card, cycleKey(s, s.cycleIndex + 1), [...fixed, ...usageLines, ...late.lines], s.periodEnd, s.cancelsAtEndOfCycle ? s.periodEnd : next.end, s.periodEnd, terms);
    return { invoice, check: late.check };
  }

  /** The subscription after its cycle closed: the next cycle, or cancelled. */
  private async afterClose(s: Subscription, check: UsageCheck | null): Promise<Subscription> {
    if (s.cancelsAtEndOfCycle) return { ...s, status: "cancelled", cancelledAt: s.periodEnd, billingFailure: null, usageCheck: check };
    const card = await this.card(s.environmentId, s.rateCardId);
    const next = cycleBounds(s.anchor, s.cycleIndex + 1, card.billingInterval);
    return { ...s, cycleIndex: s.cycleIndex + 1, periodStart: next.start, periodEnd: next.end, usageSince: next.start, billingFailure: null, usageCheck: check };
  }

  /**
   * Closes the current cycle of due subscriptions: for each, usage of the period that ended
   * plus, unless it cancels now, the fixed charges of the period that starts. All of a batch is
   * written in one transaction that locks the subscription rows and re-checks each one (a row
   * another runner holds is skipped; a row that moved on is left alone), and the invoice's
   * (subscription, period) key is unique — so repeated or concurrent runs cannot bill twice.
   * A subscription whose close fails for any reason is set aside (see setAside) and the others
   * go on. Returns how many cycles it closed.
   */
  async closeCycles(snapshots: Subscription[], concurrency = 8): Promise<number> {
    return (await this.closeBatch(snapshots, concurrency)).closed;
  }

  private async closeBatch(snapshots: Subscription[], concurrency: number, breathe: Yielder = yielder()): Promise<CloseOutcome> {
    const invoices = new Map<string, Invoice>();
    const checks = new Map<string, UsageCheck | null>();
    const computed: Subscription[] = [];
    let setAside = 0;
    let next = 0;
    // The batch's finalized usage windows in one read (each subscription's late-usage check needs its own).
    const windows = await this.stores.invoices.windowsOf(snapshots.map((s) => s.id));
    await Promise.all(
      Array.from({ length: Math.min(concurrency, snapshots.length) }, async () => {
        while (next < snapshots.length) {
          const s = snapshots[next++] as Subscription;
          await breathe(); // between reads, outside any transaction
          try {
            const { invoice, check } = await this.closingInvoice(s, windows.get(s.id) ?? []);
            invoices.set(s.id, invoice);
            checks.set(s.id, check);
            computed.push(s);
          } catch (err) {
            await this.setAside(s, err);
            setAside++;
          }
        }
      }),
    );
    if (computed.length === 0) return { closed: 0, setAside };
    const byId = new Map(computed.map((s) => [s.id, s]));
    let written: Invoice[] = [];
    let closed = 0;
    try {
      [written, closed] = await this.stores.transaction(async (tx) => {
        const locked = await tx.lockSubscriptions(computed.map((s) => s.id));
        const ready = locked.filter((s) => {
          const snap = byId.get(s.id) as Subscription;
          // Everything the invoice was computed from must be unchanged, including a cancellation
          // at the end of the cycle requested meanwhile (it drops the next period's fixed charges).
          return (
            s.status === "active" &&
            s.cycleIndex === snap.cycleIndex &&
            s.rateCardId === snap.rateCardId &&
            s.usageSince.getTime() === snap.usageSince.getTime() &&
            s.cancelsAtEndOfCycle === snap.cancelsAtEndOfCycle &&
            sameCheck(s.usageCheck, snap.usageCheck)
          );
        });
        const out = ready.map((s) => invoices.get(s.id) as Invoice).filter((i) => i.lines.length > 0 || i.window !== null);
        await tx.insertInvoices(out);
        const events = out.flatMap(newInvoiceEvents);
        const updated: Subscription[] = [];
        for (const s of ready) {
          const after = await this.afterClose(s, checks.get(s.id) ?? null);
          updated.push(after);
          if (after.status === "cancelled") events.push(subscriptionEvent("subscription.cancelled", after));
        }
        await tx.updateSubscriptions(updated);
        await tx.emit(events);
        return [out, ready.length] as const;
      });
    } catch (err) {
      if (computed.length === 1) {
        // Billed meanwhile by another runner: done by someone else. A deadlock or lock timeout
        // (AbortedError from the store) is not the subscription's fault: the next run retries it.
        if (err instanceof AlreadyExistsError || err instanceof AbortedError) return { closed: 0, setAside };
        await this.setAside(computed[0] as Subscription, err);
        return { closed: 0, setAside: setAside + 1 };
      }
      // One subscription's write failed (billed meanwhile, or a value the database refused):
      // close them one at a time, so that only that one is set aside.
      const outcome = { closed: 0, setAside };
      for (const s of computed) {
        const one = await this.closeBatch([s], 1);
        outcome.closed += one.closed;
        outcome.setAside += one.setAside;
      }
      return outcome;
    }
    await this.settleMany(written.filter((i) => i.status === "open"));
    return { closed, setAside };
  }

  /**
   * Sets a subscription whose cycle close failed aside: the error is kept on its row (and shown
   * on the subscription as `billing_failure`), the scheduler skips it until a backoff has passed
   * (real time), and nothing else waits for it. If even that cannot be written, the database is
   * the problem and the original error stops the run.
   */
  private async setAside(s: Subscription, err: unknown): Promise<void> {
    const attempts = (s.billingFailure?.attempts ?? 0) + 1;
    const at = this.now();
    const failure: BillingFailure = { message: failureMessage(err, at), attempts, failedAt: at, retryAt: new Date(at.getTime() + retryDelayMs(attempts)) };
    let recorded: boolean;
    try {
      recorded = await this.stores.subscriptions.setBillingFailure(s, failure);
    } catch {
      throw err;
    }
    // Not recorded: the row moved on meanwhile (another runner closed that cycle).
    if (recorded) this.events.setAside?.(s, failure, err);
  }

  /** Settles invoices just written (a cycle close's, a finalized draft...), each charged to its subject's saved method; see settleWith. */
  async settleMany(list: Invoice[]): Promise<void> {
    if (list.length === 0) return;
    await this.settleWith(list, async (due) => {
      const methods = await this.stores.paymentMethods.ofSubjects([...new Set(due.map((i) => i.subjectId))]);
      return (i) => methods.get(i.subjectId);
    });
  }

  /**
   * Settles invoices: zero totals paid at once, the rest charged to the method `methodsOf` finds
   * for each (none: it stays open until paid another way) through its environment's provider (a
   * live environment has none: never the test provider). Settling comes after the change that
   * wrote the invoices committed, so it never fails its caller: a read, a charge or a write that
   * fails leaves its invoices open (settleFailed says why), the change stands and its call succeeds.
   */
  private async settleWith(list: Invoice[], methodsOf: (due: Invoice[]) => Promise<(i: Invoice) => PaymentMethod | undefined>): Promise<void> {
    const at = this.now();
    const due = list.filter((i) => dec(i.total).gt(0));
    const paid = list.filter((i) => dec(i.total).lte(0));
    const declined: Invoice[] = [];
    let methodOf: (i: Invoice) => PaymentMethod | undefined = () => undefined;
    if (due.length > 0) {
      try {
        methodOf = await methodsOf(due);
      } catch (err) {
        for (const i of due) this.events.settleFailed?.(i.id, err);
      }
    }
    for (const i of due) {
      const pm = methodOf(i);
      try {
        const provider = pm ? await this.providerFor(i.environmentId) : undefined;
        if (!pm || !provider) continue;
        if ((await provider.charge(pm, i.total, i.currency, chargeKey(i.id, 1))).ok) paid.push(i);
        else declined.push(i);
      } catch (err) {
        // The invoice is written: it stays open, and the other invoices are settled.
        this.events.settleFailed?.(i.id, err);
      }
    }
    try {
      await this.markPaid(paid, at);
    } catch (err) {
      for (const i of paid) this.events.settleFailed?.(i.id, err);
    }
    try {
      await this.paymentFailed(declined);
    } catch (err) {
      for (const i of declined) this.events.settleFailed?.(i.id, err);
    }
  }

  /**
   * Closes every cycle due by `now` — on real time (clockId null) or on one test clock —
   * including several cycles of one subscription when time jumped; returns how many it closed.
   * `onBatch` is told the count closed so far after each batch (progress of a long catch-up).
   */
  async closeDue(now: Date, clockId: string | null, concurrency = 8, strict = false, breathe: Yielder = yielder(), onBatch?: (closed: number) => void): Promise<number> {
    let closed = 0;
    for (;;) {
      await breathe();
      // Subscriptions set aside (their close failed) are not due again until their retry time.
      const due = await this.stores.subscriptions.due(now, clockId, 500, strict, this.now());
      if (due.length === 0) return closed;
      let progress = 0;
      for (let k = 0; k < due.length; k += 100) {
        const outcome = await this.closeBatch(due.slice(k, k + 100), concurrency, breathe);
        closed += outcome.closed;
        progress += outcome.closed + outcome.setAside;
        onBatch?.(closed);
      }
      if (progress === 0) return closed; // another runner holds them; it will finish them
    }
  }
}
