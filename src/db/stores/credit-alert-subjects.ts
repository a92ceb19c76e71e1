/** Which subjects the scheduler evaluates credit alerts for: those with credit settings or credit grants, on one clock. */
import type { AlertSubject, AlertSubjects, CreditSubject } from "../../billing/credits/runs.js";
import type { Sql } from "../sql.js";

export class SqlAlertSubjects implements AlertSubjects {
  constructor(private readonly sql: Sql) {}

  /** Whether any subject of the environment has credit settings or an active grant. */
  async environmentHasCredit(environmentId: string): Promise<boolean> {
    const rows = await this.sql.query<unknown[]>(
      "SELECT 1 AS x FROM credit_settings WHERE environment_id = ? UNION ALL SELECT 1 AS x FROM credit_grants WHERE environment_id = ? AND status = 'active' LIMIT 1",
      [environmentId, environmentId],
    );
    return rows.length > 0;
  }

  /**
   * Of the subjects these keys (IDs or external IDs) name, those with credit settings or an
   * active grant: one statement for a batch of ingested usage.
   */
  async withCredit(environmentId: string, keys: readonly string[]): Promise<CreditSubject[]> {
    if (keys.length === 0) return [];
    const marks = keys.map(() => "?").join(", ");
    const rows = await this.sql.query<{ id: string; test_clock_id: string | null }[]>(
      `SELECT j.id, j.test_clock_id FROM subjects j
       WHERE j.environment_id = ? AND j.deleted_at IS NULL AND (j.id IN (${marks}) OR j.external_id_key IN (${marks}))
         AND (EXISTS (SELECT 1 FROM credit_settings c WHERE c.environment_id = j.environment_id AND c.subject_id = j.id)
           OR EXISTS (SELECT 1 FROM credit_grants g WHERE g.environment_id = j.environment_id AND g.subject_id = j.id AND g.status = 'active'))`,
      [environmentId, ...keys, ...keys],
    );
    return rows.map((r) => ({ environmentId, subjectId: r.id, testClockId: r.test_clock_id }));
  }

  /**
   * Subjects on real time (clockId null) or one test clock with settings or a grant that still
   * has something left (active), by subject ID after `afterId`.
   */
  async after(clockId: string | null, afterId: string, limit: number): Promise<AlertSubject[]> {
    const onClock = clockId === null ? "j.test_clock_id IS NULL" : "j.test_clock_id = ?";
    const clockParams = clockId === null ? [] : [clockId];
    const rows = await this.sql.query<{ environment_id: string; subject_id: string }[]>(
      `SELECT DISTINCT x.environment_id, x.subject_id FROM (
         SELECT environment_id, subject_id FROM credit_settings
         UNION SELECT environment_id, subject_id FROM credit_grants WHERE status = 'active'
       ) x JOIN subjects j ON j.id = x.subject_id AND j.environment_id = x.environment_id
       WHERE ${onClock} AND j.deleted_at IS NULL AND x.subject_id > ? ORDER BY x.subject_id LIMIT ?`,
      [...clockParams, afterId, limit],
    );
    return rows.map((r) => ({ environmentId: r.environment_id, subjectId: r.subject_id }));
  }
}
