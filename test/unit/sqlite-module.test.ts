/**
 * The embedded store's better-sqlite3 (src/db/sqlite-module.ts): 12 on Node 20, 13 (the optional
 * dependency better-sqlite3-node22) on Node 22 and later, where 12 aborts the process when the
 * garbage collector frees a statement. Run by both passes: `npm test` (Node 20 here) and the
 * Node 24 pass (scripts/node24.sh), whose tree has the optional dependency as npm would install it.
 */
import { createRequire } from "node:module";
import test from "ava";
import { SQLITE_MODULE, loadSqlite } from "../../src/db/sqlite-module.js";

const require = createRequire(import.meta.url);

test("better-sqlite3 13 on Node 22 and later, 12 on Node 20; the loaded one opens a database", (t) => {
  const major = Number(process.versions.node.split(".")[0]);
  const { version } = require(`${SQLITE_MODULE}/package.json`) as { version: string };
  if (major >= 22) t.deepEqual([SQLITE_MODULE, version.split(".")[0]], ["better-sqlite3-node22", "13"]);
  else t.deepEqual([SQLITE_MODULE, version.split(".")[0]], ["better-sqlite3", "12"]);
  const Database = loadSqlite() as new (path: string) => { prepare(sql: string): { get(): unknown }; close(): void };
  const db = new Database(":memory:");
  t.deepEqual(db.prepare("SELECT 1 + 1 AS two").get(), { two: 2 });
  db.close();
});
