/**
 * SQLite in WAL mode: a transaction that read, then writes after another connection (a second
 * process on the file, the CLI, a test's fixtures) committed since its snapshot fails with
 * SQLITE_BUSY_SNAPSHOT ("database is locked"), which no waiting cures. Sql.transaction runs it
 * again, as it does on SQLITE_BUSY, rather than the caller hearing a 500 (an ingest batch did).
 */
import test from "ava";
import { createDatabase } from "../../src/db/datasource.js";
import { createTestDatabase, withDatabase } from "../helpers/db.js";

test("sqlite: a transaction whose snapshot another connection's commit made stale is run again, and commits", async (t) => {
  const tdb = await createTestDatabase("sqlite");
  t.teardown(() => tdb.drop());
  await withDatabase(tdb.url, async (db) => {
    const other = await createDatabase(tdb.url, { poolSize: 1 });
    await other.dataSource.initialize();
    try {
      await db.sql.query("CREATE TABLE busy_snapshot (n INTEGER PRIMARY KEY)", []);
      let runs = 0;
      await db.sql.transaction(async (em) => {
        runs++;
        await em.query("SELECT count(*) AS c FROM busy_snapshot");
        // Another connection commits after this transaction read: its snapshot is stale.
        if (runs === 1) await other.dataSource.query("INSERT INTO busy_snapshot (n) VALUES (1)");
        await em.query("INSERT INTO busy_snapshot (n) VALUES (2)");
      });
      t.is(runs, 2, "run again once");
      t.deepEqual(
        ((await db.sql.query("SELECT n FROM busy_snapshot ORDER BY n", [])) as { n: number }[]).map((r) => r.n),
        [1, 2],
      );
    } finally {
      await other.dataSource.destroy();
    }
  });
});
