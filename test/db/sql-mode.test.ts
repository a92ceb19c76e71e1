/**
 * The server refuses to start when its MySQL sessions' sql_mode has a mode the escaper does not
 * support (NO_BACKSLASH_ESCAPES), saying which and what to change. The sessions get that mode
 * here from DATABASE_URL's sql_mode parameter (SET SESSION on each connection the server opens),
 * so the shared server's global sql_mode stays as it is; a global mode with it is refused alike
 * (the server's sessions start with the global mode).
 */
import { createDatabase } from "../../src/db/datasource.js";
import { createTestDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { startAppOn } from "../helpers/server.js";

const REFUSED = /sql_mode is '[^']*NO_BACKSLASH_ESCAPES[^']*', and NO_BACKSLASH_ESCAPES is not supported.*SET GLOBAL sql_mode = .*DATABASE_URL's sql_mode parameter/;

mysqlOnly("mysql: the server does not start when its sessions' sql_mode has NO_BACKSLASH_ESCAPES, and says what to change", async (t) => {
  const db = await createTestDatabase("mysql");
  try {
    const err = await t.throwsAsync(startAppOn(`${db.url}?sql_mode=${encodeURIComponent("STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES")}`));
    t.regex(String(err?.message), REFUSED);
    t.regex(String(err?.message), /SET GLOBAL sql_mode = 'STRICT_TRANS_TABLES'/);
    // The operator CLIs open the database the same way and refuse alike.
    await t.throwsAsync(createDatabase(`${db.url}?sql_mode=NO_BACKSLASH_ESCAPES`), { message: REFUSED });
  } finally {
    await db.drop();
  }
});

mysqlOnly("mysql: the sql_mode parameter sets every pooled session's mode, and the server starts under a supported one", async (t) => {
  const tdb = await createTestDatabase("mysql");
  try {
    const db = await createDatabase(`${tdb.url}?sql_mode=${encodeURIComponent("STRICT_ALL_TABLES,ANSI_QUOTES")}`, { poolSize: 3 });
    await db.dataSource.initialize();
    try {
      // Several connections at once: each new one of the pool has the mode, on every path (TypeORM, Sql.query, pipelined).
      const modes = await Promise.all([
        db.sql.query<{ m: string }[]>("SELECT @@SESSION.sql_mode AS m", []),
        db.sql.run((em) => em.query("SELECT @@SESSION.sql_mode AS m") as Promise<{ m: string }[]>),
        db.sql.pipelined(async (p) => (await p.run([["SELECT @@SESSION.sql_mode AS m", []]]))[0] as { m: string }[]),
      ]);
      for (const rows of modes) t.deepEqual(String(rows[0]?.m).split(",").sort(), ["ANSI_QUOTES", "STRICT_ALL_TABLES"]);
    } finally {
      await db.close();
    }
    const app = await startAppOn(`${tdb.url}?sql_mode=STRICT_TRANS_TABLES`);
    await app.stop();
    t.pass();
  } finally {
    await tdb.drop();
  }
});
