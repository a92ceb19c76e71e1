/**
 * The one escaper of the MySQL path (src/db/mysql-escape.ts): mysqlText is the driver's own
 * escaping, byte for byte; what it writes reads back as the same text on MariaDB under the
 * default sql_mode, and not under NO_BACKSLASH_ESCAPES, which sqlModeRefusal names.
 */
import test from "ava";
import mysql from "mysql2/promise";
import { UNSUPPORTED_SQL_MODES, mysqlText, queryFormat, sqlModeRefusal } from "../../src/db/mysql-escape.js";
import { MYSQL_BASE } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

/** Text that stresses a literal: every character the driver escapes, quotes, `?`, comments, astral and combining characters. */
const SAMPLES = [
  "",
  "plain",
  "it's",
  "back\\slash",
  "trailing\\",
  "\\'",
  "''",
  '"double"',
  "nul\0byte",
  "ctrl-z\x1a",
  "tab\there",
  "back\bspace",
  "new\nline\r\n",
  "a ? b ?? c",
  "-- not a comment",
  "/* nor this */",
  "emoji 😀 and é (e\u0301)",
  "'); DROP TABLE x; --",
  "\\0\\n\\Z",
];

/** Random text over the characters that matter to a literal, and a few others. */
function randomText(n: number): string {
  const alphabet = ["a", "Z", " ", "'", '"', "\\", "\0", "\b", "\t", "\n", "\r", "\x1a", "?", "%", "_", "`", "é", "😀", ";"];
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
  return s;
}

test("mysqlText is the driver's escaping, byte for byte", (t) => {
  for (const s of [...SAMPLES, ...Array.from({ length: 500 }, (_, i) => randomText(i % 40))]) t.is(mysqlText(s), mysql.escape(s), JSON.stringify(s));
});

test("mysqlText only quotes text with nothing to escape", (t) => {
  t.is(mysqlText("evt_123 abc-é😀"), "'evt_123 abc-é😀'");
  t.is(mysqlText("a'b"), "'a\\'b'");
  t.is(mysqlText("a\\b"), "'a\\\\b'");
});

test("queryFormat formats `?` parameters as the driver does, and sends text without parameters as it is", (t) => {
  const conn = { config: { stringifyObjects: false, timezone: "Z" } };
  t.is(queryFormat.call(conn, "SELECT ?, ?", ["it's", 3]), "SELECT 'it\\'s', 3");
  t.is(queryFormat.call(conn, "SELECT '?'", []), "SELECT '?'");
  t.is(queryFormat.call(conn, "SELECT '?'", undefined), "SELECT '?'");
});

test("sqlModeRefusal: modes without NO_BACKSLASH_ESCAPES are fine", (t) => {
  t.is(sqlModeRefusal(""), undefined);
  t.is(sqlModeRefusal("STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION"), undefined);
  t.is(sqlModeRefusal("ANSI_QUOTES,PIPES_AS_CONCAT"), undefined);
  t.deepEqual(UNSUPPORTED_SQL_MODES, ["NO_BACKSLASH_ESCAPES"]);
});

test("sqlModeRefusal names the mode, the session's sql_mode and the two ways to change it", (t) => {
  const why = sqlModeRefusal("STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES,NO_ENGINE_SUBSTITUTION");
  t.truthy(why);
  t.regex(String(why), /sql_mode is 'STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES,NO_ENGINE_SUBSTITUTION'/);
  t.regex(String(why), /NO_BACKSLASH_ESCAPES is not supported/);
  t.regex(String(why), /SET GLOBAL sql_mode = 'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'/);
  t.regex(String(why), /\?sql_mode=STRICT_TRANS_TABLES%2CNO_ENGINE_SUBSTITUTION/);
  t.truthy(sqlModeRefusal("no_backslash_escapes"));
});

/** The text MariaDB reads back from `literal` in a session whose sql_mode is `mode`. */
async function readBack(conn: mysql.Connection, literal: string): Promise<string> {
  const [rows] = await conn.query(`SELECT CAST(${literal} AS CHAR CHARACTER SET utf8mb4) AS v`);
  return String((rows as { v: string }[])[0]?.v);
}

mysqlOnly("mysql: what mysqlText writes reads back as the same text under the default sql_mode", async (t) => {
  const conn = await mysql.createConnection(`${MYSQL_BASE}/`);
  try {
    await conn.query("SET SESSION sql_mode = DEFAULT");
    const [[mode]] = (await conn.query("SELECT @@SESSION.sql_mode AS m")) as unknown as [{ m: string }[]];
    t.is(sqlModeRefusal(String(mode?.m)), undefined, "the server's default mode suits the escaper");
    for (const s of [...SAMPLES, ...Array.from({ length: 50 }, () => randomText(30))]) t.is(await readBack(conn, mysqlText(s)), s, JSON.stringify(s));
  } finally {
    await conn.end();
  }
});

mysqlOnly("mysql: under NO_BACKSLASH_ESCAPES the same literals read back as other text (why the server refuses that mode)", async (t) => {
  const conn = await mysql.createConnection(`${MYSQL_BASE}/`);
  try {
    await conn.query("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'");
    t.is(await readBack(conn, mysqlText("back\\slash")), "back\\\\slash");
    await t.throwsAsync(readBack(conn, mysqlText("it's")));
  } finally {
    await conn.end();
  }
});
