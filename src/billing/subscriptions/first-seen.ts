/**
 * First-seen anchors of usage windows (DESIGN §13: a unique_count bills the distinct values of a
 * period). A change of rate card cuts a period into usage windows, each billed on its own card; a
 * value seen on both sides of the change was counted in both. When the ending window's card and
 * the new card both bill a metric with a unique_count rate, the switch gives the new window an
 * anchor for that metric: the ending window's own anchor for it if it had one, else the ending
 * window's start. The new window then counts the values first seen in [anchor, window end): the
 * distinct count of [anchor, end) less that of [anchor, window start) (SummaryService.measure, per
 * combination of the rate's dimension keys), so the windows of consecutive cards that bill the
 * metric add up to its distinct count over them. A card in between that does not bill it breaks
 * the chain (the next window has no anchor for it: what was seen under a card that did not bill
 * it was never billed). Anchors never cross a cycle's start: a cycle close, a pause and a resume
 * start the next window without any. A window without an anchor (every window stored before
 * anchors existed) is measured over itself alone, as before.
 */
import type { PricingMetric, RateCard, UsageRate } from "../catalog/types.js";

/** Per pricing metric ID, a window's first-seen anchor (see the module's comment). */
export type FirstSeen = Record<string, Date>;

/** What the anchors are computed from: a card's usage rates (with a subscription's quantities) and the metrics they bill. */
export interface FirstSeenReads {
  rates(card: RateCard, quantities: Record<string, string>): Promise<{ usage: UsageRate[] }>;
  metricsOf(environmentId: string, ids: string[]): Promise<Map<string, PricingMetric>>;
}

/** The window ending at a switch: its start, the cycle it lies in, its anchors, and the quantities its rates were priced with. */
export interface EndingWindow {
  usageSince: Date;
  periodStart: Date;
  periodEnd: Date;
  fixedRateQuantities: Record<string, string>;
  firstSeen?: FirstSeen | null;
}

/** The metrics `card` bills with a unique_count rate (with `quantities`, for the add-ons it takes). */
async function uniqueMetricsOf(reads: FirstSeenReads, card: RateCard, quantities: Record<string, string>): Promise<Set<string>> {
  const ids = [...new Set((await reads.rates(card, quantities)).usage.map((r) => r.pricingMetricId))];
  const metrics = await reads.metricsOf(card.environmentId, ids);
  return new Set(ids.filter((id) => metrics.get(id)?.aggregation.type === "unique_count"));
}

/**
 * The anchors of the window a switch from `oldCard` (the ending window `w`) to `newCard` (with
 * `quantities`) starts at `at`; null when none. Only within `w`'s cycle: a new window starting at
 * or after its end (a timeline's move at the cycle's end) starts afresh, and an anchor is never
 * before the cycle's start. An empty ending window (two changes at one instant) passes its own
 * anchors on for the metrics both cards bill.
 */
export async function firstSeenAfterSwitch(reads: FirstSeenReads, w: EndingWindow, oldCard: RateCard, newCard: RateCard, quantities: Record<string, string>, at: Date): Promise<FirstSeen | null> {
  if (at.getTime() >= w.periodEnd.getTime()) return null;
  const [before, after] = await Promise.all([uniqueMetricsOf(reads, oldCard, w.fixedRateQuantities), uniqueMetricsOf(reads, newCard, quantities)]);
  const out: FirstSeen = {};
  for (const id of after) {
    if (!before.has(id)) continue;
    const anchor = w.firstSeen?.[id] ?? w.usageSince;
    if (anchor.getTime() >= w.periodStart.getTime() && anchor.getTime() < at.getTime()) out[id] = anchor;
  }
  return Object.keys(out).length > 0 ? out : null;
}
