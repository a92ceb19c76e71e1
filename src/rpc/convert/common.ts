/** Wire ⇄ domain helpers shared by every converter. */
import type { Message } from "@bufbuild/protobuf";
import { type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";

export function ts(date: Date): Timestamp {
  return timestampFromDate(date);
}

/** Seconds a Date can hold (±8.64e12 s); beyond them no Date is made. */
const DATE_LIMIT_SECONDS = 8_640_000_000_000n;

/**
 * A google.protobuf.Timestamp as a Date, truncated to the millisecond (protobuf-es's
 * timestampDate rounds nanos, which can carry 23:59:59.9995 into the next second, day and year).
 * Left out stays undefined; seconds or nanos that are no time (nanos outside 0–999,999,999,
 * seconds beyond what a Date holds) become an invalid Date, which the domain refuses with the
 * field's path along with the range check (src/billing/time.ts).
 */
export function instantOf(t: Timestamp | undefined): Date | undefined {
  if (!t) return undefined;
  const seconds = BigInt(t.seconds);
  if (!Number.isInteger(t.nanos) || t.nanos < 0 || t.nanos > 999_999_999 || seconds > DATE_LIMIT_SECONDS || seconds < -DATE_LIMIT_SECONDS) return new Date(Number.NaN);
  return new Date(Number(seconds) * 1000 + Math.floor(t.nanos / 1_000_000));
}

/**
 * Whether a binary request carries field number `no`, which its message no longer has (reserved):
 * a client generated from an older contract, whose field would otherwise be dropped unread.
 */
export function carriesRetired(msg: Message, no: number): boolean {
  return msg.$unknown?.some((f) => f.no === no) ?? false;
}

/** What a request carrying a retired field is told: the field, its old form and its new one. */
export const retired = (oldNo: number, oldType: string, newNo: number, newType: string) =>
  `was field ${oldNo} (${oldType}) in an older contract and is now field ${newNo} (${newType}): regenerate this client from the current contract`;
