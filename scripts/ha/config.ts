/**
 * The configuration the high-availability harness runs with: each Galera node's mariadbd options
 * and HAProxy's configuration. docs/operations/high-availability.md shows these same texts (the
 * harness checks, before it starts anything, that the document quotes them as generated here).
 */

export interface NodePorts {
  /** The node's number, 1-based. */
  n: number;
  /** Client port (what HAProxy and the servers connect to). */
  client: number;
  /** Group communication (gcomm) port: the cluster's members talk on it. */
  gcomm: number;
  /** Incremental state transfer (IST) port. */
  ist: number;
  /** Full state snapshot transfer (SST, rsync) port. */
  sst: number;
  /** The port where the harness answers HAProxy's health check for this node (200 when Synced). */
  check: number;
}

/** mariadbd's options for node `node` of `all`, its data in `dir`. */
export function nodeOptions(node: NodePorts, all: readonly NodePorts[], dir: string): string[] {
  const cluster = all.map((p) => `127.0.0.1:${p.gcomm}`).join(",");
  return [
    "--no-defaults",
    `--datadir=${dir}/data`,
    `--socket=${dir}/mariadb.sock`,
    `--pid-file=${dir}/mariadb.pid`,
    `--log-error=${dir}/error.log`,
    "--user=mysql",
    "--bind-address=127.0.0.1",
    `--port=${node.client}`,
    "--skip-name-resolve",
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=48M",
    "--innodb-flush-log-at-trx-commit=2",
    "--max-connections=400",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_unicode_ci",
    // Galera: row-based replication, InnoDB only, interleaved auto-increment locks.
    "--binlog-format=ROW",
    "--default-storage-engine=InnoDB",
    "--innodb-autoinc-lock-mode=2",
    "--wsrep-on=ON",
    "--wsrep-provider=/usr/lib/galera/libgalera_smm.so",
    "--wsrep-cluster-name=billing",
    `--wsrep-cluster-address=gcomm://${cluster}`,
    `--wsrep-node-name=node${node.n}`,
    `--wsrep-node-address=127.0.0.1:${node.gcomm}`,
    `--wsrep-node-incoming-address=127.0.0.1:${node.client}`,
    `--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:${node.gcomm};ist.recv_addr=127.0.0.1:${node.ist};gcache.size=128M;evs.suspect_timeout=PT5S;evs.inactive_timeout=PT10S`,
    "--wsrep-sst-method=rsync",
    `--wsrep-sst-receive-address=127.0.0.1:${node.sst}`,
    "--wsrep-slave-threads=2",
    // HA_GENERAL_LOG=1: every statement each node receives, in the node's general.log (diagnosis).
    ...(process.env.HA_GENERAL_LOG ? ["--general-log=1", `--general-log-file=${dir}/general.log`] : []),
  ];
}

/**
 * HAProxy's configuration: one TCP front for the servers' DATABASE_URL, the nodes behind it.
 * `writers` "one" (the default, and what the document shows): every connection goes to the
 * first synced node in order, the others are backups that take over when it fails its check, so
 * writes never race on two nodes. "all" spreads connections over every synced node (multi-writer;
 * HA_WRITERS=all), where concurrent writes to the same rows fail certification at COMMIT.
 */
export function haproxyConfig(front: number, nodes: readonly NodePorts[], writers: "one" | "all" = "one"): string {
  return [
    "global",
    "    maxconn 4000",
    "",
    "defaults",
    "    mode tcp",
    "    timeout connect 2s",
    "    timeout client 1h",
    "    timeout server 1h",
    "    timeout check 2s",
    "",
    "listen galera",
    `    bind 127.0.0.1:${front}`,
    "    balance leastconn",
    // Backups: the first synced one takes every connection while the primary node is down.
    // The check asks the node's health port (served beside each node): 200 only when the node's
    // wsrep_local_state is 4 (Synced). A node that is joining, donating, or frozen gets no new
    // connections, and its open ones are cut so that pools reconnect to a synced node.
    "    option httpchk GET /",
    "    http-check expect status 200",
    "    default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions",
    ...nodes.map((p, i) => `    server node${p.n} 127.0.0.1:${p.client} check port ${p.check}${writers === "one" && i > 0 ? " backup" : ""}`),
    "",
  ].join("\n");
}

/** The ports the harness uses when none are busy (documented; the harness picks free ones). */
export const DOC_PORTS: NodePorts[] = [1, 2, 3].map((n) => ({ n, client: 33060 + n, gcomm: 45670 + n, ist: 45680 + n, sst: 45690 + n, check: 9200 + n }));
export const DOC_FRONT = 33060;
