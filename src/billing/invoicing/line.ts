/** One invoice line as priced (lines.ts, tiers.ts): its amount rounded once, half-up. */
import { type Decimal, roundAmount } from "../money.js";

export interface Line {
  description: string;
  /** Units, or packages for a package price. */
  quantity: Decimal;
  /** Price per quantity unit, multiplier applied. */
  unitAmount: Decimal;
  /** Rounded to whole smallest units. */
  amount: Decimal;
  /**
   * What the line prices within its rate, stable across recomputations: a dimensional cell (or
   * unpriced combination), a tier (`tier:2`, `tier:2:flat`), a percentage's parts (`percent`,
   * `per_event`), or both (`<cell>|tier:2`). Absent for a rate's one line of a flat or package price.
   */
  cell?: string;
}

export function line(description: string, quantity: Decimal, unitAmount: Decimal): Line {
  return { description, quantity, unitAmount, amount: roundAmount(quantity.times(unitAmount)) };
}
