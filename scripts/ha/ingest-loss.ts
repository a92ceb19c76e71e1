/**
 * Acknowledged usage events on a multi-writer cluster (`npx tsx scripts/ha/ingest-loss.ts`): the Galera
 * cluster with HAProxy spreading connections over every node (as HA_WRITERS=all), two servers,
 * several clients sending 100-event batches with unique idempotency keys for HA_INGEST_SECONDS
 * (60), then every acknowledged key counted on each node's own port. Every ingest writes the same
 * hot rows, so ingests on different nodes keep failing certification and are retried: an
 * accepted event must be stored exactly once all the same. Exits 1 when one is not.
 */
import { join } from "node:path";
import mysql from "mysql2/promise";
import { randomBase62 } from "../../src/billing/ids.js";
import { Client } from "./client.js";
import { log, sleep, startCluster } from "./cluster.js";
import { cleanup } from "./processes.js";
import { ServiceProcess } from "./servers.js";

const DATABASE = "billing_ha";
const SECONDS = Number(process.env.HA_INGEST_SECONDS ?? 60);
const LOOPS = Number(process.env.HA_INGEST_LOOPS ?? 6);

async function main(): Promise<number> {
  process.env.HA_WRITERS = "all";
  const cluster = await startCluster();
  const admin = await mysql.createConnection({ host: "127.0.0.1", port: cluster.front, user: "root" });
  await admin.query(`CREATE DATABASE ${DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const key = `sk_test_${randomBase62(24)}`;
  const vars = { DATABASE_URL: `${cluster.url}/${DATABASE}`, BILLING_BOOTSTRAP_API_KEY: key, WORKERS: "1", LOG_LEVEL: "warn" };
  const servers = [await ServiceProcess.create("server1", cluster.dir, vars), await ServiceProcess.create("server2", cluster.dir, vars)];
  await (servers[0] as ServiceProcess).start();
  await (servers[1] as ServiceProcess).start();
  const client = new Client(() => servers.map((s) => s.port), key);
  await client.json("POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } }, "setup-metric");
  const subjects: string[] = [];
  for (let i = 0; i < 10; i++) subjects.push((await client.json("POST", "/subjects", { external_id: `ingest-${i}` }, `setup-subject-${i}`)).id);
  log(`ingesting from ${LOOPS} clients for ${SECONDS} s`);
  const accepted = new Set<string>();
  let batches = 0;
  let seq = 0;
  const until = Date.now() + SECONDS * 1000;
  const loop = async () => {
    while (Date.now() < until) {
      const b = seq++;
      const now = new Date().toISOString();
      const events = Array.from({ length: 100 }, (_, i) => ({ idempotency_key: `b${b}-e${i}`, subject_id: subjects[(b + i) % subjects.length], event_name: "api", timestamp: now, data: { n: "1" } }));
      const answer = await client.call("POST", "/usage-events/batch", { events });
      const r = JSON.parse(answer.body) as { results: { status: string }[] };
      r.results.forEach((x, i) => {
        if (x.status === "accepted") accepted.add(events[i]?.idempotency_key as string);
      });
      batches++;
    }
  };
  await Promise.all(Array.from({ length: LOOPS }, loop));
  client.close();
  for (const s of servers) await s.stop();
  await sleep(2000);
  let lost = 0;
  const lines: string[] = [];
  for (const n of cluster.nodes) {
    const c = await mysql.createConnection({ host: "127.0.0.1", port: n.ports.client, user: "root", database: DATABASE });
    const [rows] = await c.query("SELECT idempotency_key AS k, COUNT(*) AS n FROM usage_events GROUP BY idempotency_key");
    // What the same transactions added to the hot rows: each must count the stored events exactly.
    const [sums] = await c.query("SELECT (SELECT SUM(accepted) FROM environment_ingest_hours) AS hours, (SELECT SUM(event_count) FROM usage_rollups) AS totals");
    await c.end();
    const counted = (sums as { hours: unknown; totals: unknown }[])[0];
    const stored = new Map((rows as { k: string; n: number }[]).map((r) => [r.k, Number(r.n)]));
    const missing = [...accepted].filter((k) => !stored.has(k));
    const twice = [...stored.values()].filter((n) => n > 1).length;
    const miscounted = Number(counted?.hours) !== stored.size || Number(counted?.totals) !== stored.size;
    lost = Math.max(lost, missing.length + twice + (miscounted ? 1 : 0));
    const batchesMissing = new Set(missing.map((k) => k.split("-")[0]));
    lines.push(
      `${n.name}: ${stored.size} events stored, ${missing.length} acknowledged missing (batches ${[...batchesMissing].slice(0, 10).join(" ")}), ${twice} stored twice; counted ${counted?.hours} in the ingest hours, ${counted?.totals} in the hourly totals`,
    );
  }
  await cluster.stop();
  process.stdout.write(`${batches} batches answered, ${accepted.size} events accepted\n${lines.join("\n")}\nserver logs: ${join(cluster.dir, "server1.log")} (kept only with HA_KEEP)\n`);
  return lost > 0 ? 1 : 0;
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
