/**
 * Helpers for the few hot paths written as plain SQL (TypeORM's query builder costs about
 * 0.3 ms of CPU per query, more than the query itself). Plain SQL here uses only `?`
 * placeholders and unquoted, non-reserved identifiers, so it runs unchanged on MySQL and SQLite.
 */
import { type FirstSeenAnchor, anchorsOfJson } from "../billing/subscriptions/first-seen.js";
import { STORABLE_END, STORABLE_FROM, storableTime } from "./columns.js";
import type { Sql } from "./sql.js";

/** Only a key shaped like a subject ID can be one; any key can be an external ID. */
export function mayBeSubjectId(key: string): boolean {
  return key.startsWith("subj_");
}

/**
 * The live subject of an environment whose ID, or else whose external ID, is `key`, as a row
 * of `columns`. An ID match wins (an external ID may look like another subject's ID); only a key
 * shaped like an ID can be one, so other keys go straight to the external ID, and each lookup is
 * one unique key (an `id = ? OR external_id_key = ?` query ran as a slower index merge).
 */
export async function findSubjectRow<T>(sql: Sql, environmentId: string, key: string, columns: string): Promise<T | undefined> {
  const run = (where: string) => sql.query<T[]>(`SELECT ${columns} FROM subjects WHERE ${where} LIMIT 1`, [environmentId, key]);
  const byId = mayBeSubjectId(key) ? (await run("environment_id = ? AND id = ? AND deleted_at IS NULL"))[0] : undefined;
  return byId ?? (await run("environment_id = ? AND external_id_key = ?"))[0];
}

/**
 * A time as both stores hold DATETIME(3): `2026-01-31 12:00:00.000`, UTC. Throws for a time no
 * store can hold and give back (see storableTime): never a negative or five-digit year.
 */
export function dbTime(d: Date): string {
  const iso = storableTime(d).toISOString(); // 2026-01-31T12:00:00.000Z
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
}

const DAY = 86_400_000;
/** Recent days' `2026-01-31 ` prefixes: an ingest's times fall on a few dozen days. */
const dayPrefixes = new Map<number, string>();
const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const pad3 = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * dbTime of a time in epoch milliseconds, without a Date and its ISO text per call (the ingest
 * path writes three of them per event); the same text, and the same refusal of an unstorable time.
 */
export function dbTimeOfMs(ms: number): string {
  if (!(ms >= STORABLE_FROM && ms < STORABLE_END) || !Number.isInteger(ms)) return dbTime(new Date(ms));
  const day = Math.floor(ms / DAY);
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    prefix = `${new Date(day * DAY).toISOString().slice(0, 10)} `;
    if (dayPrefixes.size >= 4096) dayPrefixes.clear();
    dayPrefixes.set(day, prefix);
  }
  let rest = ms - day * DAY;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  return `${prefix}${pad2(h)}:${pad2(m)}:${pad2(s)}.${pad3(rest - s * 1000)}`;
}

/** A stored time back to a Date: MySQL (timezone Z) gives Dates, SQLite gives UTC text. */
export function fromDbTime(v: unknown): Date {
  if (v instanceof Date) return v;
  return new Date(`${String(v).replace(" ", "T")}Z`);
}

export function fromDbTimeOrNull(v: unknown): Date | null {
  return v === null || v === undefined ? null : fromDbTime(v);
}

export function fromJsonText<T>(v: unknown): T {
  return (typeof v === "string" ? JSON.parse(v) : v) as T;
}

/** A first-seen anchor as kept in JSON: its instant as ISO 8601 text, with the multiplier its earlier windows were billed at when known (else the text alone, as kept before it was). */
export type StoredAnchor = string | { at: string; billedMultiplier: string };

/** A usage window's first-seen anchors by key as kept in JSON (StoredAnchor). */
export function isoAnchors(a: Record<string, FirstSeenAnchor>): Record<string, StoredAnchor> {
  return Object.fromEntries(Object.entries(a).map(([k, x]) => [k, x.billedMultiplier === undefined ? x.at.toISOString() : { at: x.at.toISOString(), billedMultiplier: x.billedMultiplier }]));
}

/** First-seen anchors read back from JSON (see isoAnchors; an instant alone: no multiplier kept). */
export function anchorsOfIso(a: Record<string, StoredAnchor>): Record<string, FirstSeenAnchor> {
  return anchorsOfJson(a);
}
