/** Wire ⇄ domain helpers shared by every converter. */
import { type DescMessage, type Message, type MessageInitShape, type MessageShape, create, toJson } from "@bufbuild/protobuf";
import { type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { restJson, stringifyRest } from "../json-out.js";

export const ts = timestampFromDate;

/** A billing.v1.Amount: a currency and an exact decimal string. */
export const amount = (currencyCode: string, value: string) => ({ currencyCode, value });

/**
 * A message from a domain object whose fields have the message's names (fields that differ are
 * spread over it). create() reads only the message's own fields and leaves null ones unset, as it
 * does undefined ones, so domain-only fields are ignored (one that must not go out, as a secret, is
 * overridden with undefined); Dates at the top level become Timestamps, nested ones must be given.
 */
export function toPb<D extends DescMessage>(schema: D, domain: object): MessageShape<D> {
  const init: Record<string, unknown> = {};
  for (const f of schema.fields) {
    const v = (domain as Record<string, unknown>)[f.localName];
    init[f.localName] = v instanceof Date ? timestampFromDate(v) : v;
  }
  return create(schema, init as MessageInitShape<D>);
}

/** A domain page as a list response: its items converted, under the response's `field`, and whether more follow. */
export function pageOf<K extends string, T, R>(page: { items: T[]; hasMore: boolean }, field: K, convert: (item: T) => R): { hasMore: boolean } & Record<K, R[]> {
  return { hasMore: page.hasMore, [field]: page.items.map((item) => convert(item)) } as { hasMore: boolean } & Record<K, R[]>;
}

/** A message's JSON text as the REST API writes it: an event's data is its resource as a GET returns it. */
export function restJsonText<D extends DescMessage>(schema: D, msg: MessageShape<D>): string {
  const out = restJson(schema, toJson(schema, msg, { useProtoFieldName: true, alwaysEmitImplicit: true }) as never);
  return stringifyRest(out.json, out.rawNumbers);
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
