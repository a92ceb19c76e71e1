/**
 * Which build of better-sqlite3 the embedded store loads. package.json pins 12 (`better-sqlite3`),
 * the last line that installs on Node 20; on Node 24, 12 aborts the process when the garbage
 * collector frees a statement ("Assertion failed: (env) != nullptr" in
 * RemoveEnvironmentCleanupHook). 13 (Node-API) does not, but needs Node ≥ 22: it is the optional
 * dependency `better-sqlite3-node22` (npm:better-sqlite3@13.2.0), which npm installs on Node 22
 * and later and skips on Node 20. On Node ≥ 22 it is used when installed; otherwise 12.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

function pick(): string {
  const major = Number(process.versions.node.split(".")[0]);
  if (major >= 22) {
    try {
      require.resolve("better-sqlite3-node22");
      return "better-sqlite3-node22";
    } catch {
      // not installed (npm install on an older Node, or without optional dependencies): 12
    }
  }
  return "better-sqlite3";
}

/** The package name loaded: `better-sqlite3-node22` or `better-sqlite3`. */
export const SQLITE_MODULE = pick();

/** The module's entry file (a worker thread loads it by path). */
export const SQLITE_MODULE_PATH = require.resolve(SQLITE_MODULE);

/** The better-sqlite3 Database constructor, for TypeORM's `driver` option. */
export function loadSqlite(): unknown {
  return require(SQLITE_MODULE);
}
