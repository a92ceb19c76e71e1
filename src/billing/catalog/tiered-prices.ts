/**
 * Tiered and percentage price rules (DESIGN §13). Every violation names its full path, e.g.
 * `usage_based_rates[0].price.tiers[2].up_to`. Where a percentage price may be used (usage
 * rates on a `sum` metric, no included units) is checked in rates.ts, which knows the rate.
 */
import type { Violations } from "../errors.js";
import { type Decimal, SCALE, formatDecimal, parseDecimal, storageProblem } from "../money.js";
import { checkAmount } from "./amounts.js";
import type { Money, Price, PriceInput, Tier, TierInput, TiersMode } from "./types.js";

/** At most this many tiers: a price list, not a lookup table. */
export const MAX_TIERS = 100;

/** A positive decimal bound within the input limits, or undefined (with a violation). */
function checkBound(text: string, v: Violations): Decimal | undefined {
  const d = parseDecimal(text);
  if (!d) {
    v.add("up_to", "must be a decimal number");
    return undefined;
  }
  if (d.lte(0)) {
    v.add("up_to", "must be greater than 0");
    return undefined;
  }
  const problem = storageProblem(d);
  if (problem) v.add("up_to", problem);
  return problem ? undefined : d;
}

/**
 * One tier at `tv`. Decisions: `up_to` is a decimal (quantities may be fractional), > 0 and
 * strictly greater than the previous tier's; every tier but the last has one and the last has
 * none (no bound), so every quantity falls in exactly one tier; `unit_amount` is required
 * (0 for a free tier), `flat_amount` optional.
 */
function checkTier(t: TierInput, j: number, last: boolean, previous: Decimal | null | undefined, tv: Violations): { tier?: Tier; upTo: Decimal | null | undefined } {
  let upTo: Decimal | null | undefined = null;
  const given = t.upTo !== undefined && t.upTo !== "";
  if (last && given) {
    tv.add("up_to", "must be null on the last tier (it has no bound)");
    upTo = undefined;
  } else if (!last && !given) {
    tv.add("up_to", "is required on every tier but the last");
    upTo = undefined;
  } else if (given) {
    upTo = checkBound(t.upTo as string, tv);
    if (upTo && previous && upTo.lte(previous)) {
      tv.add("up_to", `must be greater than tiers[${j - 1}].up_to (${formatDecimal(previous)})`);
      upTo = undefined;
    }
  }
  const unitAmount = checkAmount(t.unitAmount, tv.at("unit_amount"));
  const flatAmount = t.flatAmount === undefined ? null : checkAmount(t.flatAmount, tv.at("flat_amount"));
  if (upTo === undefined || !unitAmount || flatAmount === undefined) return { upTo };
  return { tier: { upTo: upTo === null ? null : formatDecimal(upTo), unitAmount, flatAmount }, upTo };
}

/** A tiered price at `v`: a mode, 1 to MAX_TIERS tiers, every amount in one currency (the first unit amount's). */
export function checkTiered(input: PriceInput, v: Violations): Price | undefined {
  const mode = input.tiersMode;
  let ok = true;
  if (mode === undefined || mode === "") {
    v.add("tiers_mode", "is required for a tiered price: graduated or volume");
    ok = false;
  } else if (mode !== "graduated" && mode !== "volume") {
    v.add("tiers_mode", "must be graduated or volume");
    ok = false;
  }
  const raw = input.tiers ?? [];
  if (raw.length === 0) {
    v.add("tiers", "is required for a tiered price: at least one tier, the last with up_to null");
    return undefined;
  }
  if (raw.length > MAX_TIERS) {
    v.add("tiers", `must have at most ${MAX_TIERS} tiers`);
    return undefined;
  }
  const tiers: Tier[] = [];
  let previous: Decimal | null | undefined = null;
  raw.forEach((t, j) => {
    const checked = checkTier(t, j, j === raw.length - 1, previous, v.at("tiers").at(j));
    // After a bad bound, the next tier is compared with the last good one.
    if (checked.upTo) previous = checked.upTo;
    if (checked.tier) tiers.push(checked.tier);
    else ok = false;
  });
  const currency = tiers[0]?.unitAmount.currency;
  tiers.forEach((t, j) => {
    const amounts: [string, Money | null][] = [
      ["unit_amount", t.unitAmount],
      ["flat_amount", t.flatAmount],
    ];
    for (const [field, m] of amounts) {
      if (m && m.currency !== currency) {
        v.at("tiers").at(j).at(field).add("currency_code", `must be ${currency}: every amount of a price uses one currency`);
        ok = false;
      }
    }
  });
  if (!ok || currency === undefined) return undefined;
  return { kind: "tiered", currency, mode: mode as TiersMode, tiers };
}

/**
 * A percentage price at `v`: `percent` 0 to 100 with at most 12 decimals; an optional fee per
 * counted event, whose currency is the price's. Without a fee the currency is "" here, and the
 * rate card's other prices name it (see checkRates).
 */
export function checkPercentage(input: PriceInput, v: Violations): Price | undefined {
  let percent: string | undefined;
  const raw = input.percent;
  if (raw === undefined || raw === "") v.add("percent", "is required for a percentage price: 0 to 100, e.g. 2.9");
  else {
    const d = parseDecimal(raw);
    if (!d) v.add("percent", "must be a decimal number");
    else if (d.lt(0) || d.gt(100)) v.add("percent", "must be between 0 and 100");
    else if (d.decimalPlaces() > SCALE) v.add("percent", `must have at most ${SCALE} digits after the decimal point`);
    else percent = formatDecimal(d);
  }
  const fee = input.fixedAmountPerEvent === undefined ? null : checkAmount(input.fixedAmountPerEvent, v.at("fixed_amount_per_event"));
  if (percent === undefined || fee === undefined) return undefined;
  return { kind: "percentage", currency: fee?.currency ?? "", percent, fixedPerEvent: fee };
}
