/**
 * Invoice building: the priced lines of a subscription (fixed charges in advance, usage in
 * arrears), the invoice of those lines (a draft during the grace period of a usage window, or
 * final at once), and writing a new invoice with its `invoice.created` event.
 */
import type { ChargedRates } from "../catalog/addons.js";
import { coordinatesKey } from "../catalog/rates.js";
import type { PricingMetric, RateCard } from "../catalog/types.js";
import { AlreadyExistsError, FailedPreconditionError } from "../errors.js";
import { newInvoiceEvents } from "../events/types.js";
import { newId, randomBase62 } from "../ids.js";
import { type Line, dimensionalLines, fixedLine, simpleUsageLine, total } from "../invoicing/lines.js";
import type { SummaryService } from "../metering/usage.js";
import { type Decimal, SCALE, ZERO, amountProblem, dec, formatDecimal } from "../money.js";
import type { BillingTx } from "./ports.js";
import type { BillingReads } from "./reads.js";
import type { Invoice, InvoiceLine, InvoiceLineKind, Subscription, UsageWindow } from "./types.js";

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

/** The (subscription, period) key of the invoice that opens cycle `n` (of the current epoch). */
export function cycleKey(s: Pick<Subscription, "cycleEpoch">, n: number): string {
  return s.cycleEpoch === 0 ? `cycle:${n}` : `cycle:${s.cycleEpoch}.${n}`;
}

/** A priced line as an invoice keeps it. */
export function storedLine(l: BillLine): InvoiceLine {
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

/** The multiplier of a rate on a subscription (1 when it sets none). */
export function multiplierOf(s: Pick<Subscription, "rateMultipliers">, code: string): Decimal {
  const m = s.rateMultipliers[code];
  return m === undefined ? ONE : dec(m);
}

/** What the engine reads of usage: a metric's value for a subject over [from, to), grouped by dimensions. */
export type UsageMeter = Pick<SummaryService, "measure">;

export class InvoiceBuilder {
  constructor(
    private readonly reads: BillingReads,
    private readonly usage: UsageMeter,
    private readonly now: () => Date,
  ) {}

  /** Fixed charges of one cycle, in advance. */
  async fixedLines(card: RateCard, s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">): Promise<BillLine[]> {
    return this.fixedLinesOf((await this.reads.rates(card, s.fixedRateQuantities)).fixed, s);
  }

  /** Fixed charges of one cycle from rates already looked up (see BillingReads.rates). */
  fixedLinesOf(fixed: ChargedRates["fixed"], s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">): BillLine[] {
    return fixedBillLines(fixed.flatMap((r) => fixedLine(r.name, r.price, dec(s.fixedRateQuantities[r.code] ?? "0"), multiplierOf(s, r.code))));
  }

  /** Usage of [from, to) priced by the card's usage-based rates, in arrears. */
  async usageLines(card: RateCard, s: Pick<Subscription, "subjectId" | "fixedRateQuantities" | "rateMultipliers">, from: Date, to: Date): Promise<BillLine[]> {
    return this.usageLinesOf(card, (await this.reads.rates(card, s.fixedRateQuantities)).usage, s, from, to);
  }

  /** Usage of [from, to) priced by rates already looked up (see BillingReads.rates). */
  async usageLinesOf(card: RateCard, usage: ChargedRates["usage"], s: Pick<Subscription, "subjectId" | "rateMultipliers">, from: Date, to: Date): Promise<BillLine[]> {
    const metrics = await this.reads.metricsOf(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))]);
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
    const { usage } = await this.reads.rates(card, s.fixedRateQuantities);
    const metrics = await this.reads.metricsOf(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))]);
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

  /**
   * The terms of an invoice that bills the usage of [from, to) of `s` (priced by `s`'s card and
   * terms), written at `at` on the subscription's clock: a draft until the environment's grace
   * period has passed, or final at once when it is 0. None for a card without usage-based rates.
   */
  async windowTerms(s: Subscription, from: Date, to: Date, at: Date): Promise<InvoiceTerms> {
    // A card without usage-based rates, or an empty window, bills no usage: nothing can come late.
    if (to.getTime() <= from.getTime()) return {};
    const card = await this.reads.card(s.environmentId, s.rateCardId);
    if ((await this.reads.rates(card, s.fixedRateQuantities)).usage.length === 0) return {};
    const grace = await this.reads.graceSeconds(s.environmentId);
    return {
      window: { from, to, rateCardId: s.rateCardId, fixedRateQuantities: s.fixedRateQuantities, rateMultipliers: s.rateMultipliers },
      finalizesAt: grace > 0 ? new Date(at.getTime() + grace * 1000) : null,
    };
  }

  /** A window's usage lines as they are now, from the committed usage. */
  async windowLines(environmentId: string, subjectId: string, w: UsageWindow): Promise<BillLine[]> {
    const card = await this.reads.card(environmentId, w.rateCardId);
    return this.usageLines(card, { subjectId, fixedRateQuantities: w.fixedRateQuantities, rateMultipliers: w.rateMultipliers }, w.from, w.to);
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
}
