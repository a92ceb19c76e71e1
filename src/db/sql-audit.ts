/**
 * An opt-in record of the SQL the service sends (sharding readiness, issue 37): every distinct
 * statement (its text normalized: literals, placeholders and repeated VALUES rows folded), how
 * often it ran, whether inside a transaction, and the environment IDs it bound; and every
 * transaction or statement that bound more than one environment. Off unless started: the hooks
 * (Sql.query, the pipelines, TypeORM's logger) cost one check of a module variable then.
 *
 * An environment ID is recognised by its shape (`env_` and 22 base62 characters, ids.ts), in the
 * parameters or inline in the text (ingestion's rows carry their values inline, mysql-escape.ts).
 */
import { writeFileSync } from "node:fs";
import type { Logger } from "typeorm";

const ENVIRONMENT_ID = /\benv_[0-9A-Za-z]{22}\b/g;

export interface AuditedStatement {
  /** The normalized text. */
  text: string;
  /** One text it was sent as (with its placeholders, before normalizing). */
  example: string;
  count: number;
  /** Times it ran inside a transaction. */
  inTransaction: number;
  /** Distinct environment IDs it bound, over all its runs. */
  environments: Set<string>;
  /** Runs that bound no environment ID. */
  withoutEnvironment: number;
}

/** A transaction (or a statement on its own) that bound more than one environment. */
export interface CrossEnvironment {
  environments: string[];
  statements: string[];
}

interface OpenTransaction {
  environments: Set<string>;
  statements: string[];
}

/** Folds what varies between runs of one statement, so each shape is recorded once. */
export function normalizeSql(sql: string): string {
  return (
    sql
      .replace(/'(?:[^'\\]|\\.|'')*'/g, "?") // string literals
      .replace(/[`"]/g, "") // identifier quotes (MySQL backticks, SQLite double quotes)
      .replace(/\b\d+(?:\.\d+)?\b/g, "?") // numbers
      .replace(/\s+/g, " ")
      .trim()
      // a list of placeholders, and repeated rows of them, as one
      .replace(/\?(?:\s*,\s*\?)+/g, "?")
      .replace(/\(\?\)(?:\s*,\s*\(\?\))+/g, "(?)")
      .replace(/(\([^()]*\))(?:\s*,\s*\1)+/g, "$1")
  );
}

/** The environment IDs in a statement's parameters and its inline literals. */
export function environmentIdsOf(sql: string, params: readonly unknown[] | undefined): string[] {
  const out = new Set<string>();
  for (const p of params ?? []) if (typeof p === "string") for (const m of p.match(ENVIRONMENT_ID) ?? []) if (m === p) out.add(m);
  for (const m of sql.match(ENVIRONMENT_ID) ?? []) out.add(m);
  return [...out];
}

export class SqlAudit {
  readonly statements = new Map<string, AuditedStatement>();
  readonly crossEnvironment: CrossEnvironment[] = [];
  transactions = 0;
  private readonly open = new WeakMap<object, OpenTransaction>();

  /**
   * One statement sent on `channel` (a TypeORM query runner, a pipeline's connection; undefined
   * for one statement outside any transaction). START TRANSACTION / BEGIN opens the channel's
   * transaction, COMMIT / ROLLBACK closes it.
   */
  record(channel: object | undefined, sql: string, params: readonly unknown[] | undefined): void {
    const head = sql.trimStart().slice(0, 20).toUpperCase();
    if (channel !== undefined && (head.startsWith("START TRANSACTION") || head.startsWith("BEGIN"))) {
      this.open.set(channel, { environments: new Set(), statements: [] });
      return;
    }
    if (head.startsWith("COMMIT") || head.startsWith("ROLLBACK")) {
      if (channel !== undefined) this.close(channel);
      return;
    }
    if (head.startsWith("SET TRANSACTION")) return;
    const text = normalizeSql(sql);
    const envs = environmentIdsOf(sql, params);
    const tx = channel === undefined ? undefined : this.open.get(channel);
    let s = this.statements.get(text);
    if (s === undefined) {
      s = { text, example: sql, count: 0, inTransaction: 0, environments: new Set(), withoutEnvironment: 0 };
      this.statements.set(text, s);
    }
    s.count++;
    if (tx) s.inTransaction++;
    if (envs.length === 0) s.withoutEnvironment++;
    for (const e of envs) s.environments.add(e);
    if (tx) {
      for (const e of envs) tx.environments.add(e);
      tx.statements.push(text);
    } else if (envs.length > 1) this.crossEnvironment.push({ environments: envs, statements: [text] });
  }

  private close(channel: object): void {
    const tx = this.open.get(channel);
    if (tx === undefined) return;
    this.open.delete(channel);
    this.transactions++;
    if (tx.environments.size > 1) this.crossEnvironment.push({ environments: [...tx.environments], statements: [...new Set(tx.statements)] });
  }

  toJSON(): unknown {
    return {
      transactions: this.transactions,
      statements: [...this.statements.values()].map((s) => ({ ...s, environments: s.environments.size })),
      crossEnvironment: this.crossEnvironment,
    };
  }

  /** The record as JSON in `file`. */
  write(file: string): void {
    writeFileSync(file, `${JSON.stringify(this, null, 2)}\n`);
  }
}

let active: SqlAudit | undefined;

/** Starts recording (in this process) and returns the record; a running record is kept. */
export function startSqlAudit(): SqlAudit {
  active ??= new SqlAudit();
  return active;
}

/** Stops recording; returns what was recorded. */
export function stopSqlAudit(): SqlAudit | undefined {
  const out = active;
  active = undefined;
  return out;
}

/** The hook of the service's own query paths (Sql.query, the pipelines). */
export function auditSql(channel: object | undefined, sql: string, params: readonly unknown[] | undefined): void {
  active?.record(channel, sql, params);
}

/** True while a record runs (hooks that cost more than a check install themselves only then). */
export function auditing(): boolean {
  return active !== undefined;
}

/**
 * TypeORM's logger with every query also given to the running record (the query runner is the
 * channel: one per transaction on MySQL; SQLite's one runner opens and closes each in turn).
 */
export function auditingLogger(inner: Logger): Logger {
  return new Proxy(inner, {
    get(target, name, receiver) {
      if (name === "logQuery")
        return (query: string, parameters: unknown[] | undefined, queryRunner: object | undefined) => {
          active?.record(queryRunner ?? undefined, query, parameters);
          return target.logQuery(query, parameters, queryRunner as never);
        };
      return Reflect.get(target, name, receiver);
    },
  });
}
