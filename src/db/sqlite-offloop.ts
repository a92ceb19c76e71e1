/**
 * What SQLite would otherwise do on the event loop at COMMIT (issue 12): better-sqlite3 runs every
 * statement synchronously, so a COMMIT held the server's one thread for
 * - the WAL's fsync (synchronous = FULL): the disk's latency, tens of ms on a busy machine;
 * - and, every ~1,000 pages written, the automatic checkpoint: copying the WAL's pages into the
 *   database file and syncing it (20–30 ms of CPU for a few 1,000-event batches).
 * Both move off it here, with the same guarantee for what the service acknowledges:
 * - the connection runs with synchronous = NORMAL (COMMIT writes the WAL, no fsync) and each
 *   call that changed rows waits, before its answer, for an fsync of the WAL file on libuv's
 *   thread pool (`WalSync`): an acknowledged write is on disk as before, and concurrent callers
 *   share one fsync. Other calls go on meanwhile;
 * - the connection's automatic checkpoint is off, and a worker thread with its own connection
 *   checkpoints (PASSIVE: it never waits for, nor blocks, this connection) every
 *   CHECKPOINT_EVERY_MS. Should that thread die, the automatic checkpoint is turned back on.
 * Not for ":memory:" (no file, no WAL).
 */
import { type FileHandle, open } from "node:fs/promises";
import { dirname } from "node:path";
import { Worker } from "node:worker_threads";
import { SQLITE_MODULE_PATH } from "./sqlite-module.js";

/** How often the checkpoint thread copies the WAL into the database file. */
export const CHECKPOINT_EVERY_MS = 200;

/** The part of a better-sqlite3 connection this module uses. */
export interface SqliteConnection {
  pragma(s: string): unknown;
  prepare(sql: string): { pluck(): { get(): unknown } };
}

/** Runs in the worker thread (CommonJS, from source): one connection, a PASSIVE checkpoint on a timer. */
const CHECKPOINTER = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.module);
// Never creates the file: a connection closed (and its file removed) before this thread came up leaves nothing behind.
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma("busy_timeout = 0");
db.pragma("wal_autocheckpoint = 0");
const timer = setInterval(() => {
  try { db.pragma("wal_checkpoint(PASSIVE)"); } catch (err) { if (err && err.code !== "SQLITE_BUSY" && err.code !== "SQLITE_LOCKED") throw err; }
}, workerData.everyMs);
parentPort.on("message", () => { clearInterval(timer); db.close(); parentPort.close(); });
`;

/**
 * Starts the checkpoint thread for the database file at `path` and turns `conn`'s automatic
 * checkpoint off; `close` stops it (after the data source is closed: the last connection to
 * close checkpoints what is left). `onFailure` hears of a thread that died (the automatic
 * checkpoint is back on by then).
 */
export function startCheckpointer(path: string, conn: SqliteConnection, onFailure: (err: unknown) => void): { close(): Promise<void> } {
  const worker = new Worker(CHECKPOINTER, {
    eval: true,
    workerData: { module: SQLITE_MODULE_PATH, path, everyMs: CHECKPOINT_EVERY_MS },
  });
  worker.unref();
  let closing = false;
  conn.pragma("wal_autocheckpoint = 0");
  const fallBack = (err: unknown) => {
    if (closing) return;
    closing = true;
    try {
      conn.pragma("wal_autocheckpoint = 1000");
    } catch {
      // the connection is closed already
    }
    onFailure(err);
  };
  worker.on("error", fallBack);
  worker.on("exit", (code) => fallBack(new Error(`the SQLite checkpoint thread stopped (exit code ${code})`)));
  return {
    async close() {
      if (closing) return;
      closing = true;
      const exited = new Promise((r) => worker.once("exit", r));
      worker.ref(); // waited for: it keeps the process up until it has closed its connection
      worker.postMessage("close");
      await exited;
    },
  };
}

/**
 * Makes what `conn` committed durable off the event loop: `afterWrite()` resolves once an fsync
 * of the WAL file that began after the caller's COMMIT has finished, or at once when no row
 * changed since the last such fsync began. Callers in the meantime share the next fsync.
 */
export class WalSync {
  private readonly changes: { get(): unknown };
  private synced = 0;
  private inFlight: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  private file: FileHandle | undefined;
  private dirSynced = false;

  constructor(
    private readonly path: string,
    conn: SqliteConnection,
  ) {
    conn.pragma("synchronous = NORMAL");
    this.changes = conn.prepare("SELECT total_changes()").pluck();
  }

  afterWrite(): Promise<void> {
    if (Number(this.changes.get()) === this.synced) return Promise.resolve();
    if (this.inFlight === undefined) return this.start();
    // The fsync under way may have begun before this caller's COMMIT: the one after it.
    this.next ??= this.inFlight.then(
      () => {
        this.next = undefined;
        return this.afterWrite();
      },
      () => {
        this.next = undefined;
        return this.afterWrite();
      },
    );
    return this.next;
  }

  private start(): Promise<void> {
    const at = Number(this.changes.get());
    this.inFlight = (async () => {
      try {
        this.file ??= await open(`${this.path}-wal`, "r");
        await this.file.sync();
        if (!this.dirSynced) {
          // The WAL file's own directory entry, once (it is created at the first write).
          const dir = await open(dirname(this.path), "r");
          try {
            await dir.sync();
          } finally {
            await dir.close();
          }
          this.dirSynced = true;
        }
        this.synced = Math.max(this.synced, at);
      } finally {
        this.inFlight = undefined;
      }
    })();
    return this.inFlight;
  }

  async close(): Promise<void> {
    await this.inFlight?.catch(() => {});
    await this.file?.close();
    this.file = undefined;
  }
}
