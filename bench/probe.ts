/**
 * What a phase of a benchmark run in this process costs, in measures that hold on a shared
 * machine: this process's CPU time, the SQL it sends (round trips to MySQL/MariaDB and the
 * statements in them, counted at mysql2's connection, by their first keyword), the database
 * server's CPU time (mariadbd's, which other clients of the same server inflate), and, with
 * BENCH_CPU_PROF=1, a V8 CPU profile of this process over the phase (written to the repo root).
 */
import { readFile, writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { REPO_ROOT, processCpuSeconds } from "./lib.js";

export interface SqlCounts {
  /** Calls to the driver: one round trip each (a pipelined packet of several statements is one). */
  roundTrips: number;
  /** Statements, counting each one of a multi-statement packet. */
  statements: number;
  /** Statements by their first keyword (SELECT, INSERT, UPDATE, START, COMMIT, …). */
  byKind: Map<string, number>;
}

const counts: SqlCounts = { roundTrips: 0, statements: 0, byKind: new Map() };
let counting = false;
let installed = false;

function countSql(sql: unknown): void {
  if (!counting) return;
  const text = typeof sql === "string" ? sql : typeof (sql as { sql?: unknown })?.sql === "string" ? (sql as { sql: string }).sql : "";
  counts.roundTrips++;
  for (const part of text.split(/;\s*\n/)) {
    const kind = (/^\s*(\w+)/.exec(part)?.[1] ?? "?").toUpperCase();
    counts.statements++;
    counts.byKind.set(kind, (counts.byKind.get(kind) ?? 0) + 1);
  }
}

/** Counts what every mysql2 connection of this process sends while a probe runs. */
function installSqlCounter(): void {
  if (installed) return;
  installed = true;
  const require = createRequire(join(REPO_ROOT, "package.json"));
  // The connection class every mysql2 connection (pooled or not) extends; not in the package's exports.
  const Base = require(join(dirname(require.resolve("mysql2")), "lib/base/connection.js")) as { prototype: Record<string, (...a: unknown[]) => unknown> };
  for (const name of ["query", "execute"] as const) {
    const original = Base.prototype[name] as (...a: unknown[]) => unknown;
    Base.prototype[name] = function (this: unknown, ...args: unknown[]) {
      countSql(args[0]);
      return original.apply(this, args);
    };
  }
}

async function mariadbPid(): Promise<number | undefined> {
  for (const name of ["mariadbd", "mysqld"]) {
    try {
      const { execFileSync } = await import("node:child_process");
      const out = execFileSync("pidof", [name], { encoding: "utf8" }).trim();
      if (out) return Number(out.split(/\s+/)[0]);
    } catch {
      // not running under that name
    }
  }
  return undefined;
}

export interface PhaseCost {
  seconds: number;
  /** This process's user + system CPU seconds over the phase. */
  cpuSeconds: number;
  /** The database server's CPU seconds over the phase (every client's), if readable. */
  dbCpuSeconds: number | undefined;
  sql: SqlCounts;
  loadAverage: string;
  profile: string | undefined;
}

/** Runs `fn`, measuring it (see the file's comment). */
export async function probe<T>(name: string, fn: () => Promise<T>): Promise<{ result: T; cost: PhaseCost }> {
  installSqlCounter();
  const loadAverage = (await readFile("/proc/loadavg", "utf8")).split(" ").slice(0, 3).join(" ");
  const prof = process.env.BENCH_CPU_PROF === "1";
  let session: Session | undefined;
  if (prof) {
    session = new Session();
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 200 });
    await session.post("Profiler.start");
  }
  const dbPid = await mariadbPid();
  const db0 = await processCpuSeconds(dbPid);
  counts.roundTrips = 0;
  counts.statements = 0;
  counts.byKind = new Map();
  counting = true;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let result: T;
  try {
    result = await fn();
  } finally {
    counting = false;
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const db1 = await processCpuSeconds(dbPid);
  let profile: string | undefined;
  if (session) {
    const { profile: p } = await session.post("Profiler.stop");
    profile = join(REPO_ROOT, `bench-${name}-${new Date().toISOString().replace(/[:.]/g, "-")}.cpuprofile`);
    await writeFile(profile, JSON.stringify(p));
    session.disconnect();
  }
  return {
    result,
    cost: {
      seconds,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      dbCpuSeconds: db0 !== undefined && db1 !== undefined ? db1 - db0 : undefined,
      sql: { roundTrips: counts.roundTrips, statements: counts.statements, byKind: new Map(counts.byKind) },
      loadAverage,
      profile,
    },
  };
}

/** A phase's cost per unit of work, as one line of text. */
export function costLine(cost: PhaseCost, units: number, unit: string): string {
  const per = (n: number) => (n / units).toFixed(2);
  const kinds = [...cost.sql.byKind]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k} ${per(n)}`)
    .join(", ");
  return [
    `${units} ${unit}s in ${cost.seconds.toFixed(2)} s (load average before: ${cost.loadAverage})`,
    `process CPU ${((cost.cpuSeconds * 1e6) / units).toFixed(0)} µs per ${unit}` +
      (cost.dbCpuSeconds !== undefined ? `; database server CPU ${((cost.dbCpuSeconds * 1e6) / units).toFixed(0)} µs per ${unit} (all its clients)` : ""),
    `SQL per ${unit}: ${per(cost.sql.roundTrips)} round trips, ${per(cost.sql.statements)} statements (${kinds})`,
    ...(cost.profile ? [`CPU profile: ${cost.profile}`] : []),
  ].join("\n");
}
