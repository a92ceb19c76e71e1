/**
 * MySQL transactions in as few round trips as they allow (Sql.pipelined), on the pool's own
 * mysql2 connection rather than through TypeORM's query runner.
 */
import { auditSql } from "./sql-audit.js";
import { type Pipeline, STATEMENT_BYTES, type Statement, estimatedBytes, groupBySize } from "./statements.js";

/** The driver's own pooled connection (mysql2's callback API), as TypeORM's MySQL driver holds it. */
export interface RawConnection {
  query(sql: string, values: unknown[] | undefined, cb: (err: Error | null, result: unknown) => void): void;
  /** The driver's own formatting of `?` placeholders (escaping each value). */
  format(sql: string, values: unknown[]): string;
  release(): void;
  destroy(): void;
}
export interface RawPool {
  getConnection(cb: (err: Error | null, conn: RawConnection) => void): void;
  query: RawConnection["query"];
}

export function rawQuery(conn: Pick<RawConnection, "query">, sql: string, values: unknown[] | undefined): Promise<unknown> {
  return new Promise((resolve, reject) => conn.query(sql, values, (err, result) => (err ? reject(err) : resolve(result))));
}

/**
 * MariaDB: a statement that fails with a deadlock (1213, so the caller runs the transaction
 * again) when the session is no longer in a transaction. On Galera a transaction aborted by a
 * replicated write (a brute-force abort) while its session runs a multi-statement packet is
 * rolled back without the session hearing it: MariaDB 10.11 runs the packet's remaining statements, COMMIT included, one by one in autocommit mode
 * and answers each with success. The events of an ingest were rolled back while its last
 * statements committed on their own, and the caller was told the whole had committed. One of
 * these before each statement of the transaction stops the packet at the first statement that
 * would run outside it. Reads are guarded too: with the reads left unguarded, the harness
 * (scripts/ha/ingest-loss.ts) still lost one acknowledged batch in 3,639. Each guard costs the
 * server a few tens of microseconds.
 */
export const IN_TRANSACTION_GUARD =
  "BEGIN NOT ATOMIC IF @@in_transaction = 0 THEN SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock: the transaction was rolled back by the server (no longer in a transaction)'; END IF; END";

/** MySQL: one multi-statement packet per run (more when the statements are large); BEGIN goes with the first, COMMIT with the deferred. */
export class MysqlPipeline implements Pipeline {
  private deferred: Statement[] = [];
  /** Per deferred statement, the check of its result (Pipeline.defer). */
  private checks: (((result: unknown) => void) | undefined)[] = [];
  readonly committed: (() => void)[] = [];
  private begin: Statement[];
  sent = false;

  constructor(
    private readonly conn: RawConnection,
    readCommitted: boolean,
    /** MariaDB: each statement of the transaction preceded by IN_TRANSACTION_GUARD. */
    private readonly guarded = false,
  ) {
    this.begin = [...(readCommitted ? [["SET TRANSACTION ISOLATION LEVEL READ COMMITTED", []] as const] : []), ["START TRANSACTION", []]];
  }

  async run(statements: readonly Statement[]): Promise<unknown[]> {
    const opening = this.begin.length;
    const all = [...this.begin, ...this.deferred, ...statements];
    const skip = all.length - statements.length;
    const checks = this.checks;
    this.begin = [];
    this.deferred = [];
    this.checks = [];
    if (all.length === 0) return [];
    this.sent = true;
    for (const [sql, params] of all) auditSql(this, sql, params);
    const results: unknown[] = [];
    let index = 0;
    for (const packet of groupBySize(all, estimatedBytes, STATEMENT_BYTES)) {
      // Each statement formatted on its own: a statement with its values inline (mysqlText) may
      // hold a `?` in a literal, which must not take a later statement's parameter.
      let text = "";
      const guards: boolean[] = [];
      for (const [sql, params] of packet) {
        const guard = this.guarded && index++ >= opening;
        if (guard) text += `${text === "" ? "" : ";\n"}${IN_TRANSACTION_GUARD}`;
        guards.push(guard);
        text += `${text === "" ? "" : ";\n"}${params.length === 0 ? sql : this.conn.format(sql, [...params])}`;
      }
      const raw: unknown = await rawQuery(this.conn, text, undefined);
      // mysql2 answers a single statement with its result, several with one result per statement.
      const answers = packet.length === 1 && !guards[0] ? [raw] : (raw as unknown[]);
      let at = 0;
      for (const guard of guards) {
        if (guard) at++;
        results.push(answers[at++]);
      }
    }
    for (const [i, check] of checks.entries()) check?.(results[opening + i]);
    return results.slice(skip);
  }

  defer(statement: Statement, check?: (result: unknown) => void): void {
    this.deferred.push(statement);
    this.checks.push(check);
  }

  async flush(): Promise<void> {
    if (this.deferred.length > 0) await this.run([]);
  }

  afterCommit(fn: () => void): void {
    this.committed.push(fn);
  }

  private finished = false;

  async finish(statements: readonly Statement[]): Promise<unknown[]> {
    // A deferred statement whose result is checked goes before the COMMIT's packet.
    if (this.checks.some((c) => c !== undefined)) await this.run([]);
    const out = await this.run([...statements, ["COMMIT", []]]);
    this.finished = true;
    return out.slice(0, statements.length);
  }

  async commit(): Promise<void> {
    if (this.finished) return;
    if (!this.sent && this.deferred.length === 0) return; // nothing was ever sent: no transaction to end
    if (this.checks.some((c) => c !== undefined)) await this.run([]);
    await this.run([["COMMIT", []]]);
  }
}
