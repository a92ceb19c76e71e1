/**
 * The credit alert state rows (credit_alert_state: one per subject, currency and kind; DESIGN §14),
 * written so that evaluators of the same crossing on several servers never deadlock:
 *
 * - before a move below, the row is made to exist, not below, by one INSERT whose primary key
 *   settles a race (nothing when the row is there, whatever it holds), as a statement of its own
 *   outside any transaction (`ensureAlertState`);
 * - the move is then one conditional UPDATE of that existing row in the transaction that writes
 *   its event (`setAlertState`). On MariaDB an UPDATE that matches an existing row by its primary
 *   key locks that record alone: concurrent evaluators queue behind the first one's lock, then
 *   find the row already moved and change nothing.
 *
 * The first write of a row used to be made inside that transaction: an UPDATE that found no row,
 * then an INSERT. On MariaDB (REPEATABLE READ) an UPDATE of an absent key locks the gap where the
 * key would go, and gap locks never conflict with one another, so every evaluator got one; each
 * INSERT's insert intention then waited for the others' gap locks: a deadlock between any two
 * evaluators, for rows side by side in the key (a subject's kinds, an environment's subjects) as
 * much as for the same row, which several evaluations at once could retry past their limit.
 */
import type { EntityManager } from "typeorm";
import type { AlertState } from "../../billing/credits/ports.js";
import { dbTime } from "../raw.js";
import type { Sql } from "../sql.js";
import { changed } from "./outbox.js";

const COLUMNS = "(environment_id, subject_id, currency, kind, below, changed_at)";

/** Writes `s`'s row, not below, when it has none: one statement, outside any transaction. */
export async function ensureAlertState(sql: Sql, s: AlertState): Promise<void> {
  const settle = sql.dialect === "mysql" ? "ON DUPLICATE KEY UPDATE kind = kind" : "ON CONFLICT (environment_id, subject_id, currency, kind) DO NOTHING";
  await sql.query(`INSERT INTO credit_alert_state ${COLUMNS} VALUES (?, ?, ?, ?, 0, ?) ${settle}`, [s.environmentId, s.subjectId, s.currency, s.kind, dbTime(s.changedAt)]);
}

/**
 * Moves the row to `s.below` when it is not there yet (in `em`'s transaction); true when this
 * statement moved it. A move below counts the crossing (crossings + 1) in the same statement; a
 * move back above with `crossing` only changes the row still at that crossing. A row that is not
 * there is left so (not below, as it counts).
 */
export async function setAlertState(em: EntityManager, s: AlertState, crossing?: number): Promise<boolean> {
  const below = s.below ? 1 : 0;
  const count = s.below ? ", crossings = crossings + 1" : "";
  const only = !s.below && crossing !== undefined ? " AND crossings = ?" : "";
  const n = await changed(em, `UPDATE credit_alert_state SET below = ?, changed_at = ?${count} WHERE environment_id = ? AND subject_id = ? AND currency = ? AND kind = ? AND below <> ?${only}`, [
    below,
    dbTime(s.changedAt),
    s.environmentId,
    s.subjectId,
    s.currency,
    s.kind,
    below,
    ...(only ? [crossing] : []),
  ]);
  return n > 0;
}
