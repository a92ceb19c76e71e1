/**
 * `npm run test:ha`: the service on a three-node MariaDB Galera cluster behind HAProxy, three
 * servers (two with WORKERS=2), under a mixed load (batch ingest, subscriptions on test clocks
 * paid by card, clock advances, webhook deliveries), through four faults in turn: kill -9 a
 * database node (it rejoins), SIGSTOP a node for 30 s, kill -9 a server (it is restarted), restart
 * HAProxy. After each the invariants are checked from the database (checks.ts) and a table is
 * printed: refused requests, how long the service took to answer again, what the checks found.
 * Exits 1 when an invariant is violated (or the harness fails), 0 otherwise.
 *
 * Env: HA_KEEP=1 keeps the temporary directory (node data, logs); HA_FREEZE_SECONDS (30).
 */
import { writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import { randomBase62 } from "../../src/billing/ids.js";
import { type Findings, findings, lockStatementsInSource, schemaProblems, tableLocksTaken, violations } from "./checks.js";
import { Client, type Refusals } from "./client.js";
import { type Cluster, type GaleraNode, log, sleep, startCluster } from "./cluster.js";
import { docMismatch } from "./doc.js";
import { type Acknowledged, Load, Probe, WebhookReceiver, setUpCatalog } from "./load.js";
import { cleanup } from "./processes.js";
import { ServiceProcess } from "./servers.js";

const FREEZE_SECONDS = Number(process.env.HA_FREEZE_SECONDS ?? 30);
/** Load before each fault, and after recovery, in ms. */
const SETTLE_MS = Number(process.env.HA_SETTLE_MS ?? 8000);
const API_KEY = `sk_test_${randomBase62(24)}`;
const DATABASE = "billing_ha";

interface Row {
  scenario: string;
  refused: Refusals;
  /** From the fault until every server answered the probe again. */
  probeRecoveryMs: number;
  /** The longest a retried request waited for its answer. */
  retryWaitMs: number;
  /** What the fault took to undo (a node rejoined, a server restarted), when it applies. */
  repairMs: number | undefined;
  batches: number;
  flows: number;
  flowsAbandoned: number;
  found: Findings;
  problems: string[];
}

interface World {
  cluster: Cluster;
  servers: ServiceProcess[];
  client: Client;
  ack: Acknowledged;
  receiver: WebhookReceiver;
  catalog: Awaited<ReturnType<typeof setUpCatalog>>;
  /** Nodes found stopped without a fault having stopped them (restarted before the next scenario). */
  nodesStopped: string[];
}

async function startServers(cluster: Cluster, key: string, receiverDir: string): Promise<ServiceProcess[]> {
  const admin = await mysql.createConnection({ host: "127.0.0.1", port: cluster.front, user: "root" });
  await admin.query(`CREATE DATABASE ${DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const vars = (workers: number) => ({
    DATABASE_URL: `${cluster.url}/${DATABASE}`,
    BILLING_BOOTSTRAP_API_KEY: key,
    WORKERS: String(workers),
    LOG_LEVEL: "warn",
    WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
    WEBHOOK_RETRY_BASE_MS: "1000",
    SCHEDULER_INTERVAL_MS: "2000",
  });
  const servers = [
    await ServiceProcess.create("server1", receiverDir, vars(1)),
    await ServiceProcess.create("server2", receiverDir, vars(2)),
    await ServiceProcess.create("server3", receiverDir, vars(2)),
  ];
  // The first runs the migrations; the others start on the migrated database.
  await (servers[0] as ServiceProcess).start();
  await Promise.all(servers.slice(1).map((s) => s.start()));
  return servers;
}

/** Runs the load through `fault`, then checks the invariants. */
async function scenario(w: World, name: string, fault: (() => Promise<number | undefined>) | undefined, settleMs = SETTLE_MS): Promise<Row> {
  log(`scenario: ${name}`);
  w.client.takeRefusals();
  w.client.maxRetryWaitMs = 0;
  const probe = new Probe(w.client, () => w.servers.map((s) => s.port));
  const load = new Load(w.client, w.catalog, w.ack, `${name.replace(/\W+/g, "-")}`);
  load.start();
  await sleep(settleMs);
  const faultAt = Date.now();
  probe.lastFailure = 0;
  const repairMs = fault ? await fault() : undefined;
  await sleep(settleMs);
  await load.stop();
  await probe.stop();
  const probeRecoveryMs = probe.lastFailure > faultAt ? probe.lastFailure - faultAt : 0;
  const refused = w.client.takeRefusals();
  log(`${name}: load stopped (${load.batches} batches, ${load.flows} subscriptions); checking`);
  const found = await readFindings(w);
  const problems = [...violations(found), ...load.errors.map((e) => `load: ${e}`)];
  for (const p of problems) log(`VIOLATION ${name}: ${p}`);
  await restartStoppedNodes(w);
  return { scenario: name, refused, probeRecoveryMs, retryWaitMs: w.client.maxRetryWaitMs, repairMs, batches: load.batches, flows: load.flows, flowsAbandoned: load.flowsAbandoned, found, problems };
}

/**
 * The findings, read through HAProxy as the servers read. A node marked up again (after a freeze or
 * a kill) makes HAProxy cut the sessions on its backups (`shutdown-backup-sessions`), the harness's
 * own included: the reads are then made again on a new connection, up to three times.
 */
async function readFindings(w: World): Promise<Findings> {
  for (let attempt = 1; ; attempt++) {
    const db = await mysql.createConnection({ host: "127.0.0.1", port: w.cluster.front, user: "root", database: DATABASE });
    try {
      return await findings(db, w.ack, w.receiver);
    } catch (err) {
      if (attempt >= 3 || !connectionLost(err)) throw err;
      log(`checking: the connection was cut (${(err as Error).message}); reading again`);
    } finally {
      db.destroy();
    }
  }
}

const connectionLost = (err: unknown) =>
  err instanceof Error && (/closed state|connection lost|ECONNRESET|EPIPE/i.test(err.message) || ["PROTOCOL_CONNECTION_LOST", "ECONNRESET", "EPIPE"].includes((err as { code?: string }).code ?? ""));

/** kill -9 a node; restart it from its recovered position once the cluster has gone on without it. */
async function killNode(node: GaleraNode): Promise<number> {
  await node.kill();
  await sleep(10_000);
  const t0 = Date.now();
  const position = node.recoveredPosition();
  node.start(false, position);
  await node.settled(300_000);
  return Date.now() - t0;
}

async function freezeNode(node: GaleraNode): Promise<number> {
  node.freeze();
  await sleep(FREEZE_SECONDS * 1000);
  const t0 = Date.now();
  node.thaw();
  try {
    await node.settled(120_000);
  } catch (err) {
    // Left out of the cluster while stopped (it stays non-primary, or aborts once it reads that it
    // was evicted): restarted, as an operator would, from its recovered position. The scenario is
    // about the service, not the node.
    log(`${node.name} did not rejoin after SIGCONT: ${(err as Error).message}; restarting it`);
    await restartNode(node);
  }
  return Date.now() - t0;
}

async function restartNode(node: GaleraNode): Promise<void> {
  await node.kill();
  node.start(false, node.recoveredPosition());
  await node.settled(300_000);
}

/**
 * A node that stopped on its own since the last scenario is logged with the end of its error log
 * and restarted, so that the next scenario starts with three nodes; the run's output counts it.
 */
async function restartStoppedNodes(w: World): Promise<void> {
  for (const node of w.cluster.nodes) {
    if (!node.exitedOnItsOwn) continue;
    w.nodesStopped.push(node.name);
    log(`${node.name} stopped on its own; ${node.errorLogTail()}`);
    await restartNode(node);
  }
}

async function killServer(server: ServiceProcess): Promise<number> {
  await server.kill9();
  const t0 = Date.now();
  await server.start();
  return Date.now() - t0;
}

async function restartHaproxy(cluster: Cluster): Promise<number> {
  const t0 = Date.now();
  await cluster.restartHaproxy();
  return Date.now() - t0;
}

const secs = (ms: number | undefined) => (ms === undefined ? "–" : (ms / 1000).toFixed(1));

function table(rows: Row[]): string {
  const head = [
    "scenario",
    "batches",
    "subscriptions (abandoned)",
    "503",
    "409",
    "5xx other",
    "no answer",
    "repair s",
    "probe recovery s",
    "longest retry s",
    "events missing/doubled",
    "invoices wrong",
    "charges doubled",
    "webhooks missing",
  ];
  const lines = [
    `| ${head.join(" | ")} |`,
    `|---|${head
      .slice(1)
      .map(() => "--:|")
      .join("")}`,
  ];
  for (const r of rows) {
    const cells = [
      r.scenario,
      String(r.batches),
      `${r.flows} (${r.flowsAbandoned})`,
      String(r.refused.s503),
      String(r.refused.s409),
      String(r.refused.other),
      String(r.refused.network),
      secs(r.repairMs),
      secs(r.probeRecoveryMs),
      secs(r.retryWaitMs),
      `${r.found.eventsMissing}/${r.found.eventsDoubled}`,
      String(r.found.invoicesWrong.length),
      String(r.found.chargesDoubled),
      String(r.found.webhooksMissing),
    ];
    lines.push(`| ${cells.join(" | ")} |`);
  }
  return lines.join("\n");
}

async function main(): Promise<number> {
  const t0 = Date.now();
  const docProblem = docMismatch();
  if (docProblem) log(`docs/operations/high-availability.md: ${docProblem}`);
  const cluster = await startCluster();
  const receiver = new WebhookReceiver();
  await receiver.start();
  log("starting three servers (server2 and server3 with WORKERS=2)");
  const servers = await startServers(cluster, API_KEY, cluster.dir);
  const db = await mysql.createConnection({ host: "127.0.0.1", port: cluster.front, user: "root", database: DATABASE });
  const setupProblems = [...(await schemaProblems(db, DATABASE)), ...lockStatementsInSource().map((f) => `${f} issues GET_LOCK or a table lock`)];
  if (docProblem) setupProblems.push(`docs/operations/high-availability.md: ${docProblem}`);
  const client = new Client(() => servers.map((s) => s.port), API_KEY);
  const catalog = await setUpCatalog(client, receiver.url);
  await db.end();
  const w: World = { cluster, servers, client, ack: { eventKeys: new Set(), batchAnswers: new Map(), finishedFlows: new Map() }, receiver, catalog, nodesStopped: [] };
  const nodes = cluster.nodes as [GaleraNode, GaleraNode, GaleraNode];
  const rows: Row[] = [];
  const all: [string, string, (() => Promise<number>) | undefined][] = [
    ["none", "no fault", undefined],
    ["node", "kill -9 DB node 1 (the writer), rejoin", () => killNode(nodes[0])],
    ["freeze", `SIGSTOP DB node 1 (the writer) ${FREEZE_SECONDS} s`, () => freezeNode(nodes[0])],
    ["server", "kill -9 server 2 (WORKERS=2), restart", () => killServer(servers[1] as ServiceProcess)],
    ["haproxy", "restart HAProxy", () => restartHaproxy(cluster)],
  ];
  // HA_SCENARIOS=freeze,server runs only those (after the fault-free one).
  const only = process.env.HA_SCENARIOS?.split(",");
  for (const [id, name, fault] of all) if (!only || id === "none" || only.includes(id)) rows.push(await scenario(w, name, fault));
  await restartStoppedNodes(w);
  for (const n of nodes) {
    const c = await mysql.createConnection({ host: "127.0.0.1", port: n.ports.client, user: "root" });
    const locks = await tableLocksTaken(c);
    await c.end();
    if (locks > 0) setupProblems.push(`${n.name}: ${locks} LOCK TABLES statements since it started`);
  }
  client.close();
  receiver.close();
  for (const s of servers) await s.stop();
  await cluster.stop();
  const out = [
    table(rows),
    "",
    `Events acknowledged: ${w.ack.eventKeys.size}; subscriptions finished: ${w.ack.finishedFlows.size}; webhook events received: ${receiver.arrivals.size} (${rows.at(-1)?.found.webhooksRepeated ?? 0} more than once); stored but unacknowledged events: ${rows.at(-1)?.found.eventsUnacknowledged ?? 0}.`,
    `Database nodes that stopped on their own (restarted): ${w.nodesStopped.length === 0 ? "none" : w.nodesStopped.join(", ")}.`,
    `Schema and statements: ${setupProblems.length === 0 ? "every table InnoDB with a primary key; no GET_LOCK or table locks" : setupProblems.join("; ")}.`,
    `Total run time: ${((Date.now() - t0) / 1000).toFixed(0)} s.`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
  writeFileSync(join(os.tmpdir(), "billing-ha-last-run.md"), `${out.join("\n")}\n`);
  const failed = rows.some((r) => r.problems.length > 0) || setupProblems.length > 0;
  return failed ? 1 : 0;
}

main()
  .then((code) => {
    cleanup();
    process.exit(code);
  })
  .catch((err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    cleanup();
    process.exit(1);
  });
