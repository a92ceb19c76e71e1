/**
 * The billing engine (DESIGN §8): what a subscription owes at each cycle boundary, at a
 * cancellation and at a rate-card change, written once per (subscription, period) — the unique
 * key makes a repeated or concurrent run unable to bill twice — and charged to the saved method.
 */
import { chargedRates } from "../catalog/addons.js";
import type { RateCardStore } from "../catalog/rate-cards.js";
import type { RateCatalogStore } from "../catalog/rate-catalogs.js";
import { coordinatesKey } from "../catalog/rates.js";
import type { PricingMetric, RateCard } from "../catalog/types.js";
import type { PricingMetricStore } from "../catalog/metrics.js";
import { AlreadyExistsError } from "../errors.js";
import { newId, randomBase62 } from "../ids.js";
import { cycleBounds } from "../invoicing/cycles.js";
import { type Line, dimensionalLines, fixedLine, simpleUsageLine, total } from "../invoicing/lines.js";
import type { SummaryService } from "../metering/usage.js";
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import type { BillingStore, BillingTx, Invoice, PaymentProvider, Subscription } from "./types.js";

const ONE = dec(1);

export function multiplierOf(s: Pick<Subscription, "rateMultipliers">, code: string): Decimal {
  const m = s.rateMultipliers[code];
  return m === undefined ? ONE : dec(m);
}

export class BillingEngine {
  constructor(
    readonly store: BillingStore,
    private readonly cards: RateCardStore,
    readonly catalogs: RateCatalogStore,
    private readonly metrics: PricingMetricStore,
    private readonly usage: SummaryService,
    private readonly provider: PaymentProvider,
    readonly now: () => Date,
  ) {}

  async card(environmentId: string, id: string): Promise<RateCard> {
    const card = await this.cards.get(environmentId, id);
    if (!card) throw new Error(`rate card ${id} vanished`);
    return card;
  }

  /** The card's rates a subscription is charged for, catalog add-ons included. */
  async rates(card: RateCard, quantities: Record<string, string>) {
    const catalogRates = card.rateCatalogId ? await this.catalogs.ratesFor(card.environmentId, card.rateCatalogId, card.billingInterval) : [];
    return chargedRates(card, catalogRates, quantities);
  }

  /** Fixed charges of one cycle, in advance. */
  async fixedLines(card: RateCard, s: Pick<Subscription, "fixedRateQuantities" | "rateMultipliers">): Promise<Line[]> {
    const { fixed } = await this.rates(card, s.fixedRateQuantities);
    return fixed.flatMap((r) => fixedLine(r.name, r.price, dec(s.fixedRateQuantities[r.code] ?? "0"), multiplierOf(s, r.code)));
  }

  /** Usage of [from, to) priced by the card's usage-based rates, in arrears. */
  async usageLines(card: RateCard, s: Subscription, from: Date, to: Date): Promise<Line[]> {
    const { usage } = await this.rates(card, s.fixedRateQuantities);
    const metrics = new Map((await this.metrics.getMany(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))])).map((m) => [m.id, m]));
    const out: Line[] = [];
    for (const rate of usage) {
      const metric = metrics.get(rate.pricingMetricId) as PricingMetric;
      const included = dec(rate.includedUnits);
      const m = multiplierOf(s, rate.code);
      if (rate.type === "simple") {
        const [measured] = await this.usage.measure(metric, s.subjectId, from, to, []);
        out.push(...simpleUsageLine(rate.name, rate.price, measured?.value ?? ZERO, included, m));
      } else {
        const keys = rate.dimensions.map((d) => d.key);
        const measured = await this.usage.measure(metric, s.subjectId, from, to, keys);
        out.push(...dimensionalLines(rate.name, rate.cells, measured.map((x) => ({ coordinates: x.coordinates, used: x.value })), included, m, coordinatesKey));
      }
    }
    return out;
  }

  /** Used units per usage-based rate for [from, to) (dimensional: the total over every cell). */
  async usedUnits(card: RateCard, s: Subscription, from: Date, to: Date) {
    const { usage } = await this.rates(card, s.fixedRateQuantities);
    const metrics = new Map((await this.metrics.getMany(card.environmentId, [...new Set(usage.map((r) => r.pricingMetricId))])).map((m) => [m.id, m]));
    const out: { rate: (typeof usage)[number]; used: Decimal }[] = [];
    for (const rate of usage) {
      const measured = await this.usage.measure(metrics.get(rate.pricingMetricId) as PricingMetric, s.subjectId, from, to, []);
      out.push({ rate, used: measured[0]?.value ?? ZERO });
    }
    return out;
  }

  newInvoice(s: Subscription, card: RateCard, periodKey: string, lines: Line[], periodStart: Date, periodEnd: Date, at: Date): Invoice {
    return {
      id: newId("inv"),
      environmentId: s.environmentId,
      subjectId: s.subjectId,
      subscriptionId: s.id,
      periodKey,
      status: "open",
      currency: card.currency ?? "USD",
      total: formatDecimal(total(lines)),
      lines: lines.map((l) => ({
        description: l.description,
        quantity: formatDecimal(l.quantity),
        // Unit prices are kept to 12 decimal places (DECIMAL(38,12)), the same on both stores.
        unitAmount: formatDecimal(l.unitAmount.toDecimalPlaces(12)),
        amount: formatDecimal(l.amount),
      })),
      hostedToken: randomBase62(32),
      periodStart,
      periodEnd,
      createdAt: at,
    };
  }

  /**
   * Writes an invoice in the transaction unless it has no lines; false when the subscription
   * already has one for that period (a repeated or concurrent run), which the caller must treat
   * as "done by someone else".
   */
  async writeInvoice(tx: BillingTx, invoice: Invoice): Promise<boolean> {
    if (invoice.lines.length === 0) return true;
    try {
      await tx.insertInvoice(invoice);
      return true;
    } catch (err) {
      if (err instanceof AlreadyExistsError) return false;
      throw err;
    }
  }

  /** Finalized invoices are charged to the subject's saved method; zero totals are paid at once. */
  async settle(invoice: Invoice, paymentMethodId: string | null): Promise<void> {
    if (invoice.lines.length === 0) return;
    const at = this.now();
    if (dec(invoice.total).lte(0)) {
      await this.store.setInvoiceStatus(invoice.id, "open", "paid", at);
      return;
    }
    const pm = paymentMethodId ? await this.store.paymentMethod(paymentMethodId) : undefined;
    if (!pm) return; // stays open until paid another way
    const res = await this.provider.charge(pm, invoice.total, invoice.currency, invoice.id);
    if (res.ok) await this.store.setInvoiceStatus(invoice.id, "open", "paid", at);
  }

  /**
   * Closes the current cycle of a due subscription: usage of the period that ended plus, unless
   * it cancels now, the fixed charges of the period that starts. Safe to run twice or from two
   * servers at once: the subscription row is locked and its cycle index re-checked, and the
   * invoice's (subscription, period) key is unique.
   */
  async closeCycle(snapshot: Subscription): Promise<boolean> {
    const card = await this.card(snapshot.environmentId, snapshot.rateCardId);
    const usageLines = await this.usageLines(card, snapshot, snapshot.usageSince, snapshot.periodEnd);
    const cancelling = snapshot.cancelsAtEndOfCycle;
    const next = cycleBounds(snapshot.anchor, snapshot.cycleIndex + 1, card.billingInterval);
    const fixed = cancelling ? [] : await this.fixedLines(card, snapshot);
    const at = snapshot.periodEnd;
    const invoice = this.newInvoice(snapshot, card, `cycle:${snapshot.cycleIndex + 1}`, [...fixed, ...usageLines], snapshot.periodEnd, cancelling ? snapshot.periodEnd : next.end, at);
    const done = await this.store.transaction(async (tx) => {
      const s = await tx.lockSubscription(snapshot.environmentId, snapshot.id);
      if (!s || s.status !== "active" || s.cycleIndex !== snapshot.cycleIndex || s.rateCardId !== snapshot.rateCardId) return false;
      if (!(await this.writeInvoice(tx, invoice))) return false;
      if (cancelling) {
        await tx.updateSubscription({ ...s, status: "cancelled", cancelledAt: s.periodEnd, cancelsAtEndOfCycle: true });
      } else {
        await tx.updateSubscription({ ...s, cycleIndex: s.cycleIndex + 1, periodStart: next.start, periodEnd: next.end, usageSince: next.start });
      }
      return true;
    });
    if (done) {
      const subject = await this.store.subject(snapshot.environmentId, snapshot.subjectId);
      await this.settle(invoice, subject?.paymentMethodId ?? null);
    }
    return done;
  }

  /**
   * Closes every cycle due by `now` — on real time (clockId null) or on one test clock —
   * including several cycles of one subscription when time jumped; returns how many it closed.
   */
  async closeDue(now: Date, clockId: string | null, concurrency = 8): Promise<number> {
    let closed = 0;
    for (;;) {
      const due = await this.store.dueSubscriptions(now, clockId, 200);
      if (due.length === 0) return closed;
      let progress = 0;
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(concurrency, due.length) }, async () => {
          while (next < due.length) {
            const s = due[next++] as Subscription;
            if (await this.closeCycle(s)) progress++;
          }
        }),
      );
      closed += progress;
      if (progress === 0) return closed; // another runner holds them; it will finish them
    }
  }
}
