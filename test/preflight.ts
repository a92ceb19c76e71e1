/**
 * Runs before `npm test`'s tests, after scripts/test-prerequisites.sh has installed what it could:
 * says in one line what the suite needs and is still missing, and how to get it, instead of letting hundreds of tests fail one connection timeout at a time.
 * MariaDB (or MySQL) at TEST_MYSQL_URL unless TEST_STORES leaves "mysql" out; Chromium for the
 * browser test at CHROMIUM_PATH (default /usr/bin/chromium); jq for the docs' examples;
 * Python with grpcio and protobuf (GRPCIO_PYTHON, default /usr/bin/python3) for the grpcio test;
 * promtool (Debian's prometheus) for the metrics lint; openssl and curl for the TLS test;
 * pdftotext and pdfinfo (Debian's poppler-utils) for the invoice PDFs; Redis at TEST_REDIS_URL
 * (default redis://127.0.0.1:6379) for the shared rate limits.
 *
 * `tsx test/preflight.ts <level>` checks only what that test level needs (test/levels.ts): `db`
 * MariaDB; `browser` Chromium; `api` MariaDB and the tools above but Chromium. With no level:
 * everything, for `npm test`.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import mysql from "mysql2/promise";
import { MYSQL_BASE, STORES, mysqlMissing } from "./helpers/db.js";
import { CHROMIUM, chromiumMissing } from "./helpers/chromium.js";
import { LEVEL_NAMES, type Level } from "./levels.js";

const level = process.argv[2] as Level | undefined;
if (level !== undefined && !LEVEL_NAMES.includes(level)) {
  console.error(`usage: tsx test/preflight.ts [${LEVEL_NAMES.join("|")}] (got ${level})`);
  process.exit(2);
}
/** Whether the run needs what `levels` need: every level when none is named. */
const needs = (...levels: Level[]) => level === undefined || levels.includes(level);

const missing: string[] = [];
const known = ["mysql", "sqlite"];
const unknown = STORES.filter((s) => !known.includes(s));
if (needs("api", "db") && (unknown.length > 0 || STORES.length === 0)) {
  missing.push(`TEST_STORES=${process.env.TEST_STORES ?? ""} names no store or an unknown one (${unknown.join(", ")}): use mysql, sqlite or mysql,sqlite`);
}
if (needs("api", "db") && STORES.includes("mysql")) {
  try {
    const conn = await mysql.createConnection({ uri: `${MYSQL_BASE}/`, connectTimeout: 3000 });
    await conn.end();
  } catch (e) {
    missing.push(mysqlMissing(e));
  }
}
if (needs("browser") && !existsSync(CHROMIUM)) missing.push(chromiumMissing());
if (needs("api") && spawnSync("jq", ["--version"]).status !== 0)
  missing.push("jq, which the docs' examples use (test/docs-examples.test.ts), is not on PATH: install it (apt-get install jq; npm test does so when run as root)");

const python = process.env.GRPCIO_PYTHON || "/usr/bin/python3";
if (needs("api") && spawnSync(python, ["-c", "import grpc, google.protobuf"]).status !== 0) {
  missing.push(
    `${python} cannot import grpc and google.protobuf, which the grpcio test needs (test/api/grpcio.test.ts): install them (apt-get install python3-grpcio python3-protobuf; npm test does so when run as root) or name another interpreter in GRPCIO_PYTHON`,
  );
}

if (needs("api") && (!existsSync("/usr/bin/protoc") || !existsSync("/usr/bin/grpc_python_plugin"))) {
  missing.push(
    "/usr/bin/protoc and /usr/bin/grpc_python_plugin, which the Python how-to's test runs (test/clients/python-howto.test.ts), are not both installed: install them (apt-get install protobuf-compiler protobuf-compiler-grpc; npm test does so when run as root)",
  );
}

if (needs("api") && !existsSync("/usr/bin/promtool")) {
  missing.push(
    "/usr/bin/promtool, which checks the /metrics exposition (test/api/ops-metrics-lint.test.ts), is not installed: install it (apt-get install prometheus; npm test does so when run as root)",
  );
}

if (needs("api") && (!existsSync("/usr/bin/openssl") || !existsSync("/usr/bin/curl"))) {
  missing.push(
    "/usr/bin/openssl and /usr/bin/curl, with which the TLS test makes its certificate and calls over https (test/api/tls.test.ts), are not both installed: install them (apt-get install openssl curl; npm test does so when run as root)",
  );
}

if (needs("api") && ["pdftotext", "pdfinfo"].some((tool) => spawnSync(tool, ["-v"]).error !== undefined)) {
  missing.push(
    "pdftotext and pdfinfo, which read the invoice PDFs (test/api/invoice-pdf.test.ts), are not both on PATH: install them (apt-get install poppler-utils; npm test does so when run as root)",
  );
}

/** Whether a Redis answers PING at `url` within 3 s. */
function redisAnswers(url: string): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: u.hostname.replace(/^\[|\]$/g, ""), port: Number(u.port || 6379) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(3000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write(u.password ? `AUTH ${decodeURIComponent(u.password)}\r\nPING\r\n` : "PING\r\n"));
    socket.on("data", (d) => {
      if (d.toString().includes("+PONG")) done(true);
      else if (d.toString().startsWith("-")) done(false);
    });
  });
}

const redisUrl = process.env.TEST_REDIS_URL || "redis://127.0.0.1:6379";
if (needs("api") && !(await redisAnswers(redisUrl))) {
  missing.push(
    `Redis at ${new URL(redisUrl).host}, which the shared rate limits' test uses (test/api/ratelimit-shared.test.ts), does not answer: install and start it (apt-get install redis-server && redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log; npm test does so when run as root) or name another in TEST_REDIS_URL`,
  );
}

if (missing.length > 0) {
  console.error(`${level ? `npm run test:${level}` : "npm test"} cannot run: ${missing.join("; and ")}`);
  process.exit(1);
}
