/**
 * The test levels: every test file (test/**\/*.test.ts) belongs to exactly one, which
 * test/levels.test.ts checks. `npm run test:<level>` runs one level (scripts/test-level.ts);
 * `npm test` runs them all.
 *
 *   unit     pure: no database, no server, no port (tables, properties, parsers, the CLI's command
 *            line, scripts run on a faked machine); quick, and needs nothing but node_modules
 *   api      a real server on a port (most on MariaDB and SQLite), and clients against it: REST,
 *            Connect, gRPC (grpc-js, grpcio, buf curl), the CLIs against the server's database
 *   db       the stores and migrations on MariaDB and SQLite, races and outages
 *   browser  pages in Chromium (playwright-core) against a server on SQLite
 *
 * An entry is a directory (ending in "/": every test file under it) or one file; a file named by
 * itself is in that file's level only, whatever level its directory is in (a test in test/unit that
 * starts a receiver on a port is an api test). A new test file that no entry names fails the
 * check: add it to the level whose needs it has.
 */

export const LEVELS = {
  unit: [
    "test/unit/",
    "test/billing/",
    "test/cli/args.test.ts",
    "test/config.test.ts",
    "test/levels.test.ts",
    "test/provision.test.ts",
    "test/structure.test.ts",
    "test/rest/openapi-lint.test.ts",
    "test/rest/routes.test.ts",
    "test/rpc/json-out.test.ts",
    "test/rpc/json.test.ts",
  ],
  api: [
    "test/api/",
    "test/build.test.ts",
    "test/clients/",
    "test/cli/billing.test.ts",
    "test/cli/env-file.test.ts",
    "test/cli/keys.test.ts",
    "test/docs-examples.test.ts",
    "test/rest/openapi-errors.test.ts",
    "test/rest/openapi-responses.test.ts",
    "test/rest/openapi.test.ts",
    "test/rpc/router-transport.test.ts",
    "test/unit/webhook-guard.test.ts",
    "test/ratelimit.test.ts",
  ],
  db: ["test/db/"],
  browser: ["test/browser/"],
} as const satisfies Record<string, readonly string[]>;

export type Level = keyof typeof LEVELS;

export const LEVEL_NAMES = Object.keys(LEVELS) as Level[];

/** Whether `entry` (a directory ending in "/" or a file) names `file` (a path from the repository root, with "/"). */
export function names(entry: string, file: string): boolean {
  return entry.endsWith("/") ? file.startsWith(entry) : file === entry;
}

/** The levels whose entries name `file` (by itself if any does, else by its directory): exactly one for a file in its place. */
export function levelsOf(file: string): Level[] {
  const byName = LEVEL_NAMES.filter((level) => (LEVELS[level] as readonly string[]).includes(file));
  return byName.length > 0 ? byName : LEVEL_NAMES.filter((level) => LEVELS[level].some((entry) => names(entry, file)));
}
