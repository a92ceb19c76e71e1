/**
 * A MySQL DATABASE_URL naming a database that does not exist stops the start (server and keys
 * CLI) with a message that names it and says how to create it.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { MYSQL_BASE } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { startAppOn } from "../helpers/server.js";

const run = promisify(execFile);
const MISSING = `billing_missing_${Date.now().toString(36)}`;
const HINT = new RegExp(`the database ${MISSING} does not exist on [^:]+:\\d+: create it \\(CREATE DATABASE \`${MISSING}\` CHARACTER SET utf8mb4`);

mysqlOnly("mysql: the server does not start on a missing database, and says to create it", async (t) => {
  const err = await t.throwsAsync(startAppOn(`${MYSQL_BASE}/${MISSING}`));
  t.regex(String(err?.message), HINT);
});

mysqlOnly("mysql: npm start and the keys CLI say the same on their way out", async (t) => {
  const env = { ...process.env, DATABASE_URL: `${MYSQL_BASE}/${MISSING}`, PORT: "0" };
  const start = await t.throwsAsync(run(process.execPath, ["--import", "tsx", "src/main.ts"], { env }));
  t.is((start as { code?: number }).code, 1);
  t.regex(String((start as { stderr?: string }).stderr), HINT);
  const keys = await t.throwsAsync(run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", "env", "list"], { env }));
  t.regex(String((keys as { stderr?: string }).stderr), HINT);
});
