/**
 * A three-node MariaDB Galera cluster and HAProxy on loopback ports, in a temporary directory:
 * the nodes (mariadbd from Debian's mariadb-server, the provider from galera-4), bootstrapped
 * from the first; a health check per node served by this process (200 only while the node's
 * wsrep_local_state is 4, Synced); HAProxy in TCP mode routing to the nodes whose check passes.
 * Installs haproxy with apt when it is missing.
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import { type NodePorts, haproxyConfig, nodeOptions } from "./config.js";
import { exited, removeAtCleanup, signal, startProcess } from "./processes.js";

export const log = (msg: string) => process.stderr.write(`[ha ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Installs Debian's haproxy when it is not there (as root, with apt). */
export function ensureHaproxy(): void {
  if (existsSync("/usr/sbin/haproxy")) return;
  log("haproxy is missing: apt-get install -y haproxy");
  execFileSync("apt-get", ["install", "-y", "haproxy"], { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
}

export class GaleraNode {
  proc: ChildProcess | undefined;
  frozen = false;
  constructor(
    readonly ports: NodePorts,
    readonly all: readonly NodePorts[],
    readonly dir: string,
  ) {}

  get name(): string {
    return `node${this.ports.n}`;
  }

  /** Creates an empty data directory (mariadb-install-db). */
  init(): void {
    mkdirSync(this.dir, { recursive: true });
    execFileSync("chown", ["mysql:mysql", this.dir]);
    execFileSync("mariadb-install-db", ["--no-defaults", `--datadir=${this.dir}/data`, "--user=mysql", "--auth-root-authentication-method=normal", "--skip-test-db"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  }

  /**
   * The position a node killed mid-write had reached (mariadbd --wsrep-recover), so that it
   * rejoins with an incremental transfer (IST) rather than a whole copy.
   */
  recoveredPosition(): string | undefined {
    const logFile = join(this.dir, "recover.log");
    try {
      execFileSync("/usr/sbin/mariadbd", [...nodeOptions(this.ports, this.all, this.dir).filter((o) => !o.startsWith("--log-error")), `--log-error=${logFile}`, "--wsrep-recover"], {
        stdio: "ignore",
        timeout: 120_000,
      });
    } catch {
      return undefined;
    }
    const m = /Recovered position: (\S+:-?\d+)/.exec(readFileSync(logFile, "utf8"));
    return m?.[1];
  }

  start(bootstrap = false, position?: string): void {
    const args = nodeOptions(this.ports, this.all, this.dir);
    if (bootstrap) args.push("--wsrep-new-cluster");
    if (position) args.push(`--wsrep-start-position=${position}`);
    this.proc = startProcess("/usr/sbin/mariadbd", args, join(this.dir, "stdout.log"));
    this.frozen = false;
  }

  async kill(): Promise<void> {
    if (!this.proc) return;
    signal(this.proc, "SIGCONT");
    signal(this.proc, "SIGKILL");
    await exited(this.proc);
  }

  freeze(): void {
    if (this.proc) signal(this.proc, "SIGSTOP");
    this.frozen = true;
  }

  thaw(): void {
    if (this.proc) signal(this.proc, "SIGCONT");
    this.frozen = false;
  }

  /** The node's wsrep_local_state (4: Synced), or undefined when it does not answer within `timeoutMs`. */
  async state(timeoutMs = 1500): Promise<number | undefined> {
    let conn: mysql.Connection | undefined;
    const timer = new Promise<undefined>((r) => setTimeout(() => r(undefined), timeoutMs));
    const ask = (async () => {
      conn = await mysql.createConnection({ host: "127.0.0.1", port: this.ports.client, user: "root", connectTimeout: timeoutMs });
      conn.on("error", () => {});
      const [rows] = await conn.query({ sql: "SHOW STATUS LIKE 'wsrep_local_state'", timeout: timeoutMs });
      return Number((rows as { Value: string }[])[0]?.Value);
    })().catch(() => undefined);
    try {
      return await Promise.race([ask, timer]);
    } finally {
      (conn as mysql.Connection | undefined)?.destroy();
    }
  }

  /** Waits until the node reports Synced. */
  async synced(timeoutMs: number): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      if ((await this.state()) === 4) return;
      if (this.proc && this.proc.exitCode !== null) throw new Error(`${this.name} exited (code ${this.proc.exitCode}); ${this.errorLogTail()}`);
      await sleep(500);
    }
    throw new Error(`${this.name} not Synced within ${timeoutMs} ms; ${this.errorLogTail()}`);
  }

  /**
   * Waits until the node has been Synced in a three-node primary view for `stableMs` without a
   * break. A node continued after SIGSTOP reports its old Synced state until it has read the views
   * it missed, and a node the others evicted meanwhile can abort some seconds later: one Synced
   * answer does not show it is back.
   */
  async settled(timeoutMs: number, stableMs = 10_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    let since: number | undefined;
    while (Date.now() < end) {
      if (this.exitedOnItsOwn) throw new Error(`${this.name} exited (${this.proc?.exitCode ?? this.proc?.signalCode}); ${this.errorLogTail()}`);
      const ok = (await this.state()) === 4 && (await this.clusterSize()) === this.all.length;
      if (!ok) since = undefined;
      else if (since === undefined) since = Date.now();
      else if (Date.now() - since >= stableMs) return;
      await sleep(500);
    }
    throw new Error(`${this.name} not settled in the cluster within ${timeoutMs} ms; ${this.errorLogTail()}`);
  }

  /** True when the node's process has ended without the harness stopping it. */
  get exitedOnItsOwn(): boolean {
    return this.proc !== undefined && (this.proc.exitCode !== null || this.proc.signalCode !== null);
  }

  private async clusterSize(): Promise<number | undefined> {
    let conn: mysql.Connection | undefined;
    try {
      conn = await mysql.createConnection({ host: "127.0.0.1", port: this.ports.client, user: "root", connectTimeout: 1500 });
      conn.on("error", () => {});
      const [rows] = await conn.query({ sql: "SHOW STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_cluster_status')", timeout: 1500 });
      const v = new Map((rows as { Variable_name: string; Value: string }[]).map((r) => [r.Variable_name, r.Value]));
      return v.get("wsrep_cluster_status") === "Primary" ? Number(v.get("wsrep_cluster_size")) : undefined;
    } catch {
      return undefined;
    } finally {
      conn?.destroy();
    }
  }

  /** The last lines of the node's error.log, for a failure's message (the directory is removed at cleanup). */
  errorLogTail(lines = 15): string {
    const file = join(this.dir, "error.log");
    try {
      const tail = readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines);
      return `the end of ${file}:\n    ${tail.join("\n    ")}`;
    } catch {
      return `no ${file}`;
    }
  }
}

export interface Cluster {
  dir: string;
  nodes: GaleraNode[];
  /** HAProxy's front port. */
  front: number;
  /** mysql://root@127.0.0.1:<front> */
  url: string;
  haproxyConfigText: string;
  restartHaproxy(): Promise<void>;
  /** Cluster size as node 1..3 report it (the first that answers). */
  size(): Promise<number | undefined>;
  stop(): Promise<void>;
}

/**
 * Listening ports for the cluster, distinct and below Linux's ephemeral range (32768 and up): a
 * port the kernel hands out for port 0 can be taken, between the probe and mariadbd's bind, as the
 * local end of one of the many outgoing connections the harness and the tests make.
 */
async function clusterPorts(count: number): Promise<number[]> {
  const chosen = new Set<number>();
  let candidate = 20_000 + Math.floor(Math.random() * 10_000);
  while (chosen.size < count) {
    candidate = candidate >= 32_000 ? 20_000 : candidate + 1;
    if (!chosen.has(candidate) && (await listenable(candidate))) chosen.add(candidate);
  }
  return [...chosen];
}

function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

function portsFor(n: number, p: number[]): NodePorts {
  const [client, gcomm, ist, sst, check] = p.slice((n - 1) * 5, n * 5) as [number, number, number, number, number];
  return { n, client, gcomm, ist, sst, check };
}

/** One health-check port per node: 200 when the node is Synced, else 503. */
function healthServers(nodes: GaleraNode[]): http.Server[] {
  return nodes.map((node) => {
    const server = http.createServer((_req, res) => {
      void node.state(1500).then((s) => {
        res.writeHead(s === 4 ? 200 : 503, { "content-type": "text/plain", connection: "close" }).end(`wsrep_local_state=${s ?? "none"}\n`);
      });
    });
    server.listen(node.ports.check, "127.0.0.1");
    return server;
  });
}

/**
 * Starts the cluster and HAProxy; resolves when all three nodes are Synced and HAProxy answers.
 * A start that fails (a node that exits or never syncs) is logged with the node's error.log and
 * made once more, in a new directory on new ports, before the harness gives up.
 */
export async function startCluster(): Promise<Cluster> {
  ensureHaproxy();
  for (let attempt = 1; ; attempt++) {
    const started: { cluster?: Partial<Cluster> & { stop(): Promise<void> } } = {};
    try {
      return await startClusterOnce(started);
    } catch (err) {
      if (attempt >= 2) throw err;
      log(`the cluster did not start: ${(err as Error).message}`);
      log("starting it once more, in a new directory on new ports");
      await started.cluster?.stop();
    }
  }
}

async function startClusterOnce(started: { cluster?: { stop(): Promise<void> } }): Promise<Cluster> {
  const dir = mkdtempSync(join(os.tmpdir(), "billing-ha-"));
  removeAtCleanup(dir);
  // The nodes run as the mysql user (mariadbd drops to it): rsync SST's daemon, started by a
  // node, then runs as that user too (started by root it would switch to nobody, who cannot
  // write the data directory).
  chmodSync(dir, 0o755);
  const free = await clusterPorts(16);
  const ports = [portsFor(1, free), portsFor(2, free), portsFor(3, free)];
  const nodes = ports.map((p) => new GaleraNode(p, ports, join(dir, `node${p.n}`)));
  log(`cluster in ${dir}: initialising three data directories`);
  for (const n of nodes) n.init();
  const checks = healthServers(nodes);
  let haproxy: ChildProcess | undefined;
  const stop = async () => {
    for (const s of checks) s.close();
    if (haproxy) signal(haproxy, "SIGKILL");
    for (const n of nodes) await n.kill();
  };
  started.cluster = { stop };
  const first = nodes[0] as GaleraNode;
  first.start(true);
  await first.synced(120_000);
  log("node1 bootstrapped the cluster; node2 and node3 join (rsync SST)");
  for (const n of nodes.slice(1)) {
    n.start();
    await n.synced(Number(process.env.HA_JOIN_MS ?? 180_000));
  }
  const front = free[15] as number;
  const haproxyConfigText = haproxyConfig(front, ports, process.env.HA_WRITERS === "all" ? "all" : "one");
  const cfg = join(dir, "haproxy.cfg");
  writeFileSync(cfg, haproxyConfigText);
  const startHaproxy = async () => {
    haproxy = startProcess("/usr/sbin/haproxy", ["-db", "-f", cfg], join(dir, "haproxy.log"));
    await waitForSql(front, 30_000);
  };
  await startHaproxy();
  log(`HAProxy on 127.0.0.1:${front}, three nodes Synced`);
  return {
    dir,
    nodes,
    front,
    url: `mysql://root@127.0.0.1:${front}`,
    haproxyConfigText,
    restartHaproxy: async () => {
      if (haproxy) {
        signal(haproxy, "SIGTERM");
        await exited(haproxy);
      }
      await startHaproxy();
    },
    size: async () => {
      for (const n of nodes) {
        if (n.frozen) continue;
        try {
          const c = await mysql.createConnection({ host: "127.0.0.1", port: n.ports.client, user: "root", connectTimeout: 1500 });
          try {
            const [rows] = await c.query("SHOW STATUS LIKE 'wsrep_cluster_size'");
            return Number((rows as { Value: string }[])[0]?.Value);
          } finally {
            c.destroy();
          }
        } catch {
          // next node
        }
      }
      return undefined;
    },
    stop,
  };
}

/** Waits until `SELECT 1` answers through port `port`. */
export async function waitForSql(port: number, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    try {
      const c = await mysql.createConnection({ host: "127.0.0.1", port, user: "root", connectTimeout: 1000 });
      try {
        await c.query({ sql: "SELECT 1", timeout: 1000 });
        return Date.now() - t0;
      } finally {
        c.destroy();
      }
    } catch {
      if (Date.now() - t0 > timeoutMs) throw new Error(`nothing answers SQL on port ${port} within ${timeoutMs} ms`);
      await sleep(200);
    }
  }
}
