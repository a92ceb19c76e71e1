/**
 * Instants (DESIGN §4): one strict parser for every instant the service reads as text, and one
 * supported range for every instant it accepts, however it arrives (an RFC 3339 string, or a
 * google.protobuf.Timestamp's seconds and nanos over gRPC/Connect).
 *
 * Accepted text is RFC 3339 `date-time` (section 5.6):
 *   YYYY-MM-DD ( "T" | "t" | " " ) hh:mm:ss [ "." 1*DIGIT ] ( "Z" | "z" | ("+"|"-") hh:mm )
 * - the calendar day is checked exactly (leap years, month lengths): 2026-02-30 is refused,
 *   never rolled over to March;
 * - hours 00–23, minutes and seconds 00–59 (a leap second, :60, is refused);
 * - offsets -23:59 to +23:59 (-00:00 is UTC);
 * - one relaxation, kept from the usage-event timestamp's earlier behaviour and applied to every
 *   instant field alike: a date-time without an offset is UTC (what a naive Python datetime's
 *   isoformat() sends);
 * - a date alone (2026-01-31) is refused on every field: the spec has no date-only field;
 * - precision is milliseconds: further fraction digits are truncated (never rounded, so
 *   23:59:59.9995 stays in its second, its day and its year).
 * The supported range is 2000-01-01T00:00:00Z ≤ t < 2200-01-01T00:00:00Z.
 */
import type { Violations } from "./errors.js";

/** The first supported instant, 2000-01-01T00:00:00Z (inclusive). */
export const MIN_INSTANT = Date.UTC(2000, 0, 1);
/** The end of the supported range, 2200-01-01T00:00:00Z (exclusive). */
export const END_INSTANT = Date.UTC(2200, 0, 1);

export const FORMAT_PROBLEM = "must be an RFC 3339 date-time, such as 2026-01-31T12:00:00Z";
export const RANGE_PROBLEM = "must be from 2000-01-01T00:00:00Z (inclusive) to 2200-01-01T00:00:00Z (exclusive)";

/**
 * An instant as the API writes it everywhere (protobuf-es's Timestamp JSON): RFC 3339 in UTC, with
 * milliseconds only when there are any (2026-01-31T12:00:00Z, 2026-01-31T12:00:00.250Z).
 */
export function formatInstant(d: Date): string {
  return d.toISOString().replace(".000Z", "Z");
}

export type Parsed = { ok: true; ms: number } | { ok: false; problem: string };

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?$/;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

const MS_PER_DAY = 86_400_000;

function isLeap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

export function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeap(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Days from 1970-01-01 to the proleptic Gregorian date (month 1–12), exactly, for any year. */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const mp = (month + 9) % 12;
  const doy = Math.floor((153 * mp + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

const pad = (n: number) => String(n).padStart(2, "0");

/**
 * Reads an RFC 3339 date-time (see above) as milliseconds since the epoch, without the range
 * check; the problem in words when it is not one.
 */
export function parseRfc3339(text: string): Parsed {
  const m = DATE_TIME.exec(text);
  if (!m) {
    if (DATE_ONLY.test(text)) return { ok: false, problem: `${FORMAT_PROBLEM}; a date alone is not accepted (add a time of day, such as ${text}T00:00:00Z)` };
    return { ok: false, problem: FORMAT_PROBLEM };
  }
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = m[7] ?? "";
  if (month < 1 || month > 12) return { ok: false, problem: `${FORMAT_PROBLEM}: there is no month ${pad(month)}` };
  const days = daysInMonth(year, month);
  if (day < 1 || day > days) {
    return { ok: false, problem: `${FORMAT_PROBLEM}: ${m[1]}-${m[2]}-${m[3]} is not a calendar date (${MONTHS[month - 1]} ${m[1]} has ${days} days)` };
  }
  if (hour > 23) return { ok: false, problem: `${FORMAT_PROBLEM}: the hour must be 00 to 23` };
  if (minute > 59) return { ok: false, problem: `${FORMAT_PROBLEM}: the minute must be 00 to 59` };
  if (second > 59) return { ok: false, problem: `${FORMAT_PROBLEM}: the second must be 00 to 59 (leap seconds are not accepted)` };
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return { ok: false, problem: `${FORMAT_PROBLEM}: the offset must be from -23:59 to +23:59` };
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  // Milliseconds: the first three digits of the fraction; the rest are dropped, never rounded.
  const millis = Number(fraction.slice(0, 3).padEnd(3, "0"));
  const local = daysFromCivil(year, month, day) * MS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000 + millis;
  return { ok: true, ms: local - offsetMinutes * 60_000 };
}

/** Whether an instant (milliseconds since the epoch) is in the supported range. */
export function inRange(ms: number): boolean {
  return Number.isInteger(ms) && ms >= MIN_INSTANT && ms < END_INSTANT;
}

/** Parses and range-checks: milliseconds, or the problem in words. */
export function parseInstant(text: string): Parsed {
  const p = parseRfc3339(text);
  if (!p.ok) return p;
  return inRange(p.ms) ? p : { ok: false, problem: RANGE_PROBLEM };
}

/** An instant given as text: its milliseconds, or undefined with the violation recorded at `field`. */
export function readInstant(text: string, v: Violations, field: string): number | undefined {
  const p = parseInstant(text);
  if (p.ok) return p.ms;
  v.add(field, p.problem);
  return undefined;
}

/**
 * An instant that arrived as a Date (a google.protobuf.Timestamp): itself when it is a valid time
 * in the supported range, else undefined with the violation recorded at `field`. Left out
 * (undefined) stays undefined and records nothing: the caller says whether it is required.
 */
export function checkInstant(d: Date | undefined, v: Violations, field: string): Date | undefined {
  if (d === undefined) return undefined;
  const ms = d.getTime();
  if (Number.isNaN(ms)) {
    v.add(field, "must be a valid time (a google.protobuf.Timestamp with nanos from 0 to 999,999,999)");
    return undefined;
  }
  if (!inRange(ms)) {
    v.add(field, RANGE_PROBLEM);
    return undefined;
  }
  return d;
}

/** Whether a Date is in the supported range (for instants the service derives itself). */
export function isSupported(d: Date): boolean {
  return inRange(d.getTime());
}
