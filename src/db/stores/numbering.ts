/**
 * Invoice and credit-note numbers (DESIGN §15): one row per (environment, kind) holds the last
 * number given. A finalizing transaction bumps it by how many it needs, which locks the row until
 * commit: numbers are gapless (a rollback gives them back with everything else), unique (the
 * unique key on invoices (environment_id, number) would refuse a repeat), and given in commit order.
 */
import type { EntityManager } from "typeorm";
import type { Dialect } from "../columns.js";

export type NumberKind = "invoice" | "credit_note";

/** Takes the next `count` numbers of `kind` in the environment: its prefix and the first of them. */
export async function nextNumbers(em: EntityManager, dialect: Dialect, environmentId: string, kind: NumberKind, count: number): Promise<{ prefix: string; first: number }> {
  // The prefix first (a plain read: a changed prefix applies from the next number on).
  const env = (await em.query("SELECT invoice_prefix AS p FROM environments WHERE id = ?", [environmentId])) as { p: string }[];
  // The environment's rows exist from its creation (auth-store.ts; migration 26 for older ones):
  // a plain UPDATE locks that row only. The upsert below is the fallback for a row that is missing.
  if (dialect === "mysql") {
    const res = (await em.query("UPDATE invoice_sequences SET last_number = last_number + ? WHERE environment_id = ? AND kind = ?", [count, environmentId, kind])) as { affectedRows?: number };
    if ((res.affectedRows ?? 0) > 0) return { prefix: env[0]?.p ?? "INV", first: (await lastNumber(em, environmentId, kind)) - count + 1 };
  }
  const upsert =
    dialect === "mysql"
      ? "INSERT INTO invoice_sequences (environment_id, kind, last_number) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE last_number = last_number + VALUES(last_number)"
      : "INSERT INTO invoice_sequences (environment_id, kind, last_number) VALUES (?, ?, ?) ON CONFLICT (environment_id, kind) DO UPDATE SET last_number = last_number + excluded.last_number";
  await em.query(upsert, [environmentId, kind, count]);
  return { prefix: env[0]?.p ?? "INV", first: (await lastNumber(em, environmentId, kind)) - count + 1 };
}

/** The last number given of `kind` in the environment, as this transaction sees it (after its own bump). */
async function lastNumber(em: EntityManager, environmentId: string, kind: NumberKind): Promise<number> {
  const [row] = (await em.query("SELECT last_number AS n FROM invoice_sequences WHERE environment_id = ? AND kind = ?", [environmentId, kind])) as { n: unknown }[];
  return Number(row?.n);
}

/** The number the next `kind` will get (a read; nothing is taken). */
export async function peekNextNumber(em: EntityManager, environmentId: string, kind: NumberKind): Promise<number> {
  const [row] = (await em.query("SELECT last_number AS n FROM invoice_sequences WHERE environment_id = ? AND kind = ?", [environmentId, kind])) as { n: unknown }[];
  return row ? Number(row.n) + 1 : 1;
}
