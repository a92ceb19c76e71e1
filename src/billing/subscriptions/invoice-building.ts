/**
 * Invoice building: the priced lines of a subscription (fixed charges in advance, usage in
 * arrears), the invoice of those lines (a draft during the grace period of a usage window, or
 * final at once), and writing a new invoice with its `invoice.created` event.
 */
import type { ChargedRates } from "../catalog/addons.js";
import { chargeAddsUp, coordinatesKey } from "../catalog/rates.js";
import type { PricingMetric, RateCard } from "../catalog/types.js";
import { AlreadyExistsError, FailedPreconditionError } from "../errors.js";
import { newInvoiceEvents } from "../events/types.js";
import { newId, randomBase62 } from "../ids.js";
import { type Cycle, assumedCycle, limitLine, windowShare } from "../invoicing/limits.js";
import { type Line, dimensionalLines, dimensionalUsed, fixedLine, simpleUsageLine, total } from "../invoicing/lines.js";
import type { SummaryService } from "../metering/usage.js";
import { type Decimal, SCALE, ZERO, amountProblem, dec, formatDecimal } from "../money.js";
import { formatInstant } from "../time.js";
import { finalizeOpen } from "./booking.js";
import { anchorOf, anchorsOfJson, billedMultiplierOf, cappedChainLines, chainLines } from "./first-seen.js";
import { storedKey } from "./line-keys.js";
import type { BillingTx } from "./ports.js";
import type { BillingReads } from "./reads.js";
import type { Invoice, InvoiceLine, InvoiceLineKind, Subscription, UsageTermsAdjustment, UsageWindow } from "./types.js";

const ONE = dec(1);

/** A priced line and what it is: fixed, usage of the invoice's window (keyed by rate and cell), or an adjustment of an earlier window; a credit's taxes as paid (InvoiceLine.paidTax). */
export type BillLine = Line & { kind: InvoiceLineKind; key: string | null; windowInvoiceId: string | null; paidTax?: InvoiceLine["paidTax"] };

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

/** A priced line as an invoice keeps it (a key too long for the store as its fixed-length form, line-keys.ts). */
export function storedLine(l: BillLine): InvoiceLine {
  return {
    description: l.description,
    quantity: formatDecimal(l.quantity),
    unitAmount: formatDecimal(l.unitAmount.toDecimalPlaces(SCALE)), // to 12 decimal places (DECIMAL(38,12)), the same on both stores
    amount: formatDecimal(l.amount),
    kind: l.kind,
    key: storedKey(l.key),
    windowInvoiceId: l.windowInvoiceId,
    ...(l.paidTax ? { paidTax: l.paidTax } : {}),
  };
}

/** The multiplier of a rate on a subscription (1 when it sets none). */
export function multiplierOf(s: Pick<Subscription, "rateMultipliers">, code: string): Decimal {
  const m = s.rateMultipliers[code];
  return m === undefined ? ONE : dec(m);
}

/**
 * What usage is priced for: the subject, the multipliers, (when known) the current period, which
 * usage windows lie in, the first-seen anchors of the window measured (first-seen.ts), and its
 * adjustments for changes of usage terms (usage-term-changes.ts).
 */
type UsageTerms = Pick<Subscription, "subjectId" | "rateMultipliers"> & Partial<Pick<Subscription, "periodStart" | "periodEnd" | "firstSeen" | "usageAdjustments">>;

/** A usage window with the cycle it lies in and its anchors (Dates when made, ISO text when read back from JSON: anchorsOfJson). */
type CycledWindow = Omit<UsageWindow, "firstSeen"> & { cycleStart?: Date | string; cycleEnd?: Date | string; firstSeen?: Parameters<typeof anchorsOfJson>[0] };

/** `s`'s changes of usage terms of rate `code` settled on the window from `from` (usage-term-changes.ts). */
function termChangesOf(s: Pick<UsageTerms, "usageAdjustments">, code: string, from: Date): UsageTermsAdjustment[] {
  return (s.usageAdjustments ?? []).filter((a) => a.code === code && a.since === from.toISOString());
}

/**
 * Rate `code`'s adjustment lines for its changes of usage terms (usage-term-changes.ts: old − new
 * terms of its usage before each, as priced now), keyed as its usage (`<code>|`) so discounts and
 * taxes book them as such; as priced, those that add first, never taking off more than its usage
 * lines `billed`, less what they billed at once (`settled`) whole: ×3 → ×1 over 1,000 units (4,000
 * billed), those withdrawn, 1,000 used after: 2,000 + 0 − 4,000, not − 2,000 (capped).
 */
function adjustmentLines(changes: { description: string; amount: Decimal; settled: Decimal }[], code: string, billed: Decimal): BillLine[] {
  let left = billed.gt(0) ? billed : ZERO;
  const out: BillLine[] = [];
  for (const a of [...changes.filter((c) => !c.amount.isNegative()), ...changes.filter((c) => c.amount.isNegative())]) {
    const priced = a.amount.lt(left.neg()) ? left.neg() : a.amount;
    left = left.plus(priced);
    const amount = priced.minus(a.settled);
    if (amount.isZero()) continue;
    out.push({ description: a.description, quantity: ONE, unitAmount: amount, amount, kind: "adjustment", key: `${code}|`, windowInvoiceId: null });
  }
  return out;
}

/**
 * The adjustments of a rate's kept changes `kept`, each priced now (`amounts`): those up to the
 * last billed at once (one with `settled`) as one, with what they billed at once (`settled`), so
 * usage sent since before them adds at the terms it was used under; the later ones as priced.
 */
function netOfSettled(name: string, kept: UsageTermsAdjustment[], amounts: Decimal[]): { description: string; amount: Decimal; settled: Decimal }[] {
  let last = -1;
  for (const [i, a] of kept.entries()) if (a.settled !== undefined) last = i;
  const rest = kept.slice(last + 1).map((a, i) => ({ description: a.description, amount: amounts[last + 1 + i] as Decimal, settled: ZERO }));
  if (last < 0) return rest;
  let [amount, settled] = [ZERO, ZERO];
  for (let i = 0; i <= last; i++) [amount, settled] = [amount.plus(amounts[i] as Decimal), settled.plus(kept[i]?.settled ?? ZERO)];
  const at = (t: string | undefined) => formatInstant(new Date(t ?? ""));
  const span = `${at(kept[last]?.since)} to ${at(kept[last]?.changedAt)}`;
  return [{ description: `${name}: usage sent after changes of its terms billed at once, at the terms it was used under (${span})`, amount, settled }, ...rest];
}

/** What a usage rate measured per combination of its dimension keys (see InvoiceBuilder.measureRate). */
type Measured = { coordinates: Record<string, string>; used: Decimal; events: Decimal }[];

/** The first-seen anchor a unique_count rate's window [from, …) is measured from (first-seen.ts), if it has one before `from`. */
function chainStart(rate: ChargedRates["usage"][number], metric: PricingMetric, s: Pick<UsageTerms, "firstSeen">, from: Date): Date | undefined {
  const since = anchorOf(s.firstSeen, rate);
  return since && metric.aggregation.type === "unique_count" && since.getTime() < from.getTime() ? since : undefined;
}

/** `s`'s usage-terms adjustments of its window from `from`, for the window's basis (none: absent). */
function windowAdjustments(s: Pick<Subscription, "usageAdjustments">, from: Date): Pick<UsageWindow, "usageAdjustments"> {
  const of = (s.usageAdjustments ?? []).filter((a) => a.since === from.toISOString());
  return of.length > 0 ? { usageAdjustments: of } : {};
}

/** A minimum or maximum amount as a decimal, or null. */
const money = (m: { value: string } | null): Decimal | null => (m === null ? null : dec(m.value));

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

  /** Usage of [from, to) priced by the card's usage-based rates, in arrears (see usageLinesOf). */
  async usageLines(card: RateCard, s: UsageTerms & Pick<Subscription, "fixedRateQuantities">, from: Date, to: Date, cycle?: Cycle | null): Promise<BillLine[]> {
    return this.usageLinesOf(card, (await this.reads.rates(card, s.fixedRateQuantities)).usage, s, from, to, cycle);
  }

  /**
   * Usage of [from, to) priced by rates already looked up (see BillingReads.rates): per rate its
   * lines (kind "usage"), then its minimum or maximum line (kinds "minimum", "maximum"; see
   * limits.ts), prorated by the window's share of `cycle` — by default the subscription's
   * current period, which every usage window lies in when it is billed. A unique_count rate with a
   * first-seen anchor in `s` bills what its chain of windows adds to its earlier windows (first-seen.ts).
   * Then its adjustments for the changes of its usage terms in `s` settled on the window from
   * `from` (adjustmentLines), each priced now from the committed usage before it (termChangeAmount).
   */
  async usageLinesOf(card: RateCard, usage: ChargedRates["usage"], s: UsageTerms, from: Date, to: Date, cycle?: Cycle | null): Promise<BillLine[]> {
    const metrics = await this.reads.metricsOf(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))]);
    const within = cycle ?? (s.periodStart && s.periodEnd ? { start: s.periodStart, end: s.periodEnd } : assumedCycle(from, card.billingInterval));
    const share = windowShare(from, to, within);
    const out: BillLine[] = [];
    for (const rate of usage) {
      const metric = metrics.get(rate.pricingMetricId) as PricingMetric;
      // Its changes' usage is measured before the window's (the shorter span first: see measureChain).
      const kept = termChangesOf(s, rate.code, from);
      const amounts: Decimal[] = [];
      for (const a of kept) amounts.push(await this.termChangeAmount(rate, metric, s, from, a));
      const changes = netOfSettled(rate.name, kept, amounts);
      // A limited or volume-tiered rate anchored: the chain's charge less the earlier windows' (cappedChainLines).
      const since = chainStart(rate, metric, s, from);
      const capped = since && !chargeAddsUp(rate) ? await this.cappedChain(rate, metric, s, since, from, to, within) : undefined;
      const lines: BillLine[] = (capped?.usage ?? (await this.rateLines(rate, metric, s, from, to))).map((l) => ({
        ...l,
        kind: "usage",
        key: `${rate.code}|${l.cell ?? ""}`,
        windowInvoiceId: null,
      }));
      out.push(...lines);
      const limit = limitLine(rate.name, total(lines), money(rate.minimumAmount), money(rate.maximumAmount), share);
      for (const l of capped ? capped.extra : limit ? [limit] : []) out.push({ ...l.line, kind: l.kind, key: `${rate.code}|${l.line.cell}`, windowInvoiceId: null });
      out.push(...adjustmentLines(changes, rate.code, total(lines)));
    }
    return out;
  }

  /**
   * What change `a` of `rate`'s usage terms settles on the window from `from`: its committed usage
   * of [from, a.changedAt), measured once as the window's lines measure it, priced at the old
   * terms (nothing when just taken) less at the new ones.
   */
  async termChangeAmount(rate: ChargedRates["usage"][number], metric: PricingMetric, s: UsageTerms, from: Date, a: UsageTermsAdjustment): Promise<Decimal> {
    const priced = await this.rateUsage(rate, metric, s, from, new Date(a.changedAt));
    const at = (m: string) => total(priced({ rateMultipliers: { [rate.code]: m } }));
    return (a.old === "taken" ? ZERO : at(a.old)).minus(at(a.new));
  }

  /**
   * One usage rate's lines for [from, to) (see measureRate). With a first-seen anchor for the rate
   * in `s` (first-seen.ts), the lines of the count since the anchor less those of the count since
   * it before `from` (chainLines), each with the rate's included units.
   */
  private async rateLines(rate: ChargedRates["usage"][number], metric: PricingMetric, s: UsageTerms, from: Date, to: Date): Promise<Line[]> {
    return (await this.rateUsage(rate, metric, s, from, to))(s);
  }

  /**
   * An anchored window [from, to) of a limited or volume-tiered rate (first-seen.ts cappedChainLines): the chain from `since` less the earlier windows as billed, at the multiplier their anchor keeps.
   */
  private async cappedChain(rate: ChargedRates["usage"][number], metric: PricingMetric, s: UsageTerms, since: Date, from: Date, to: Date, cycle: Cycle) {
    const { before, all } = await this.measureChain(rate, metric, s.subjectId, since, from, to, true);
    const was = billedMultiplierOf(s.firstSeen, rate);
    const billed = was !== undefined && to > from ? { lines: this.linesOf(rate, before, { rateMultipliers: { [rate.code]: was } }), was, now: multiplierOf(s, rate.code), since, from } : undefined;
    const limits = { name: rate.name, minimum: money(rate.minimumAmount), maximum: money(rate.maximumAmount) };
    return cappedChainLines(limits, this.linesOf(rate, all, s), this.linesOf(rate, before, s), windowShare(since, to, cycle), windowShare(since, from, cycle), billed);
  }

  /** One usage rate's usage for [from, to), measured once (as rateLines measures it), to price at given multipliers. */
  private async rateUsage(rate: ChargedRates["usage"][number], metric: PricingMetric, s: UsageTerms, from: Date, to: Date): Promise<(terms: Pick<UsageTerms, "rateMultipliers">) => Line[]> {
    const since = chainStart(rate, metric, s, from);
    if (since) {
      const { before, all } = await this.measureChain(rate, metric, s.subjectId, since, from, to, true);
      return (terms) => chainLines(this.linesOf(rate, all, terms), this.linesOf(rate, before, terms));
    }
    const used = await this.measureRate(rate, metric, s.subjectId, from, to, true);
    return (terms) => this.linesOf(rate, used, terms);
  }

  /** A rate's lines for what it measured, with its included units and the multiplier of `s`. */
  private linesOf(rate: ChargedRates["usage"][number], used: Measured, s: Pick<UsageTerms, "rateMultipliers">): Line[] {
    const included = dec(rate.includedUnits);
    const m = multiplierOf(s, rate.code);
    if (rate.type === "simple") return simpleUsageLine(rate.name, rate.price, used[0]?.used ?? ZERO, included, m, used[0]?.events ?? ZERO);
    return dimensionalLines(rate.name, rate.cells, used, included, m, coordinatesKey);
  }

  /**
   * A rate's usage from its first-seen anchor `since`: `before` over [since, from) and `all` over
   * [since, to). The shorter period is read first, then the longer, one after the other: events
   * are only ever added, so every value `before` holds is in `all` too, and f(all) − f(before)
   * never takes off a value `all` does not count. Read the other way round (or at once), an event
   * committed between the two reads into [since, from) (late usage of an earlier window) could be
   * in `before` and not in `all`, and the window would bill one value less than it first saw; read
   * this way, such an event is at worst counted in `all` only, as if it had come after the reads.
   */
  private async measureChain(rate: ChargedRates["usage"][number], metric: PricingMetric, subjectId: string, since: Date, from: Date, to: Date, events: boolean) {
    const before = await this.measureRate(rate, metric, subjectId, since, from, events);
    const all = await this.measureRate(rate, metric, subjectId, since, to, events);
    return { before, all };
  }

  /**
   * One usage rate's usage of [from, to): a simple rate's one total, a dimensional rate's per
   * combination of its dimension keys. With `events`, a percentage price also needs the period's
   * count of events: the same meter with a count aggregation of the same metric, as a summary's
   * count would be (only measured when a price of the rate is a percentage).
   */
  private async measureRate(rate: ChargedRates["usage"][number], metric: PricingMetric, subjectId: string, from: Date, to: Date, events: boolean): Promise<Measured> {
    const prices = rate.type === "simple" ? [rate.price] : rate.cells.map((c) => c.price);
    const keys = rate.type === "simple" ? [] : rate.dimensions.map((d) => d.key);
    const measured = await this.usage.measure(metric, subjectId, from, to, keys);
    const counted = events && prices.some((p) => p.kind === "percentage") ? await this.usage.measure({ ...metric, aggregation: { type: "count", valueField: null } }, subjectId, from, to, keys) : [];
    const eventsOf = new Map(counted.map((x) => [coordinatesKey(x.coordinates), x.value]));
    const used = measured.map((x) => ({ coordinates: x.coordinates, used: x.value, events: eventsOf.get(coordinatesKey(x.coordinates)) ?? ZERO }));
    // Combinations with events but no value (a sum of 0) still pay their fee per event.
    for (const x of counted) if (!measured.some((y) => coordinatesKey(y.coordinates) === coordinatesKey(x.coordinates))) used.push({ coordinates: x.coordinates, used: ZERO, events: x.value });
    return used;
  }

  /**
   * Used units per usage-based rate for [from, to), as its invoice lines measure them before
   * included units: a simple rate's total; a dimensional rate's sum over its cells of each cell's
   * usage (per combination of its dimension keys, so a unique_count counts a value once per cell
   * it is in, a max or last is taken per cell; combinations without a cell are not counted).
   * [from, to) is `s`'s window from usageSince; a rate with a first-seen anchor there counts from
   * the anchor (the period's distinct values across its chain of windows, as billed once: 12
   * users before a change and the same 12 after, 10 included, report 12 and an overage).
   */
  async usedUnits(card: RateCard, s: Subscription, from: Date, to: Date) {
    const { usage } = await this.reads.rates(card, s.fixedRateQuantities);
    const metrics = await this.reads.metricsOf(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))]);
    const out: { rate: (typeof usage)[number]; used: Decimal }[] = [];
    const usedOf = (rate: (typeof usage)[number], used: Measured) => (rate.type === "simple" ? (used[0]?.used ?? ZERO) : dimensionalUsed(rate.cells, used, coordinatesKey));
    for (const rate of usage) {
      const metric = metrics.get(rate.pricingMetricId) as PricingMetric;
      const since = chainStart(rate, metric, s, from) ?? from;
      out.push({ rate, used: usedOf(rate, await this.measureRate(rate, metric, s.subjectId, since, to, false)) });
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
    // The cycle the window lies in goes with it, so a recomputation prorates minimums and maximums
    // alike, its first-seen anchors, so it counts a unique_count alike (first-seen.ts), and its usage-terms adjustments.
    const window: UsageWindow = {
      from,
      to,
      rateCardId: s.rateCardId,
      fixedRateQuantities: s.fixedRateQuantities,
      rateMultipliers: s.rateMultipliers,
      cycleStart: s.periodStart,
      cycleEnd: s.periodEnd,
      ...(s.firstSeen && Object.keys(s.firstSeen).length > 0 ? { firstSeen: s.firstSeen } : {}),
      ...windowAdjustments(s, from),
    };
    return { window, finalizesAt: grace > 0 ? new Date(at.getTime() + grace * 1000) : null };
  }

  /** A window's usage lines as they are now, from the committed usage. */
  async windowLines(environmentId: string, subjectId: string, w: UsageWindow): Promise<BillLine[]> {
    const card = await this.reads.card(environmentId, w.rateCardId);
    const { cycleStart, cycleEnd, firstSeen, usageAdjustments } = w as CycledWindow;
    // A window stored without its cycle (billed before cycles were kept): assumedCycle.
    const cycle = cycleStart && cycleEnd ? { start: new Date(cycleStart), end: new Date(cycleEnd) } : null;
    // A window stored without anchors (all those billed before them) is measured over itself alone.
    const anchors = firstSeen ? anchorsOfJson(firstSeen) : null;
    return this.usageLines(card, { subjectId, fixedRateQuantities: w.fixedRateQuantities, rateMultipliers: w.rateMultipliers, firstSeen: anchors, usageAdjustments }, w.from, w.to, cycle);
  }

  /**
   * Writes an invoice in the transaction unless it has no lines and no usage window; as written (booked, credited), or
   * undefined when the subscription already has one for that period (a repeated or concurrent run), which the caller
   * must treat as "done by someone else".
   */
  async writeInvoice(tx: BillingTx, invoice: Invoice): Promise<Invoice | undefined> {
    // An invoice of a usage window is written even without lines (usage within the included
    // units, or none): late usage of that window can still land on it or be adjusted later.
    if (invoice.lines.length === 0 && !invoice.window) return invoice;
    // DESIGN §14, §15: an invoice open at once is booked, spends the subject's credit and is numbered here (booking.ts).
    const credited = await finalizeOpen(tx, invoice, invoice.createdAt, this.now);
    try {
      await tx.insertInvoice(credited);
      await tx.emit(newInvoiceEvents(credited));
      return credited;
    } catch (err) {
      // Credit spent, amounts carried in or a total below 0 granted (booking.ts) for an invoice not written must not stay: the transaction fails.
      if (err instanceof AlreadyExistsError && !credited.creditsApplied?.length && !credited.carriedIn?.length && !dec(credited.total).isNegative()) return undefined;
      throw err;
    }
  }
}
