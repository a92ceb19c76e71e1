/**
 * How stores reach the database. On MySQL every call takes a pooled connection and transactions
 * are the database's. TypeORM drives SQLite through one shared connection, where two
 * transactions in flight at once would run inside each other; so on SQLite every call is queued
 * behind the running transaction (SQLite serialises writers anyway).
 */
import type { DataSource, EntityManager } from "typeorm";
import type { Dialect } from "./columns.js";

export class Sql {
  private tail: Promise<unknown> = Promise.resolve();
  constructor(
    readonly dataSource: DataSource,
    readonly dialect: Dialect,
  ) {}

  private queued<T>(fn: () => Promise<T>): Promise<T> {
    if (this.dialect !== "sqlite") return fn();
    const result = this.tail.then(fn, fn);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** One statement or a few reads, outside a transaction. */
  run<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    return this.queued(() => fn(this.dataSource.manager));
  }

  /**
   * `fn` in one transaction: all of it is committed, or none. `readCommitted` (MySQL) makes each
   * statement see what others committed meanwhile, without locking reads.
   */
  transaction<T>(fn: (em: EntityManager) => Promise<T>, options: { readCommitted?: boolean } = {}): Promise<T> {
    if (options.readCommitted && this.dialect === "mysql") return this.dataSource.transaction("READ COMMITTED", fn);
    return this.queued(() => this.dataSource.transaction(fn));
  }
}
