/**
 * Invoice lines (DESIGN §8), pure: fixed rates in advance, usage-based rates in arrears.
 * - fixed: quantity × price × multiplier; a package price charges whole packages (rounded up or
 *   down per the price);
 * - usage: billable = max(0, used − included units), priced flat, per package, by tiers or by a
 *   percentage (tiers.ts), × multiplier;
 * - dimensional: usage per cell; included units are consumed first by the most expensive cells
 *   (ties in matrix order); usage of a combination without a cell is billed at zero and named;
 * - each line's amount is rounded once, half-up, to whole smallest units; lines with zero
 *   quantity are left out; the total is the sum of the rounded lines.
 */
import type { MatrixCell, Price } from "../catalog/types.js";
import { type Decimal, ZERO, dec, formatDecimal, sum } from "../money.js";
import { type Line, line } from "./line.js";
import { percentageLines, tieredLines } from "./tiers.js";

export { type Line, line };

/** What a quantity costs at a flat or package price: the quantity shown on the line, and the unit amount. */
export function priced(price: Price, quantity: Decimal, multiplier: Decimal): { quantity: Decimal; unitAmount: Decimal } {
  if (price.kind === "tiered" || price.kind === "percentage") throw new Error(`${price.kind} prices make several lines: see priceLines`);
  const unit = dec(price.amount.value).times(multiplier);
  if (price.kind === "flat") return { quantity, unitAmount: unit };
  const packages = quantity.div(dec(price.packageUnits));
  const whole = price.rounding === "round_up" ? packages.ceil() : packages.floor();
  return { quantity: whole, unitAmount: unit };
}

/**
 * The lines of `quantity` (after included units) at any price. `label` names a dimensional cell
 * (null for a simple rate); `units` is how a package is described ("units" for usage, "" for
 * seats); `events` is the period's count of events (percentage prices only). Percentage prices
 * are refused on fixed rates by validation: without events they charge only their percent.
 */
export function priceLines(name: string, label: string | null, price: Price, quantity: Decimal, multiplier: Decimal, units: string, events: Decimal = ZERO): Line[] {
  if (quantity.isZero() && !(price.kind === "percentage" && events.gt(0))) return [];
  if (price.kind === "tiered") return tieredLines(name, label, price, quantity, multiplier);
  if (price.kind === "percentage") return percentageLines(name, label, price, quantity, events, multiplier);
  const p = priced(price, quantity, multiplier);
  if (p.quantity.isZero()) return [];
  const words = label ?? (price.kind === "package" ? `${formatDecimal(p.quantity)} × ${price.packageUnits}${units}` : null);
  return [line(words === null ? name : `${name} (${words})`, p.quantity, p.unitAmount)];
}

/** A fixed rate's lines for one cycle (quantity × price × multiplier), or none for a zero quantity. */
export function fixedLine(name: string, price: Price, quantity: Decimal, multiplier: Decimal): Line[] {
  return priceLines(name, null, price, quantity, multiplier, "");
}

/** A simple usage rate's lines: billable = max(0, used − included); `events` for a percentage price's fee. */
export function simpleUsageLine(name: string, price: Price, used: Decimal, included: Decimal, multiplier: Decimal, events: Decimal = ZERO): Line[] {
  return priceLines(name, null, price, Decimal0Max(used.minus(included)), multiplier, " units", events);
}

function Decimal0Max(d: Decimal): Decimal {
  return d.isNegative() ? ZERO : d;
}

/**
 * Price per single unit, to rank cells for included units: a package's amount spread over its
 * units; a tiered price's first tier's unit amount (the price of the first units, which are the
 * ones included units cover); a percentage price's percent / 100 (per smallest unit of the sum;
 * such rates have no included units, so this only orders them).
 */
function perUnit(p: Price): Decimal {
  switch (p.kind) {
    case "flat":
      return dec(p.amount.value);
    case "package":
      return dec(p.amount.value).div(dec(p.packageUnits));
    case "tiered":
      return dec(p.tiers[0]?.unitAmount.value ?? "0");
    case "percentage":
      return dec(p.percent).div(100);
  }
}

function describe(coordinates: Record<string, string>): string {
  return Object.entries(coordinates)
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

/** Used quantity per combination of a dimensional rate's dimension keys (coordinates), in any order. */
type CombinationUsage = readonly { coordinates: Record<string, string>; used: Decimal; events?: Decimal }[];

/** Per combination (by `keyOf`): its coordinates, what was used, its events, and whether any of it was non-zero. */
function byCombination(usage: CombinationUsage, keyOf: (coordinates: Record<string, string>) => string) {
  const usedByKey = new Map<string, { coordinates: Record<string, string>; used: Decimal; events: Decimal; nonZero: boolean }>();
  for (const u of usage) {
    const k = keyOf(u.coordinates);
    const prev = usedByKey.get(k);
    usedByKey.set(k, {
      coordinates: prev?.coordinates ?? u.coordinates,
      used: (prev?.used ?? ZERO).plus(u.used),
      events: (prev?.events ?? ZERO).plus(u.events ?? ZERO),
      nonZero: (prev?.nonZero ?? false) || !u.used.isZero(),
    });
  }
  return usedByKey;
}

/** Each cell's usage (matrix order) as its lines price it before included units: what its combination used, 0 when below. */
function cellUsed(cells: readonly MatrixCell[], usedByKey: ReturnType<typeof byCombination>, keyOf: (coordinates: Record<string, string>) => string): Decimal[] {
  return cells.map((cell) => Decimal0Max(usedByKey.get(keyOf(cell.coordinates))?.used ?? ZERO));
}

/**
 * A dimensional rate's usage as its lines bill it, before included units: the sum of its cells'
 * usage (see cellUsed). A combination without a cell is billed nothing and takes no included
 * units, so it is not counted; billable units are max(0, this − included units).
 */
export function dimensionalUsed(cells: readonly MatrixCell[], usage: CombinationUsage, keyOf: (coordinates: Record<string, string>) => string): Decimal {
  return sum(cellUsed(cells, byCombination(usage, keyOf), keyOf));
}

/**
 * A dimensional rate's lines. `usage` is the used quantity per combination of the rate's
 * dimension keys (coordinates), in any order; cells are in matrix order.
 */
export function dimensionalLines(
  name: string,
  cells: readonly MatrixCell[],
  usage: CombinationUsage,
  included: Decimal,
  multiplier: Decimal,
  keyOf: (coordinates: Record<string, string>) => string,
): Line[] {
  const usedByKey = byCombination(usage, keyOf);
  const usedOf = cellUsed(cells, usedByKey, keyOf);
  const cellKeys = new Set(cells.map((c) => keyOf(c.coordinates)));
  // Included units go first to the most expensive cells (a stable sort keeps matrix order on ties).
  const ranked = cells.map((cell, i) => ({ cell, i })).sort((a, b) => perUnit(b.cell.price).cmp(perUnit(a.cell.price)) || a.i - b.i);
  let left = included;
  const billable = new Map<number, Decimal>();
  for (const { i } of ranked) {
    const used = usedOf[i] as Decimal;
    const covered = used.lt(left) ? used : left;
    left = left.minus(covered);
    billable.set(i, used.minus(covered));
  }
  const out: Line[] = [];
  cells.forEach((cell, i) => {
    const k = keyOf(cell.coordinates);
    const lines = priceLines(name, describe(cell.coordinates), cell.price, billable.get(i) ?? ZERO, multiplier, " units", usedByKey.get(k)?.events ?? ZERO);
    // A flat or package cell keeps its one line's key; tier and percentage lines add their part.
    for (const l of lines) out.push({ ...l, cell: l.cell === undefined ? k : `${k}|${l.cell}` });
  });
  // Usage of a combination that has no cell: billed at zero, and named.
  const unpriced = [...usedByKey].filter(([k, u]) => !cellKeys.has(k) && u.nonZero).sort(([a], [b]) => (a < b ? -1 : 1));
  for (const [k, u] of unpriced) out.push({ ...line(`${name} (${describe(u.coordinates)}: no price for this combination)`, u.used, ZERO), cell: `unpriced:${k}` });
  return out;
}

export function total(lines: readonly Line[]): Decimal {
  return sum(lines.map((l) => l.amount));
}
