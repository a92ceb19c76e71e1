/**
 * Invoice lines (DESIGN §8), pure: fixed rates in advance, usage-based rates in arrears.
 * - fixed: quantity × price × multiplier; a package price charges whole packages (rounded up or
 *   down per the price);
 * - usage: billable = max(0, used − included units), priced flat or per package, × multiplier;
 * - dimensional: usage per cell; included units are consumed first by the most expensive cells
 *   (ties in matrix order); usage of a combination without a cell is billed at zero and named;
 * - each line's amount is rounded once, half-up, to whole smallest units; lines with zero
 *   quantity are left out; the total is the sum of the rounded lines.
 */
import type { MatrixCell, Price } from "../catalog/types.js";
import { type Decimal, ZERO, dec, formatDecimal, roundAmount, sum } from "../money.js";

export interface Line {
  description: string;
  /** Units, or packages for a package price. */
  quantity: Decimal;
  /** Price per quantity unit, multiplier applied. */
  unitAmount: Decimal;
  /** Rounded to whole smallest units. */
  amount: Decimal;
  /** A dimensional line: the cell (or unpriced combination) it prices, stable across recomputations. */
  cell?: string;
}

/** What a quantity costs at a price: the quantity shown on the line, and the unit amount. */
export function priced(price: Price, quantity: Decimal, multiplier: Decimal): { quantity: Decimal; unitAmount: Decimal } {
  if (price.kind === "tiered" || price.kind === "percentage") throw new Error(`${price.kind} prices are not priced here yet`);
  const unit = dec(price.amount.value).times(multiplier);
  if (price.kind === "flat") return { quantity, unitAmount: unit };
  const packages = quantity.div(dec(price.packageUnits));
  const whole = price.rounding === "round_up" ? packages.ceil() : packages.floor();
  return { quantity: whole, unitAmount: unit };
}

export function line(description: string, quantity: Decimal, unitAmount: Decimal): Line {
  return { description, quantity, unitAmount, amount: roundAmount(quantity.times(unitAmount)) };
}

/** A fixed rate's line for one cycle, or none for a zero quantity. */
export function fixedLine(name: string, price: Price, quantity: Decimal, multiplier: Decimal): Line[] {
  if (quantity.isZero()) return [];
  const p = priced(price, quantity, multiplier);
  if (p.quantity.isZero()) return [];
  return [line(price.kind === "package" ? `${name} (${formatDecimal(p.quantity)} × ${price.packageUnits})` : name, p.quantity, p.unitAmount)];
}

/** A simple usage rate's line: billable = max(0, used − included). */
export function simpleUsageLine(name: string, price: Price, used: Decimal, included: Decimal, multiplier: Decimal): Line[] {
  const billable = Decimal0Max(used.minus(included));
  if (billable.isZero()) return [];
  const p = priced(price, billable, multiplier);
  if (p.quantity.isZero()) return [];
  return [line(price.kind === "package" ? `${name} (${formatDecimal(p.quantity)} × ${price.packageUnits} units)` : name, p.quantity, p.unitAmount)];
}

function Decimal0Max(d: Decimal): Decimal {
  return d.isNegative() ? ZERO : d;
}

/** Price per single unit, to rank cells: a package's amount spread over its units. */
function perUnit(p: Price): Decimal {
  if (p.kind === "tiered" || p.kind === "percentage") throw new Error(`${p.kind} prices are not ranked here yet`);
  return p.kind === "flat" ? dec(p.amount.value) : dec(p.amount.value).div(dec(p.packageUnits));
}

function describe(coordinates: Record<string, string>): string {
  return Object.entries(coordinates)
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

/**
 * A dimensional rate's lines. `usage` is the used quantity per combination of the rate's
 * dimension keys (coordinates), in any order; cells are in matrix order.
 */
export function dimensionalLines(
  name: string,
  cells: readonly MatrixCell[],
  usage: readonly { coordinates: Record<string, string>; used: Decimal }[],
  included: Decimal,
  multiplier: Decimal,
  keyOf: (coordinates: Record<string, string>) => string,
): Line[] {
  // Per combination: its coordinates, what was used, and whether any of it was non-zero.
  const usedByKey = new Map<string, { coordinates: Record<string, string>; used: Decimal; nonZero: boolean }>();
  for (const u of usage) {
    const k = keyOf(u.coordinates);
    const prev = usedByKey.get(k);
    usedByKey.set(k, { coordinates: prev?.coordinates ?? u.coordinates, used: (prev?.used ?? ZERO).plus(u.used), nonZero: (prev?.nonZero ?? false) || !u.used.isZero() });
  }
  const cellKeys = new Set(cells.map((c) => keyOf(c.coordinates)));
  // Included units go first to the most expensive cells (a stable sort keeps matrix order on ties).
  const ranked = cells.map((cell, i) => ({ cell, i })).sort((a, b) => perUnit(b.cell.price).cmp(perUnit(a.cell.price)) || a.i - b.i);
  let left = included;
  const billable = new Map<number, Decimal>();
  for (const { cell, i } of ranked) {
    const used = usedByKey.get(keyOf(cell.coordinates))?.used ?? ZERO;
    const covered = Decimal0Max(used).lt(left) ? Decimal0Max(used) : left;
    left = left.minus(covered);
    billable.set(i, Decimal0Max(used.minus(covered)));
  }
  const out: Line[] = [];
  cells.forEach((cell, i) => {
    const b = billable.get(i) ?? ZERO;
    if (b.isZero()) return;
    const p = priced(cell.price, b, multiplier);
    if (p.quantity.isZero()) return;
    out.push({ ...line(`${name} (${describe(cell.coordinates)})`, p.quantity, p.unitAmount), cell: keyOf(cell.coordinates) });
  });
  // Usage of a combination that has no cell: billed at zero, and named.
  const unpriced = [...usedByKey].filter(([k, u]) => !cellKeys.has(k) && u.nonZero).sort(([a], [b]) => (a < b ? -1 : 1));
  for (const [k, u] of unpriced) out.push({ ...line(`${name} (${describe(u.coordinates)}: no price for this combination)`, u.used, ZERO), cell: `unpriced:${k}` });
  return out;
}

export function total(lines: readonly Line[]): Decimal {
  return sum(lines.map((l) => l.amount));
}
