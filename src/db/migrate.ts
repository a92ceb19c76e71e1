/**
 * Running the migrations with progress (one report per migration applied, done of total), and
 * asking whether any is pending (readiness, when the server does not run them itself).
 */
import type { DataSource } from "typeorm";

export interface MigrationApplied {
  name: string;
  /** Migrations applied so far in this run, of `total` pending when it started. */
  done: number;
  total: number;
  ms: number;
}

/** Runs the pending migrations, each in its own transaction; returns their names. */
export async function runMigrations(dataSource: DataSource, onApplied?: (m: MigrationApplied) => void, onStart?: (pending: number) => void): Promise<string[]> {
  const known = dataSource.migrations;
  let applied = 0;
  try {
    const [row] = (await dataSource.query(`SELECT COUNT(*) AS n FROM ${dataSource.options.migrationsTableName ?? "migrations"}`)) as { n: unknown }[];
    applied = Number(row?.n ?? 0);
  } catch {
    // No table yet: a new database, every migration is pending.
  }
  const total = Math.max(0, known.length - applied);
  if (total > 0) onStart?.(total);
  let done = 0;
  if (onApplied) {
    for (const m of known) {
      const up = m.up.bind(m);
      m.up = async (runner) => {
        const t0 = Date.now();
        await up(runner);
        done++;
        onApplied({ name: m.name ?? m.constructor.name, done, total, ms: Date.now() - t0 });
      };
    }
  }
  const ran = await dataSource.runMigrations({ transaction: "each" });
  return ran.map((r) => r.name);
}

/** Whether a migration the code knows is not applied yet. */
export async function migrationsPending(dataSource: DataSource): Promise<boolean> {
  return dataSource.showMigrations();
}
