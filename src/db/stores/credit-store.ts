/**
 * Storage of credits (DESIGN §14) on SQL. Spending is one conditional UPDATE whose affected rows
 * decide (`remaining >= amount`), with its ledger row in the same transaction; the CHECK
 * constraint of migration 24 refuses any row whose remaining leaves [0, amount] besides. On MySQL
 * decimal parameters are CAST to DECIMAL (a string in arithmetic would be a double); on SQLite
 * decimals are canonical text and the registered dec_add / dec_max functions do exact arithmetic.
 */
import type { EntityManager, FindOptionsWhere } from "typeorm";
import { In, IsNull, LessThanOrEqual, Not } from "typeorm";
import { spendOrder } from "../../billing/credits/order.js";
import type { AlertKind, AlertState, CreditStore, CreditTx, GrantFilter } from "../../billing/credits/ports.js";
import type { BillingCreditWrites, SpendableQuery } from "../../billing/subscriptions/ports.js";
import type { CreditGrant, CreditSettings, GrantCategory, GrantStatus, LedgerEntry, LedgerEntryType } from "../../billing/credits/types.js";
import { AbortedError, AlreadyExistsError } from "../../billing/errors.js";
import type { EventEncoder } from "../../billing/events/types.js";
import { newId } from "../../billing/ids.js";
import { type Decimal, ZERO, dec, formatDecimal } from "../../billing/money.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { Dialect } from "../columns.js";
import type { CreditAlertStateRow, CreditGrantRow, CreditLedgerRow, CreditSettingsRow, Entities } from "../entities/index.js";
import { isTransient, isUniqueViolation } from "../errors.js";
import { dbTime } from "../raw.js";
import { type Sql, rowLock } from "../sql.js";
import { ensureAlertState, setAlertState } from "./credit-alert-state.js";
import { changed, eventWrites } from "./outbox.js";

export const newLedgerId = (): string => newId("cle");

export function grantFromRow(r: CreditGrantRow): CreditGrant {
  return {
    id: r.id,
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    currency: r.currency,
    amount: r.amount,
    remaining: r.remaining,
    category: r.category as GrantCategory,
    priority: Number(r.priority),
    effectiveAt: r.effective_at,
    expiresAt: r.expires_at,
    appliesToRateCodes: r.applies_to_rate_codes ?? [],
    metadata: r.metadata ?? {},
    status: r.status as GrantStatus,
    invoiceId: r.invoice_id,
    createdAt: r.created_at,
    voidedAt: r.voided_at,
    expiredAt: r.expired_at,
  };
}

function grantToRow(g: CreditGrant, clockId: string | null): CreditGrantRow {
  return {
    id: g.id,
    environment_id: g.environmentId,
    subject_id: g.subjectId,
    currency: g.currency,
    amount: g.amount,
    remaining: g.remaining,
    category: g.category,
    priority: g.priority,
    effective_at: g.effectiveAt,
    expires_at: g.expiresAt,
    applies_to_rate_codes: g.appliesToRateCodes,
    metadata: g.metadata,
    status: g.status,
    invoice_id: g.invoiceId,
    clock_id: clockId,
    created_at: g.createdAt,
    voided_at: g.voidedAt,
    expired_at: g.expiredAt,
  };
}

export function entryFromRow(r: CreditLedgerRow): LedgerEntry {
  return {
    id: r.id,
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    grantId: r.grant_id,
    type: r.entry_type as LedgerEntryType,
    currency: r.currency,
    amount: r.amount,
    invoiceId: r.invoice_id === "" ? null : r.invoice_id,
    description: r.description,
    createdAt: r.created_at,
  };
}

function settingsFromRow(r: CreditSettingsRow): CreditSettings {
  return {
    subjectId: r.subject_id,
    currency: r.currency,
    lowBalanceThreshold: r.low_balance_threshold,
    autoTopUp: r.top_up_threshold !== null && r.top_up_amount !== null ? { threshold: r.top_up_threshold, amount: r.top_up_amount, priority: Number(r.top_up_priority ?? 50) } : null,
  };
}

function alertFromRow(r: CreditAlertStateRow): AlertState {
  return {
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    currency: r.currency,
    kind: r.kind as AlertKind,
    below: Boolean(r.below),
    changedAt: r.changed_at,
    crossings: Number(r.crossings ?? 0),
  };
}

/** A decimal parameter as the dialect's arithmetic needs it. */
export const decParam = (dialect: Dialect): string => (dialect === "mysql" ? "CAST(? AS DECIMAL(65,12))" : "?");

/** A ledger row of `g`; `noteId`: the credit note that made it (credit_ledger.credit_note_id, '' for none). */
export async function insertEntry(
  em: EntityManager,
  E: Entities,
  g: CreditGrant,
  type: LedgerEntryType,
  amount: string,
  invoiceId: string | null,
  text: string,
  at: Date,
  noteId = "",
): Promise<LedgerEntry> {
  const row: CreditLedgerRow = {
    id: newLedgerId(),
    environment_id: g.environmentId,
    subject_id: g.subjectId,
    grant_id: g.id,
    entry_type: type,
    currency: g.currency,
    amount,
    invoice_id: invoiceId ?? "",
    credit_note_id: noteId,
    description: text.slice(0, 1000),
    created_at: at,
  };
  try {
    await em.insert(E.CreditLedgerEntry, row);
  } catch (err) {
    if (isUniqueViolation(err)) throw new AlreadyExistsError("CREDIT_MOVEMENT_EXISTS", `grant ${g.id} already has a ${type} entry${invoiceId ? ` for invoice ${invoiceId}` : ""}`);
    throw err;
  }
  return entryFromRow(row);
}

/**
 * Whether `g` (active, effective by `at`) can be spent at `at`: something left, not expired by
 * then. A grant expiring at `at` itself still pays an invoice final at `at` (a cycle closed at its
 * expires_at: the scheduler closes before it expires, at the same instant).
 */
const live = (g: CreditGrant, at: Date): boolean => dec(g.remaining).gt(0) && (g.expiresAt === null || g.expiresAt.getTime() >= at.getTime());

/** The grants of a subject spendable at `at` in one currency, in spend order: spendableOfAll of one query. */
const spendableOn = async (em: EntityManager, E: Entities, environmentId: string, subjectId: string, currency: string, at: Date): Promise<CreditGrant[]> =>
  (await spendableOfAll(em, E, environmentId, [{ subjectId, currency, at }]))[0] ?? [];

/**
 * The grants spendable at each query's `at` (subjects of one environment), in one read of the active grants
 * of their subjects and currencies effective by the latest `at`, each query's then filtered in spend order.
 */
async function spendableOfAll(em: EntityManager, E: Entities, environmentId: string, queries: readonly SpendableQuery[]): Promise<CreditGrant[][]> {
  if (queries.length === 0) return [];
  const latest = new Date(Math.max(...queries.map((q) => q.at.getTime())));
  const rows = await em.find(E.CreditGrant, {
    where: {
      environment_id: environmentId,
      subject_id: In([...new Set(queries.map((q) => q.subjectId))]),
      currency: In([...new Set(queries.map((q) => q.currency))]),
      status: "active",
      effective_at: LessThanOrEqual(latest),
    },
  });
  const grants = rows.map(grantFromRow);
  return queries.map((q) => spendOrder(grants.filter((g) => g.subjectId === q.subjectId && g.currency === q.currency && g.effectiveAt.getTime() <= q.at.getTime() && live(g, q.at))));
}

async function readGrant(em: EntityManager, E: Entities, environmentId: string, id: string, lock?: ReturnType<typeof rowLock>): Promise<CreditGrant | undefined> {
  const r = await em.findOne(E.CreditGrant, { where: { environment_id: environmentId, id }, lock });
  return r ? grantFromRow(r) : undefined;
}

/** CreditWrites.takeBack on `em`: one conditional UPDATE, then the "void" entry on the purchase's invoice, kept apart by the credit note. */
async function takeBackOn(
  em: EntityManager,
  E: Entities,
  d: Dialect,
  x: { environmentId: string; grantId: string; amount: string; entry: { invoiceId: string; creditNoteId: string; description: string }; at: Date },
): Promise<CreditGrant | undefined> {
  const a = formatDecimal(dec(x.amount));
  if (!dec(a).gt(0)) throw new Error(`a refund must take back a positive amount, got ${x.amount}`);
  const p = decParam(d);
  // The SET reads `remaining` before it changes (MySQL assigns left to right; SQLite reads the old row).
  const [zero, left, enough] =
    d === "mysql" ? [`remaining = ${p}`, `remaining - ${p}`, `remaining >= ${p}`] : ["dec_add(remaining, ?) = '0'", "dec_add(remaining, ?)", "dec_max(remaining, ?) = remaining"];
  // What `zero` and `left` compare with or add: the amount on MySQL, its negation for SQLite's dec_add.
  const z = d === "mysql" ? a : `-${a}`;
  const n = await changed(
    em,
    `UPDATE credit_grants SET status = CASE WHEN ${zero} THEN 'voided' ELSE status END, voided_at = CASE WHEN ${zero} THEN ? ELSE voided_at END, remaining = ${left} WHERE environment_id = ? AND id = ? AND status = 'active' AND ${enough}`,
    [z, z, dbTime(x.at), z, x.environmentId, x.grantId, a],
  );
  if (n === 0) return undefined;
  const g = (await readGrant(em, E, x.environmentId, x.grantId)) as CreditGrant;
  await insertEntry(em, E, g, "void", `-${a}`, x.entry.invoiceId, x.entry.description, x.at, x.entry.creditNoteId);
  return g;
}

/** The credit writes of a transaction on `em`. */
export function creditWrites(em: EntityManager, sql: Sql, E: Entities): BillingCreditWrites {
  const d = sql.dialect;
  const lock = rowLock(d);
  const writes: BillingCreditWrites = {
    insertGrant: async (g, entry) => {
      const [subject] = (await em.query("SELECT test_clock_id FROM subjects WHERE environment_id = ? AND id = ?", [g.environmentId, g.subjectId])) as { test_clock_id: string | null }[];
      await em.insert(E.CreditGrant, grantToRow(g, subject?.test_clock_id ?? null));
      if (!entry || g.status === "pending_payment" || g.status === "failed") return undefined;
      return insertEntry(em, E, g, entry.type, g.amount, entry.invoiceId, entry.description, g.createdAt, entry.creditNoteId);
    },
    lockGrant: (environmentId, id) => readGrant(em, E, environmentId, id, lock),
    spendable: (environmentId, subjectId, currency, at) => spendableOn(em, E, environmentId, subjectId, currency, at),
    spendableOfAll: (environmentId, queries) => spendableOfAll(em, E, environmentId, queries),
    spend: async (grantId, amount, invoiceId, description, at, environmentId) => {
      const a = formatDecimal(dec(amount));
      if (!dec(a).gt(0)) throw new Error(`a spend must be positive, got ${amount}`);
      const p = decParam(d);
      const taken =
        d === "mysql"
          ? await changed(
              em,
              `UPDATE credit_grants SET status = CASE WHEN remaining = ${p} THEN 'depleted' ELSE status END, remaining = remaining - ${p} WHERE environment_id = ? AND id = ? AND status = 'active' AND remaining >= ${p}`,
              [a, a, environmentId, grantId, a],
            )
          : await changed(
              em,
              `UPDATE credit_grants SET status = CASE WHEN dec_add(remaining, ?) = '0' THEN 'depleted' ELSE status END, remaining = dec_add(remaining, ?) WHERE environment_id = ? AND id = ? AND status = 'active' AND dec_max(remaining, ?) = remaining`,
              [`-${a}`, `-${a}`, environmentId, grantId, a],
            );
      if (taken === 0) return false;
      const r = await em.findOneOrFail(E.CreditGrant, { where: { environment_id: environmentId, id: grantId } });
      await insertEntry(em, E, grantFromRow(r), "application", `-${a}`, invoiceId, description, at);
      return true;
    },
    activate: async (environmentId, grantId, at) => {
      const n = await changed(em, "UPDATE credit_grants SET status = 'active' WHERE environment_id = ? AND id = ? AND status = 'pending_payment'", [environmentId, grantId]);
      if (n === 0) return undefined;
      const g = (await readGrant(em, E, environmentId, grantId)) as CreditGrant;
      await insertEntry(em, E, g, "grant", g.amount, null, g.invoiceId ? `Credit purchase (invoice ${g.invoiceId})` : "Credit grant", at);
      return g;
    },
    fail: async (environmentId, grantId) => {
      const n = await changed(em, "UPDATE credit_grants SET status = 'failed', remaining = ? WHERE environment_id = ? AND id = ? AND status = 'pending_payment'", ["0", environmentId, grantId]);
      return n === 0 ? undefined : readGrant(em, E, environmentId, grantId);
    },
    close: async (environmentId, grantId, how, at, entry) => {
      const g = await readGrant(em, E, environmentId, grantId, lock);
      if (!g || (g.status !== "active" && g.status !== "depleted")) return undefined;
      const status = how === "void" ? "voided" : "expired";
      const stamp = how === "void" ? "voided_at" : "expired_at";
      const n = await changed(em, `UPDATE credit_grants SET status = ?, remaining = ?, ${stamp} = ? WHERE environment_id = ? AND id = ? AND status = ? AND remaining = ${decParam(d)}`, [
        status,
        "0",
        dbTime(at),
        environmentId,
        grantId,
        g.status,
        g.remaining,
      ]);
      if (n === 0) throw new AbortedError("TRANSACTION_CONFLICT", "the grant changed while it was being closed; try again");
      if (dec(g.remaining).gt(0)) await insertEntry(em, E, g, how, `-${g.remaining}`, entry?.invoiceId ?? null, entry?.description ?? (how === "void" ? "Voided" : "Expired"), at);
      return (await readGrant(em, E, environmentId, grantId)) as CreditGrant;
    },
    takeBack: (environmentId, grantId, amount, entry, at) => takeBackOn(em, E, d, { environmentId, grantId, amount, entry, at }),
    getSettings: async (environmentId, subjectId, currency) => {
      const r = await em.findOneBy(E.CreditSettings, { environment_id: environmentId, subject_id: subjectId, currency });
      return r ? settingsFromRow(r) : undefined;
    },
    putSettings: async (environmentId, s, at) => {
      const row: CreditSettingsRow = {
        environment_id: environmentId,
        subject_id: s.subjectId,
        currency: s.currency,
        low_balance_threshold: s.lowBalanceThreshold,
        top_up_threshold: s.autoTopUp?.threshold ?? null,
        top_up_amount: s.autoTopUp?.amount ?? null,
        top_up_priority: s.autoTopUp?.priority ?? null,
        updated_at: at,
      };
      await em.upsert(E.CreditSettings, row, ["environment_id", "subject_id", "currency"]);
    },
    getAlertState: async (environmentId, subjectId, currency, kind) => {
      const r = await em.findOne(E.CreditAlertState, { where: { environment_id: environmentId, subject_id: subjectId, currency, kind }, lock });
      return r ? alertFromRow(r) : undefined;
    },
    setAlertState: (s, crossing) => setAlertState(em, s, crossing),
  };
  return writes;
}

export class SqlCreditStore implements CreditStore {
  constructor(
    private readonly sql: Sql,
    private readonly E: Entities,
    private readonly encode: EventEncoder,
    private readonly now: () => Date = () => new Date(),
  ) {}

  get(environmentId: string, id: string): Promise<CreditGrant | undefined> {
    return this.sql.run((em) => readGrant(em, this.E, environmentId, id));
  }

  async list(environmentId: string, filter: GrantFilter, page: Page): Promise<PageResult<CreditGrant>> {
    const where: FindOptionsWhere<CreditGrantRow> = { environment_id: environmentId };
    if (filter.subjectId !== undefined) where.subject_id = filter.subjectId;
    if (filter.status !== undefined) where.status = filter.status;
    const rows = await this.sql.run((em) => em.find(this.E.CreditGrant, { where, order: { seq: "ASC" }, skip: page.offset, take: page.limit + 1 }));
    return toPageResult(rows.map(grantFromRow), page);
  }

  async ledger(environmentId: string, subjectId: string, currency: string | undefined, page: Page, newestFirst = false): Promise<PageResult<LedgerEntry>> {
    const where: FindOptionsWhere<CreditLedgerRow> = { environment_id: environmentId, subject_id: subjectId };
    if (currency !== undefined) where.currency = currency;
    const rows = await this.sql.run((em) => em.find(this.E.CreditLedgerEntry, { where, order: { seq: newestFirst ? "DESC" : "ASC" }, skip: page.offset, take: page.limit + 1 }));
    return toPageResult(rows.map(entryFromRow), page);
  }

  /**
   * Summed from the grants (one read, not growing with the ledger): the remaining of active and
   * depleted ones, which the ledger's sum always equals; expired and voided grants name the
   * currencies the subject has had credit in (pending and failed ones have no ledger entry).
   */
  async balances(environmentId: string, subjectId: string): Promise<{ currency: string; balance: string }[]> {
    const rows = await this.sql.run((em) =>
      em.find(this.E.CreditGrant, {
        where: { environment_id: environmentId, subject_id: subjectId, status: In(["active", "depleted", "expired", "voided"]) },
        select: { currency: true, remaining: true, status: true },
      }),
    );
    const by = new Map<string, Decimal>();
    for (const r of rows) by.set(r.currency, (by.get(r.currency) ?? ZERO).plus(r.status === "active" || r.status === "depleted" ? dec(r.remaining) : ZERO));
    return [...by.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([currency, balance]) => ({ currency, balance: formatDecimal(balance) }));
  }

  spendable(environmentId: string, subjectId: string, currency: string, at: Date): Promise<CreditGrant[]> {
    return this.sql.run((em) => spendableOn(em, this.E, environmentId, subjectId, currency, at));
  }

  spendableOfAll(environmentId: string, queries: readonly SpendableQuery[]): Promise<CreditGrant[][]> {
    return this.sql.run((em) => spendableOfAll(em, this.E, environmentId, queries));
  }

  async byInvoice(environmentId: string, invoiceId: string): Promise<CreditGrant | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.E.CreditGrant, { environment_id: environmentId, invoice_id: invoiceId }));
    return r ? grantFromRow(r) : undefined;
  }

  async getSettings(environmentId: string, subjectId: string, currency: string): Promise<CreditSettings | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.E.CreditSettings, { environment_id: environmentId, subject_id: subjectId, currency }));
    return r ? settingsFromRow(r) : undefined;
  }

  async getAlertState(environmentId: string, subjectId: string, currency: string, kind: AlertKind): Promise<AlertState | undefined> {
    const r = await this.sql.run((em) => em.findOneBy(this.E.CreditAlertState, { environment_id: environmentId, subject_id: subjectId, currency, kind }));
    return r ? alertFromRow(r) : undefined;
  }

  ensureAlertState(s: AlertState): Promise<void> {
    // A conflict the database reports on that statement is one, as a transaction's is (alerts.ts retries it).
    return ensureAlertState(this.sql, s).catch((err: unknown) => {
      if (isTransient(err)) throw new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one (deadlock or lock wait timeout); try again");
      throw err;
    });
  }

  async dueExpiries(now: Date, clockId: string | null, limit: number, environmentId: string | null = null): Promise<CreditGrant[]> {
    const rows = await this.sql.run((em) =>
      em.find(this.E.CreditGrant, {
        where: {
          status: In(["active", "depleted"]),
          expires_at: LessThanOrEqual(now),
          clock_id: clockId === null ? IsNull() : clockId,
          remaining: Not("0"),
          ...(environmentId === null ? {} : { environment_id: environmentId }),
        },
        order: { expires_at: "ASC", seq: "ASC" },
        take: limit,
      }),
    );
    return rows.map(grantFromRow).filter((g) => dec(g.remaining).gt(0));
  }

  transaction<T>(fn: (tx: CreditTx) => Promise<T>): Promise<T> {
    const run = this.sql.transaction((em) => fn({ ...creditWrites(em, this.sql, this.E), ...eventWrites(em, this.encode, this.now, this.sql.dialect) }));
    return run.catch((err: unknown) => {
      if (isTransient(err)) throw new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one (deadlock or lock wait timeout); try again");
      throw err;
    });
  }
}
