/**
 * The decisions of scripts/test-prerequisites.sh (what `npm test` and `.ci/run` install first), on
 * a faked machine: a directory of stand-ins for apt-get, id, mysql, mysqladmin and service that
 * record what they were asked and change the fake machine as the real ones would (apt-get install
 * chromium puts a browser at /usr/bin/chromium, ALTER USER lets root in over TCP...), with
 * PROVISION_ROOT_FS pointing the script's fixed paths into it. Each prerequisite is taken away in
 * turn; the script is also run as a user who is not root, and with a failing apt-get.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";

const SCRIPT = join(import.meta.dirname, "..", "scripts", "test-prerequisites.sh");

interface Machine {
  root?: boolean;
  /** mariadb-server installed, running, and root let in over TCP. */
  mariadb?: "absent" | "stopped" | "socket-only" | "ready";
  chromium?: boolean;
  jq?: boolean;
  grpcio?: boolean;
  /** protoc and grpc_python_plugin at /usr/bin. */
  protoc?: boolean;
  /** promtool at /usr/bin (Debian's prometheus). */
  promtool?: boolean;
  /** openssl and curl at /usr/bin (the TLS tests make a certificate and call over https). */
  tls?: boolean;
  /** pdftotext, pdfinfo and pdftoppm on PATH (Debian's poppler-utils). */
  poppler?: boolean;
  /** redis-server at /usr/bin, and answering on 127.0.0.1:6379. */
  redis?: "absent" | "stopped" | "ready";
  aptFails?: boolean;
  /** No apt-get on PATH (another OS). */
  noApt?: boolean;
}

interface Run {
  status: number | null;
  lines: string[];
  /** What the stand-ins were asked, one line per call ("apt-get install -y -qq jq"). */
  calls: string[];
  /** The fake machine afterwards. */
  after: { chromium: boolean; jq: boolean; grpcio: boolean; protoc: boolean; promtool: boolean; tls: boolean; poppler: boolean; mariadbTcp: boolean; redis: boolean };
}

function stub(path: string, body: string) {
  writeFileSync(path, `#!/bin/bash\n${body}\n`);
  chmodSync(path, 0o755);
}

function run(m: Machine, env: Record<string, string> = {}): Run {
  const dir = mkdtempSync(join(tmpdir(), "provision-"));
  try {
    const fs = join(dir, "fs");
    const bin = join(dir, "bin");
    const state = join(dir, "state");
    const log = join(dir, "calls.log");
    for (const d of [bin, state, join(fs, "usr/bin"), join(fs, "usr/sbin")]) mkdirSync(d, { recursive: true });
    writeFileSync(log, "");
    for (const tool of ["seq", "sleep", "cat", "touch", "grep", "chmod", "dirname", "basename"]) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
    const mariadb = m.mariadb ?? "ready";
    if (mariadb !== "absent") stub(join(fs, "usr/sbin/mariadbd"), "exit 0");
    if (mariadb === "socket-only" || mariadb === "ready") writeFileSync(join(state, "running"), "");
    if (mariadb === "ready") writeFileSync(join(state, "tcp"), "");
    if (m.chromium ?? true) stub(join(fs, "usr/bin/chromium"), "exit 0");
    if (m.jq ?? true) stub(join(bin, "jq"), "exit 0");
    if (m.protoc ?? true) for (const tool of ["protoc", "grpc_python_plugin"]) stub(join(fs, "usr/bin", tool), "exit 0");
    if (m.promtool ?? true) stub(join(fs, "usr/bin/promtool"), "exit 0");
    if (m.tls ?? true) for (const tool of ["openssl", "curl"]) stub(join(fs, "usr/bin", tool), "exit 0");
    if (m.poppler ?? true) for (const tool of ["pdftotext", "pdfinfo", "pdftoppm"]) stub(join(bin, tool), "exit 0");
    if (m.grpcio ?? true) writeFileSync(join(state, "grpcio"), "");
    stub(join(fs, "usr/bin/python3"), `[ -e ${state}/grpcio ]`);
    const record = `echo "$(basename "$0") $*" >> ${log}`;
    const redis = m.redis ?? "ready";
    const redisServer = `${record}\ntouch ${state}/redis`;
    stub(join(state, "redis-server.stub"), redisServer);
    if (redis !== "absent") stub(join(fs, "usr/bin/redis-server"), redisServer);
    if (redis === "ready") writeFileSync(join(state, "redis"), "");
    stub(join(bin, "redis-cli"), `[ -e ${state}/redis ] && echo PONG`);
    stub(join(bin, "id"), `echo ${m.root === false ? 1000 : 0}`);
    if (!m.noApt)
      stub(
        join(bin, "apt-get"),
        `${record}
${m.aptFails ? "exit 100" : ""}
for p in "$@"; do case "$p" in
  chromium) printf '#!/bin/bash\\nexit 0\\n' > ${fs}/usr/bin/chromium; chmod +x ${fs}/usr/bin/chromium;;
  jq) printf '#!/bin/bash\\nexit 0\\n' > ${bin}/jq; chmod +x ${bin}/jq;;
  python3-grpcio) touch ${state}/grpcio;;
  protobuf-compiler) printf '#!/bin/bash\\nexit 0\\n' > ${fs}/usr/bin/protoc; chmod +x ${fs}/usr/bin/protoc;;
  protobuf-compiler-grpc) printf '#!/bin/bash\\nexit 0\\n' > ${fs}/usr/bin/grpc_python_plugin; chmod +x ${fs}/usr/bin/grpc_python_plugin;;
  prometheus) printf '#!/bin/bash\\nexit 0\\n' > ${fs}/usr/bin/promtool; chmod +x ${fs}/usr/bin/promtool;;
  openssl) printf '#!/bin/bash\\nexit 0\\n' > ${fs}/usr/bin/openssl; chmod +x ${fs}/usr/bin/openssl;;
  curl) printf '#!/bin/bash\\nexit 0\\n' > ${fs}/usr/bin/curl; chmod +x ${fs}/usr/bin/curl;;
  poppler-utils) for t in pdftotext pdfinfo pdftoppm; do printf '#!/bin/bash\\nexit 0\\n' > ${bin}/$t; chmod +x ${bin}/$t; done;;
  redis-server) cat ${state}/redis-server.stub > ${fs}/usr/bin/redis-server; chmod +x ${fs}/usr/bin/redis-server;;
  mariadb-server) printf '#!/bin/bash\\nexit 0\\n' > ${fs}/usr/sbin/mariadbd; chmod +x ${fs}/usr/sbin/mariadbd;;
esac; done`,
      );
    stub(
      join(bin, "mysql"),
      `${record}
[ -e ${state}/running ] || exit 1
case "$*" in *--protocol=TCP*) [ -e ${state}/tcp ] || exit 1;; esac
case "$*" in *"ALTER USER"*) touch ${state}/tcp;; esac
exit 0`,
    );
    stub(join(bin, "mysqladmin"), `[ -e ${state}/running ]`);
    stub(join(bin, "service"), `${record}\n[ -x ${fs}/usr/sbin/mariadbd ] && touch ${state}/running`);
    stub(join(bin, "start-stop-daemon"), `${record}\nexit 1`);
    const r = spawnSync("/bin/bash", [SCRIPT], {
      env: { PATH: bin, PROVISION_ROOT_FS: fs, ...env },
      encoding: "utf8",
    });
    return {
      status: r.status,
      lines: r.stdout.split("\n").filter((l) => l !== ""),
      calls: readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l !== ""),
      after: {
        chromium: existsSync(join(fs, "usr/bin/chromium")),
        jq: existsSync(join(bin, "jq")),
        grpcio: existsSync(join(state, "grpcio")),
        protoc: existsSync(join(fs, "usr/bin/protoc")) && existsSync(join(fs, "usr/bin/grpc_python_plugin")),
        promtool: existsSync(join(fs, "usr/bin/promtool")),
        tls: existsSync(join(fs, "usr/bin/openssl")) && existsSync(join(fs, "usr/bin/curl")),
        poppler: ["pdftotext", "pdfinfo", "pdftoppm"].every((tool) => existsSync(join(bin, tool))),
        mariadbTcp: existsSync(join(state, "tcp")),
        redis: existsSync(join(state, "redis")),
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const apt = (calls: string[]) => calls.filter((c) => c.startsWith("apt-get"));

test("a machine that has everything: nothing installed, nothing said", (t) => {
  const r = run({});
  t.is(r.status, 0);
  t.deepEqual(r.lines, []);
  t.deepEqual(apt(r.calls), []);
  t.false(r.calls.some((c) => c.includes("ALTER USER")));
});

test("a fresh machine as root: one apt-get update, each package installed and said, root let in over TCP", (t) => {
  const r = run({ mariadb: "socket-only", chromium: false, jq: false, grpcio: false, protoc: false, promtool: false, tls: false, poppler: false });
  t.is(r.status, 0);
  t.deepEqual(apt(r.calls), [
    "apt-get update -qq",
    "apt-get install -y -qq chromium",
    "apt-get install -y -qq jq",
    "apt-get install -y -qq python3-grpcio python3-protobuf",
    "apt-get install -y -qq protobuf-compiler protobuf-compiler-grpc",
    "apt-get install -y -qq prometheus",
    "apt-get install -y -qq openssl curl",
    "apt-get install -y -qq poppler-utils",
  ]);
  t.deepEqual(r.lines, [
    "test prerequisites: letting MariaDB's root log in over TCP with the empty password",
    "test prerequisites: apt-get update",
    "test prerequisites: apt-get install chromium",
    "test prerequisites: apt-get install jq",
    "test prerequisites: apt-get install python3-grpcio python3-protobuf",
    "test prerequisites: apt-get install protobuf-compiler protobuf-compiler-grpc",
    "test prerequisites: apt-get install prometheus",
    "test prerequisites: apt-get install openssl curl",
    "test prerequisites: apt-get install poppler-utils",
  ]);
  t.deepEqual(r.after, { chromium: true, jq: true, grpcio: true, protoc: true, promtool: true, tls: true, poppler: true, mariadbTcp: true, redis: true });
  t.true(r.calls.some((c) => c.startsWith("mysql") && c.includes("CREATE DATABASE IF NOT EXISTS test")));
});

test("each prerequisite missing alone is the only thing installed", (t) => {
  const cases: [Machine, string][] = [
    [{ chromium: false }, "apt-get install -y -qq chromium"],
    [{ jq: false }, "apt-get install -y -qq jq"],
    [{ grpcio: false }, "apt-get install -y -qq python3-grpcio python3-protobuf"],
    [{ protoc: false }, "apt-get install -y -qq protobuf-compiler protobuf-compiler-grpc"],
    [{ promtool: false }, "apt-get install -y -qq prometheus"],
    [{ tls: false }, "apt-get install -y -qq openssl curl"],
    [{ poppler: false }, "apt-get install -y -qq poppler-utils"],
    [{ mariadb: "absent" }, "apt-get install -y -qq mariadb-server"],
    [{ redis: "absent" }, "apt-get install -y -qq redis-server"],
  ];
  for (const [machine, install] of cases) {
    const r = run(machine);
    t.is(r.status, 0, install);
    t.deepEqual(apt(r.calls), ["apt-get update -qq", install], install);
  }
});

test("MariaDB not installed: installed, started, root let in over TCP, database made", (t) => {
  const r = run({ mariadb: "absent" });
  t.is(r.status, 0);
  t.true(r.calls.includes("service mariadb start"));
  t.true(r.after.mariadbTcp);
  t.true(r.lines.includes("test prerequisites: starting MariaDB"));
});

test("MariaDB installed but not running: started, not installed again", (t) => {
  const r = run({ mariadb: "stopped" });
  t.is(r.status, 0);
  t.deepEqual(apt(r.calls), []);
  t.true(r.calls.includes("service mariadb start"));
  t.true(r.after.mariadbTcp);
});

test("Redis not installed: installed and started; installed but not running: started, not installed again; TEST_REDIS_URL: left alone", (t) => {
  const start = "redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save  --appendonly no";
  const absent = run({ redis: "absent" });
  t.is(absent.status, 0);
  t.deepEqual(apt(absent.calls), ["apt-get update -qq", "apt-get install -y -qq redis-server"]);
  t.true(absent.after.redis);
  const stopped = run({ redis: "stopped" });
  t.is(stopped.status, 0);
  t.deepEqual(apt(stopped.calls), []);
  t.true(
    stopped.calls.some((c) => c.startsWith(start)),
    stopped.calls.join("\n"),
  );
  t.true(stopped.lines.includes("test prerequisites: starting Redis"));
  t.true(stopped.after.redis);
  const elsewhere = run({ redis: "absent" }, { TEST_REDIS_URL: "redis://cache.example:6379" });
  t.deepEqual(apt(elsewhere.calls), []);
  t.false(elsewhere.calls.some((c) => c.startsWith("redis-server")));
  t.false(elsewhere.after.redis);
  const notRoot = run({ root: false, redis: "stopped" });
  t.deepEqual(apt(notRoot.calls), []);
  t.false(notRoot.calls.some((c) => c.startsWith("redis-server")));
  t.regex(notRoot.lines[0] ?? "", /apt-get install -y redis-server && redis-server --daemonize yes .*--save "" --appendonly no/);
});

test("TEST_STORES=sqlite or another TEST_MYSQL_URL: MariaDB left alone", (t) => {
  for (const env of [{ TEST_STORES: "sqlite" }, { TEST_MYSQL_URL: "mysql://someone@db.example:3306" }] as Record<string, string>[]) {
    const r = run({ mariadb: "absent" }, env);
    t.is(r.status, 0);
    t.deepEqual(r.calls, [], JSON.stringify(env));
    t.deepEqual(r.lines, []);
  }
});

test("CHROMIUM_PATH or GRPCIO_PYTHON set: that prerequisite is the caller's, not installed", (t) => {
  const r = run({ chromium: false, grpcio: false }, { CHROMIUM_PATH: "/elsewhere/chromium", GRPCIO_PYTHON: "/elsewhere/python3" });
  t.is(r.status, 0);
  t.deepEqual(apt(r.calls), []);
});

test("not root: nothing installed, and the first line says exactly what to run", (t) => {
  const r = run({ root: false, mariadb: "socket-only", chromium: false, jq: false, grpcio: false, protoc: false, promtool: false, tls: false, poppler: false });
  t.is(r.status, 0);
  t.deepEqual(apt(r.calls), []);
  t.false(r.calls.some((c) => c.includes("ALTER USER")));
  t.is(r.lines.length, 1);
  t.is(
    r.lines[0],
    "test prerequisites: missing; as root run: apt-get install -y mariadb-server chromium jq python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc prometheus openssl curl poppler-utils && service mariadb start && " +
      `mysql -uroot -e "ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket" (or TEST_STORES=sqlite npm test without MariaDB)`,
  );
});

test("no apt-get (another OS): nothing tried, the same one line", (t) => {
  const r = run({ jq: false, noApt: true });
  t.is(r.status, 0);
  t.deepEqual(r.lines, ["test prerequisites: missing; as root run: apt-get install -y jq (or TEST_STORES=sqlite npm test without MariaDB)"]);
});

test("a failing apt-get stops the run with a line saying which install failed", (t) => {
  const r = run({ jq: false, aptFails: true });
  t.is(r.status, 1);
  t.is(r.lines.at(-1), "test prerequisites: apt-get install jq failed");
});
