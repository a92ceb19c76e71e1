/**
 * The embedded store's COMMIT work off the event loop (src/db/sqlite-offloop.ts): the server's
 * connection commits without an fsync and never checkpoints itself; a thread of its own copies
 * the WAL into the database file, and what a call committed is readable from a connection opened
 * after it answered. SQLite only (MariaDB has no such work on the server's thread).
 */
import { statSync } from "node:fs";
import test from "ava";
import { sqlitePath } from "../../src/db/datasource.js";
import { createDatabase } from "../../src/db/datasource.js";
import { STORES, createTestDatabase } from "../helpers/db.js";

const sqliteOnly = STORES.includes("sqlite") ? test : test.skip;

sqliteOnly("sqlite: the connection syncs off the loop and a thread checkpoints the WAL into the file, with nothing else running", async (t) => {
  const tdb = await createTestDatabase("sqlite");
  const db = await createDatabase(tdb.url);
  await db.dataSource.initialize();
  try {
    const pragma = async (name: string) => Object.values(((await db.dataSource.query(`PRAGMA ${name}`)) as Record<string, unknown>[])[0] ?? {})[0];
    t.is(await pragma("journal_mode"), "wal");
    t.is(await pragma("synchronous"), 1, "NORMAL: the COMMIT itself does not fsync");
    t.is(await pragma("wal_autocheckpoint"), 0, "the connection never checkpoints on its own");

    await db.sql.run((em) => em.query("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"));
    const file = sqlitePath(tdb.url);
    // Wait for the thread to copy the table's creation into the file, so that the size is stable.
    const settled = async () => {
      let last = -1;
      for (let i = 0; i < 100; i++) {
        const size = statSync(file).size;
        if (size === last) return size;
        last = size;
        await new Promise((r) => setTimeout(r, 300));
      }
      return last;
    };
    const before = await settled();
    // About 2 MB (~500 pages): under SQLite's own automatic checkpoint (1,000 pages), so only the
    // thread copies it into the file.
    const body = "x".repeat(4000);
    await db.sql.transaction(async (em) => {
      for (let i = 0; i < 500; i++) await em.query("INSERT INTO blobs (body) VALUES (?)", [body]);
    });
    let after = before;
    for (let i = 0; i < 100 && after < before + 2_000_000; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = statSync(file).size;
    }
    t.true(after >= before + 2_000_000, `the database file grew from ${before} to ${after} bytes: the WAL was checkpointed into it`);
    // Committed: another connection reads it.
    const other = await createDatabase(tdb.url);
    await other.dataSource.initialize();
    try {
      t.is(Number(((await other.dataSource.query("SELECT COUNT(*) AS n FROM blobs")) as { n: number }[])[0]?.n), 500);
    } finally {
      await other.close();
    }
  } finally {
    await db.close();
    await tdb.drop();
  }
});
