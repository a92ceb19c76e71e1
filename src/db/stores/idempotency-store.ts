/**
 * Storage of idempotency keys (DESIGN §12). The primary key (environment, key) is what makes two
 * calls with one key meet: each claim inserts the row or finds it, in one transaction, and the
 * decision (billing/idempotency.ts decide) is taken on the row as locked there.
 */
import { randomBytes } from "node:crypto";
import {
  type ClaimResult,
  IDEMPOTENCY_KEY_TTL_MS,
  IDEMPOTENCY_LEASE_MS,
  type IdempotencyClaim,
  type IdempotencyKeyState,
  type IdempotencyOutcome,
  type IdempotencyStore,
  decide,
} from "../../billing/idempotency.js";
import { changeScope } from "../change-scope.js";
import { dbTime, fromDbTime } from "../raw.js";
import type { Sql } from "../sql.js";

interface Row {
  fingerprint: string;
  rpc: string;
  state: string;
  claim_token: string;
  changed: unknown;
  locked_until: unknown;
  expires_at: unknown;
  outcome: unknown;
}

function state(r: Row): IdempotencyKeyState {
  return {
    fingerprint: r.fingerprint,
    rpc: r.rpc,
    state: r.state === "done" ? "done" : "running",
    claimToken: r.claim_token,
    changed: Number(r.changed) === 1,
    lockedUntil: fromDbTime(r.locked_until),
    expiresAt: fromDbTime(r.expires_at),
    outcome: typeof r.outcome === "string" ? (JSON.parse(r.outcome) as IdempotencyOutcome) : null,
  };
}

export class SqlIdempotencyStore implements IdempotencyStore {
  constructor(private readonly sql: Sql) {}

  async claim(environmentId: string, key: string, fingerprint: string, rpc: string, now: Date): Promise<ClaimResult> {
    const token = randomBytes(16).toString("hex");
    const lockedUntil = new Date(now.getTime() + IDEMPOTENCY_LEASE_MS);
    const expiresAt = new Date(now.getTime() + IDEMPOTENCY_KEY_TTL_MS);
    const mysql = this.sql.dialect === "mysql";
    return this.sql.transaction(async (em) => {
      // Insert-or-keep first, then read under a row lock: a second claim of the same key waits on
      // the first's row lock (never a gap lock both would hold) and then sees its row.
      await em.query(
        "INSERT INTO idempotency_keys (environment_id, idem_key, fingerprint, rpc, state, claim_token, changed, locked_until, outcome, created_at, expires_at) " +
          `VALUES (?, ?, ?, ?, 'running', ?, 0, ?, NULL, ?, ?) ${mysql ? "ON DUPLICATE KEY UPDATE idem_key = idem_key" : "ON CONFLICT (environment_id, idem_key) DO NOTHING"}`,
        [environmentId, key, fingerprint, rpc, token, dbTime(lockedUntil), dbTime(now), dbTime(expiresAt)],
      );
      const rows: Row[] = await em.query(
        `SELECT fingerprint, rpc, state, claim_token, changed, locked_until, expires_at, outcome FROM idempotency_keys WHERE environment_id = ? AND idem_key = ?${mysql ? " FOR UPDATE" : ""}`,
        [environmentId, key],
      );
      const row = rows[0];
      if (row === undefined) throw new Error("idempotency key row vanished inside its transaction");
      if (row.claim_token === token) return { kind: "claimed", claim: { environmentId, key, token } };
      const decision = decide(state(row), fingerprint, now);
      if (decision.kind !== "claim") return decision;
      // Expired, or a dead claim that changed nothing: start afresh under this call.
      await em.query(
        "UPDATE idempotency_keys SET fingerprint = ?, rpc = ?, state = 'running', claim_token = ?, changed = 0, locked_until = ?, outcome = NULL, created_at = ?, expires_at = ? WHERE environment_id = ? AND idem_key = ?",
        [fingerprint, rpc, token, dbTime(lockedUntil), dbTime(now), dbTime(expiresAt), environmentId, key],
      );
      return { kind: "claimed", claim: { environmentId, key, token } };
    });
  }

  async within<T>(claim: IdempotencyClaim, fn: () => Promise<T>): Promise<T> {
    const scope = { ...claim, marked: false, ended: false };
    try {
      return await changeScope.run(scope, fn);
    } finally {
      scope.ended = true;
    }
  }

  async complete(claim: IdempotencyClaim, outcome: IdempotencyOutcome, now: Date): Promise<void> {
    await this.sql.transaction((em) =>
      em.query("UPDATE idempotency_keys SET state = 'done', outcome = ?, locked_until = ? WHERE environment_id = ? AND idem_key = ? AND claim_token = ?", [
        JSON.stringify(outcome),
        dbTime(now),
        claim.environmentId,
        claim.key,
        claim.token,
      ]),
    );
  }

  async release(claim: IdempotencyClaim): Promise<boolean> {
    return this.sql.transaction(async (em) => {
      const rows: { changed: unknown }[] = await em.query(
        `SELECT changed FROM idempotency_keys WHERE environment_id = ? AND idem_key = ? AND claim_token = ?${this.sql.dialect === "mysql" ? " FOR UPDATE" : ""}`,
        [claim.environmentId, claim.key, claim.token],
      );
      if (rows[0] !== undefined && Number(rows[0].changed) === 1) {
        // The change stands: never run the call again. The claim lapses now, so a retry hears
        // IDEMPOTENCY_OUTCOME_LOST at once rather than IN_USE until the lease ends.
        await em.query("UPDATE idempotency_keys SET locked_until = ? WHERE environment_id = ? AND idem_key = ? AND claim_token = ?", [dbTime(new Date()), claim.environmentId, claim.key, claim.token]);
        return false;
      }
      await em.query("DELETE FROM idempotency_keys WHERE environment_id = ? AND idem_key = ? AND claim_token = ?", [claim.environmentId, claim.key, claim.token]);
      return true;
    });
  }

  async sweep(now: Date, limit: number): Promise<number> {
    const n = Math.max(1, Math.floor(limit));
    return this.sql.transaction(async (em) => {
      const result: unknown =
        this.sql.dialect === "mysql"
          ? await em.query(`DELETE FROM idempotency_keys WHERE expires_at <= ? LIMIT ${n}`, [dbTime(now)])
          : await em.query(`DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? LIMIT ${n})`, [dbTime(now)]);
      const affected = (result as { affectedRows?: number } | undefined)?.affectedRows;
      if (typeof affected === "number") return affected;
      const changes: { n: number }[] = await em.query("SELECT changes() AS n");
      return Number(changes[0]?.n ?? 0);
    });
  }
}
