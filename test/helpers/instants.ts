/**
 * fast-check arbitraries for instants: a millisecond in the supported range (boundaries often)
 * and the many RFC 3339 texts that denote it (offsets, separators, fraction lengths, z or Z, no
 * offset at all), with digits past the millisecond that must be truncated.
 */
import fc from "fast-check";
import { END_INSTANT, MIN_INSTANT } from "../../src/billing/time.js";

export const inRangeMs: fc.Arbitrary<number> = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: MIN_INSTANT, max: END_INSTANT - 1 }) },
  { weight: 1, arbitrary: fc.constantFrom(MIN_INSTANT, MIN_INSTANT + 1, END_INSTANT - 1, END_INSTANT - 1000, Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(2100, 1, 28, 12)) },
);

export interface Style {
  /** Minutes east of UTC, or null for no offset at all (read as UTC). */
  offset: number | null;
  /** How a zero offset is written: Z, z, +00:00 or -00:00. */
  zero: "Z" | "z" | "+00:00" | "-00:00";
  separator: "T" | "t" | " ";
  /** Fraction digits written (at least 3 when the millisecond is not 0). */
  digits: number;
  /** Digit characters written past the millisecond (truncated by the reader). */
  extra: string;
}

export const style: fc.Arbitrary<Style> = fc.record({
  offset: fc.oneof(fc.constant(null), fc.constant(0), fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }), fc.constantFrom(60, -300, 330, 345, -(23 * 60 + 59), 23 * 60 + 59)),
  zero: fc.constantFrom("Z" as const, "z" as const, "+00:00" as const, "-00:00" as const),
  separator: fc.constantFrom("T" as const, "t" as const, " " as const),
  digits: fc.integer({ min: 0, max: 9 }),
  extra: fc.string({ unit: fc.constantFrom(..."0123456789"), maxLength: 9 }),
});

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** The instant `ms` written as RFC 3339 text in the given style. */
export function format(ms: number, s: Style): string {
  const offset = s.offset ?? 0;
  const local = new Date(ms + offset * 60_000);
  const date = `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}`;
  const time = `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}`;
  const milli = pad(local.getUTCMilliseconds(), 3);
  const digits = milli === "000" ? s.digits : Math.max(3, s.digits);
  let fraction = digits === 0 ? "" : `.${`${milli}000000`.slice(0, Math.min(digits, 9)).padEnd(digits, "0")}`;
  if (digits >= 3) fraction += s.extra;
  const zone = s.offset === null ? "" : offset === 0 ? s.zero : `${offset < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
  return `${date}${s.separator}${time}${fraction}${zone}`;
}
