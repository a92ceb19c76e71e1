/**
 * Which grant pays how much of an invoice (DESIGN §14), a pure function: the invoice side calls it
 * at finalization (then spends each application through CreditWrites.spend in the same
 * transaction) and for drafts (what would be applied).
 *
 * Rules:
 * - Grants are taken in the order given (the spend order: order.ts), each as far as it can.
 * - Nothing is applied beyond the invoice's total (after tax), nor when the total is ≤ 0.
 * - A grant restricted to rate codes pays only lines of those codes, and never more of a rate
 *   than what is left of its net: the sum of all its lines as they cost the buyer (after
 *   discounts and tax), a negative one (its maximum's, a credit) included, so a rate's gross
 *   usage above its cap is never paid, nor other rates' charges with what it leaves. Each rate
 *   carries what is still unpaid of it by restricted grants, taken in the order its first line
 *   comes. An unrestricted grant pays anything left of the total and is not tied to lines: the total
 *   bounds every application together, so a restricted grant after it still finds its lines
 *   unpaid but is capped by what is left of the total.
 * - Every application is a whole number of the currency's smallest unit (lines and totals are
 *   whole units; what a grant can give is taken down to a whole unit), and > 0.
 * - Exact decimals throughout (money.ts).
 */
import { type Decimal, ZERO, dec, formatDecimal } from "../money.js";
import type { CreditApplication, CreditGrant } from "./types.js";

/** One line of the invoice as credits see it: its rate code (null: none, e.g. an adjustment) and amount. */
export interface ChargeLine {
  rateCode: string | null;
  amount: string;
}

export type ApplicableGrant = Pick<CreditGrant, "id" | "remaining" | "appliesToRateCodes">;

const whole = (d: Decimal): Decimal => (d.lte(0) ? ZERO : d.floor());

/** The applications, in the grants' order, of the grants that pay something. */
export function allocateCredits(lines: readonly ChargeLine[], total: string, grants: readonly ApplicableGrant[]): CreditApplication[] {
  let left = whole(dec(total));
  const unpaid = netByRate(lines);
  const out: CreditApplication[] = [];
  for (const g of grants) {
    if (left.lte(0)) break;
    let can = whole(dec(g.remaining));
    if (can.lte(0)) continue;
    let paid = ZERO;
    if (g.appliesToRateCodes.length === 0) {
      paid = minOf(can, left);
    } else {
      const codes = new Set(g.appliesToRateCodes);
      for (const [code, rest] of unpaid) {
        if (!codes.has(code)) continue;
        const take = minOf(minOf(can, rest), left.minus(paid));
        if (take.lte(0)) continue;
        unpaid.set(code, rest.minus(take));
        can = can.minus(take);
        paid = paid.plus(take);
      }
    }
    if (paid.gt(0)) {
      out.push({ grantId: g.id, amount: formatDecimal(paid) });
      left = left.minus(paid);
    }
  }
  return out;
}

/** Per rate code, in the order of its first line: the net of its lines, taken down to a whole unit (0 when ≤ 0). */
function netByRate(lines: readonly ChargeLine[]): Map<string, Decimal> {
  const sums = new Map<string, Decimal>();
  for (const l of lines) if (l.rateCode !== null) sums.set(l.rateCode, (sums.get(l.rateCode) ?? ZERO).plus(dec(l.amount)));
  return new Map([...sums].map(([code, net]) => [code, whole(net)]));
}

function minOf(a: Decimal, b: Decimal): Decimal {
  return a.lte(b) ? a : b;
}

/** The sum of applications (what the invoice shows as credits applied). */
export function appliedTotal(applications: readonly CreditApplication[]): string {
  return formatDecimal(applications.reduce((acc, a) => acc.plus(dec(a.amount)), ZERO));
}
