/**
 * Late usage: events that arrive after a usage window was finalized are billed as adjustment
 * lines (on the next cycle's invoice, or on a final adjustment invoice of an ended subscription),
 * each the difference between what the window's usage costs now and what was billed for it; when
 * the window lies in a period that a minimum commitment trued up, a negative `commitment_true_up`
 * line beside them takes back the part of the period's true-up its late usage now covers
 * (commitments.ts), one per period whichever of its windows the late usage fell in.
 */
import type { PricingMetric, RateCard } from "../catalog/types.js";
import { newInvoiceEvents } from "../events/types.js";
import { randomBase62 } from "../ids.js";
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import { formatInstant } from "../time.js";
import { type Yielder, yielder } from "../yielding.js";
import type { EngineContext } from "./engine-context.js";
import type { BillLine, InvoiceBuilder, UsageMeter } from "./invoice-building.js";
import type { BillingStores } from "./ports.js";
import { finalizeOpen } from "./booking.js";
import { isOwnTrueUp, trueUpCorrection } from "./commitments.js";
import { comparedKey, readBackKey } from "./line-keys.js";
import type { BillingReads } from "./reads.js";
import type { Settlement } from "./settlement.js";
import type { Invoice, InvoiceLine, Subscription, UsageCheck, UsageWindow } from "./types.js";

/** An ended subscription's late usage is looked for again after this long (real time). */
export const ENDED_RECHECK_MS = 3_600_000;

/** How many ended subscriptions one real-time scheduler run looks at for late usage. */
const ENDED_PER_RUN = 200;

/** Whether two reconciliation states are the same (nothing was checked in between). */
export function sameCheck(a: UsageCheck | null, b: UsageCheck | null): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Whether an invoice is one that closes a billing period: a cycle close's (keyed as cycleKey), a cancellation's ("final") or a pause's. */
const closesPeriod = (i: Pick<Invoice, "periodKey">): boolean => i.periodKey === "final" || i.periodKey.startsWith("pause:") || i.periodKey.startsWith("cycle:");

/** A subscription's finalized usage windows as the invoice store reads them (InvoiceStore.windows). */
/**
 * The units a line adds to its key in a late-usage diff: a usage-terms adjustment of the window
 * (InvoiceBuilder.usageLinesOf: kind adjustment, its usage's key, no window invoice, quantity 1)
 * prices units already counted by the usage line, so it adds none.
 */
function unitsOf(l: { kind: string; quantity: Decimal | string; windowInvoiceId: string | null }): Decimal {
  return l.kind === "adjustment" && l.windowInvoiceId === null ? ZERO : typeof l.quantity === "string" ? dec(l.quantity) : l.quantity;
}

export type WindowsOf = Awaited<ReturnType<BillingStores["invoices"]["windows"]>>;

export class LateUsage {
  constructor(
    private readonly ctx: EngineContext,
    private readonly reads: BillingReads,
    private readonly builder: InvoiceBuilder,
    private readonly usage: UsageMeter,
    private readonly settlement: Settlement,
  ) {}

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
  async adjustments(s: Subscription, read?: WindowsOf): Promise<{ lines: BillLine[]; check: UsageCheck | null }> {
    const windows = read ?? (await this.ctx.stores.invoices.windows(s.id, s.environmentId));
    if (windows.length === 0) return { lines: [], check: s.usageCheck };
    const cards = new Map<string, RateCard>();
    const metricIdsOf = new Map<string, string[]>();
    for (const { invoice } of windows) {
      const w = invoice.window as UsageWindow;
      const card = cards.get(w.rateCardId) ?? (await this.reads.card(s.environmentId, w.rateCardId));
      cards.set(card.id, card);
      metricIdsOf.set(invoice.id, [...new Set((await this.reads.rates(card, w.fixedRateQuantities)).usage.map((r) => r.pricingMetricId))]);
    }
    const allMetrics = [...new Set([...metricIdsOf.values()].flat())];
    const metrics = await this.reads.metricsOf(s.environmentId, allMetrics);
    const count = async (metricId: string, from: Date, to: Date): Promise<string> => {
      const m = metrics.get(metricId) as PricingMetric;
      const [c] = await this.usage.measure({ ...m, aggregation: { type: "count", valueField: null } }, s.subjectId, from, to, []);
      return formatDecimal(c?.value ?? ZERO);
    };
    const from = new Date(Math.min(...windows.map((w) => (w.invoice.window as UsageWindow).from.getTime())));
    const to = new Date(Math.max(...windows.map((w) => (w.invoice.window as UsageWindow).to.getTime())));
    // The counts kept first, then those compared with the last run's: an event committed between
    // the two reads is seen by the comparison (its window measured now) or left out of the kept
    // counts (looked at again next run), never kept unmeasured.
    const counts: Record<string, string> = {};
    for (const metricId of allMetrics) counts[metricId] = await count(metricId, from, to);
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
    const check: UsageCheck = { windows: windows.map((w) => w.invoice.id), from: from.toISOString(), to: to.toISOString(), counts };
    const lines: BillLine[] = [];
    for (const { invoice, billed } of windows) {
      if (!recheck.has(invoice.id)) continue;
      const w = invoice.window as UsageWindow;
      const now = await this.builder.windowLines(s.environmentId, s.subjectId, w);
      const was = new Map<string, { quantity: Decimal; amount: Decimal; unitAmount: Decimal; description: string }>();
      // Recomputed lines are compared under their keys as stored (line-keys.ts), or as rows written before kept them.
      const billedKeys = new Set(billed.map((l) => (l.key === null ? null : readBackKey(l.key))));
      // The usage billed by key; not the period's commitment true-up or its corrections (below).
      for (const l of billed) {
        if (l.kind === "commitment_true_up") continue;
        const k = l.key === null ? l.description : readBackKey(l.key);
        const p = was.get(k);
        was.set(k, {
          quantity: (p?.quantity ?? ZERO).plus(unitsOf(l)),
          amount: (p?.amount ?? ZERO).plus(dec(l.amount)),
          unitAmount: dec(l.unitAmount),
          description: p?.description ?? l.description,
        });
      }
      // What the window costs now by key (a rate's usage-terms adjustment shares its usage's key, InvoiceBuilder.usageLinesOf).
      const nowByKey = new Map<string, BillLine>();
      for (const l of now) {
        const k = l.key === null ? l.description : comparedKey(l.key, billedKeys);
        const p = nowByKey.get(k);
        nowByKey.set(k, p ? { ...p, quantity: p.quantity.plus(unitsOf(l)), amount: p.amount.plus(l.amount) } : { ...l, quantity: unitsOf(l) });
      }
      const keys = new Set([...was.keys(), ...nowByKey.keys()]);
      for (const k of keys) {
        const n = nowByKey.get(k);
        const b = was.get(k);
        const dq = (n?.quantity ?? ZERO).minus(b?.quantity ?? ZERO);
        const da = (n?.amount ?? ZERO).minus(b?.amount ?? ZERO);
        if (dq.isZero() && da.isZero()) continue;
        const what = n?.description ?? b?.description ?? k;
        lines.push({
          description: `Late usage adjustment: ${what.replace(/^Late usage adjustment: /, "").replace(/ \(period [^)]*\)$/, "")} (period ${formatInstant(w.from)} to ${formatInstant(w.to)})`,
          quantity: dq,
          unitAmount: n?.unitAmount ?? b?.unitAmount ?? ZERO,
          amount: da,
          kind: "adjustment",
          key: k,
          windowInvoiceId: invoice.id,
        });
      }
    }
    // A period trued up at its close: its true-up takes back what late usage of its windows now covers (DESIGN §14, commitments.ts).
    lines.push(...(await this.corrections(s, windows, recheck, lines)));
    return { lines, check };
  }

  /**
   * This run's corrections of trued-up periods (trueUpCorrection): one per billing period with a
   * window looked at again (`recheck`) whose closing invoice (not void) carries its true-up, tied
   * to that invoice, over the adjustments of all the period's windows (not void) and this run's
   * (`late`). A window's period is the cycle it lies in (cycleStart, cycleEnd); a window stored
   * without it is a period of its own. Reads the closing invoice's lines only for such a period;
   * when no window of the period closed it (closedWithoutWindow), the invoices created during it.
   */
  private async corrections(s: Subscription, windows: WindowsOf, recheck: ReadonlySet<string>, late: readonly BillLine[]): Promise<BillLine[]> {
    const periods = new Map<string, WindowsOf>();
    for (const win of windows) {
      const w = win.invoice.window as UsageWindow;
      const key = w.cycleStart && w.cycleEnd ? `${new Date(w.cycleStart).toISOString()}|${new Date(w.cycleEnd).toISOString()}` : win.invoice.id;
      const period = periods.get(key);
      if (period) period.push(win);
      else periods.set(key, [win]);
    }
    const out: BillLine[] = [];
    for (const period of periods.values()) {
      if (!period.some((w) => recheck.has(w.invoice.id))) continue;
      const counted = period.filter((w) => w.invoice.status !== "void");
      const closing = counted.find((w) => w.billed.some((l) => isOwnTrueUp(l) && dec(l.amount).gt(0)));
      // A window's invoice that carries the true-up has the lines tied to it in its billed; an invoice without a window, in `tied`.
      const found = closing ? { invoice: await this.ctx.stores.invoices.get(s.environmentId, closing.invoice.id), tied: [] } : await this.closedWithoutWindow(s, period);
      const full = found?.invoice;
      if (!full || full.status === "void" || full.status === "draft") continue;
      const w = period[0]?.invoice.window as UsageWindow;
      const bounds = { from: w.cycleStart ? new Date(w.cycleStart) : w.from, to: full.window?.to ?? full.createdAt };
      const correction = trueUpCorrection(bounds, full, [...counted.map((c) => ({ id: c.invoice.id, billed: c.billed })), ...(closing ? [] : [{ id: full.id, billed: found?.tied ?? [] }])], late);
      if (correction) out.push(correction);
    }
    return out;
  }

  /**
   * The invoice that closed `period` (the cycle its windows lie in) when none of its windows did,
   * with the lines tied to it: a close on a card without usage rates bills no window
   * (InvoiceBuilder.windowTerms) but may carry the period's true-up. The close is the first
   * invoice created in (cycleStart, cycleEnd] that a cycle close, a cancellation or a pause wrote
   * (a resume's opening invoice, or a cancellation's after a resume, comes after the pause that
   * closed the period). None for a window stored without its cycle (its own period, closed by it),
   * or when a window's invoice closed the period (its true-up, if any, is among the windows).
   */
  private async closedWithoutWindow(s: Subscription, period: WindowsOf): Promise<{ invoice: Invoice; tied: InvoiceLine[] } | undefined> {
    const w = period[0]?.invoice.window as UsageWindow | undefined;
    if (!w?.cycleStart || !w.cycleEnd || period.some((p) => closesPeriod(p.invoice))) return undefined;
    const created = await this.ctx.stores.invoices.createdWithin(s.id, s.environmentId, new Date(w.cycleStart), new Date(w.cycleEnd));
    const close = created.find((c) => closesPeriod(c.invoice));
    return close?.invoice.lines.some(isOwnTrueUp) ? close : undefined;
  }

  /**
   * Bills the late usage of ended (cancelled) subscriptions on real time (clockId null) or one test
   * clock: a final adjustment invoice per subscription that has some, finalized at once. On real
   * time each subscription is looked at again after ENDED_RECHECK_MS, at most ENDED_PER_RUN of them
   * a run (least recently checked first), so that a large backlog never delays cycle closes; on a
   * test clock all of them, every run. Returns how many adjustment invoices it wrote.
   */
  async billEnded(clockId: string | null, breathe: Yielder = yielder()): Promise<number> {
    let n = 0;
    const seen = new Set<string>();
    for (;;) {
      if (clockId === null && seen.size >= ENDED_PER_RUN) return n;
      await breathe();
      const realNow = new Date();
      const batch = (await this.ctx.stores.subscriptions.ended(clockId, 100, clockId === null ? new Date(realNow.getTime() - ENDED_RECHECK_MS) : null)).filter((s) => !seen.has(s.id));
      if (batch.length === 0) return n;
      for (const s of batch) {
        seen.add(s.id);
        try {
          if (await this.billLateUsageOf(s)) n++;
        } catch (err) {
          this.ctx.events.finalizeFailed?.(s.id, err);
        }
      }
      await this.ctx.stores.subscriptions.markChecked(
        batch.map((s) => s.id),
        realNow,
      );
    }
  }

  /** One ended subscription's late usage, as a final adjustment invoice; false when it had none (or another runner billed it). */
  private async billLateUsageOf(s: Subscription): Promise<boolean> {
    const { lines, check } = await this.adjustments(s);
    if (lines.length === 0 && sameCheck(check, s.usageCheck)) return false;
    const card = await this.reads.card(s.environmentId, s.rateCardId);
    const at = s.testClockId ? ((await this.ctx.stores.clocks.get(s.environmentId, s.testClockId))?.frozenTime ?? this.ctx.now()) : this.ctx.now();
    const invoice = lines.length > 0 ? this.builder.newInvoice(s, card, `adjustment:${at.getTime()}:${randomBase62(8)}`, lines, s.cancelledAt ?? at, s.cancelledAt ?? at, at) : undefined;
    const written = await this.ctx.stores.transaction(async (tx) => {
      const locked = await tx.lockSubscription(s.environmentId, s.id);
      if (locked?.status !== "cancelled" || !sameCheck(locked.usageCheck, s.usageCheck)) return null;
      // The subject's credit pays an adjustment invoice like any other (DESIGN §14).
      const applied = invoice ? await finalizeOpen(tx, invoice, invoice.createdAt, this.ctx.now) : undefined;
      if (applied) {
        await tx.insertInvoice(applied);
        await tx.emit(newInvoiceEvents(applied));
      }
      await tx.updateSubscription({ ...locked, usageCheck: check });
      return applied ?? null;
    });
    if (written) await this.settlement.settleMany([written]);
    return written !== null;
  }
}
