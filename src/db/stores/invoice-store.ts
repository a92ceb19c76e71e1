/** Storage of invoices and their lines. */
import { type EntityManager, In, IsNull } from "typeorm";
import { AlreadyExistsError } from "../../billing/errors.js";
import { canonicalDecimal, dec, formatDecimal } from "../../billing/money.js";
import { type Page, type PageResult, toPageResult } from "../../billing/pagination.js";
import type { InvoiceFilter, InvoiceStore, InvoiceWrites } from "../../billing/subscriptions/ports.js";
import { type Invoice, type InvoiceLine, type InvoiceLineKind, type InvoiceStatus, type UsageWindow, amountDueOf } from "../../billing/subscriptions/types.js";
import type { Entities, InvoiceLineRow, InvoiceRow } from "../entities/index.js";
import type { InvoiceBasisRow } from "../entities/invoices.js";
import { isUniqueViolation } from "../errors.js";
import { anchorsOfIso, dbTime, fromDbTime, isoAnchors } from "../raw.js";
import { billedWithinRows, createdWithinRows, invoiceListRows, newestFirstRows } from "./invoice-list.js";
import { keyRow, lineBookingRow, lineFromRow } from "./invoice-line-rows.js";
import { dunningFromRow } from "./invoice-payment-rows.js";
import { STATEMENT_BYTES, type Sql, chunks, groupBySize, paramsBytes, placeholders } from "../sql.js";

/** A usage window as stored: its bounds, and its basis (the cycle and the first-seen anchors as ISO text in the JSON, absent on older rows). */
function windowFromRow(from: Date, to: Date, b: InvoiceBasisRow): UsageWindow {
  const { cycleStart, cycleEnd, firstSeen, ...basis } = b;
  return { from, to, ...basis, ...(cycleStart && cycleEnd ? { cycleStart: new Date(cycleStart), cycleEnd: new Date(cycleEnd) } : {}), ...(firstSeen ? { firstSeen: anchorsOfIso(firstSeen) } : {}) };
}

/** Rows → domain: an invoice row with its line rows. */
export function invoiceFromRows(r: InvoiceRow, lines: InvoiceLineRow[]): Invoice {
  return {
    id: r.id,
    environmentId: r.environment_id,
    subjectId: r.subject_id,
    subscriptionId: r.subscription_id,
    periodKey: r.period_key,
    status: r.status as InvoiceStatus,
    currency: r.currency,
    total: r.total,
    lines: lines.map(lineFromRow),
    hostedToken: r.hosted_token,
    periodStart: r.period_start,
    periodEnd: r.period_end,
    createdAt: r.created_at,
    window: r.usage_from && r.usage_to && r.basis ? windowFromRow(r.usage_from, r.usage_to, r.basis) : null,
    finalizesAt: r.finalizes_at ?? null,
    clockId: r.clock_id ?? null,
    finalizedAt: r.finalized_at ?? null,
    creditsApplied: r.credits_applied ?? [],
    amountDue: r.amount_due ?? r.total,
    ...bookingFromRow(r),
    ...dunningFromRow(r),
  };
}

/** The booked fields (DESIGN §15) of a row; rows written before them: no discount, no tax. */
function bookingFromRow(r: InvoiceRow): Partial<Invoice> {
  const b = r.booking ?? {};
  return {
    number: r.number ?? null,
    subtotal: r.subtotal ?? r.total,
    totalDiscount: r.total_discount ?? "0",
    totalTax: r.total_tax ?? "0",
    amountCredited: r.amount_credited ?? "0",
    discounts: (b.discounts ?? []) as Invoice["discounts"],
    taxAmounts: (b.taxAmounts ?? []) as Invoice["taxAmounts"],
    notes: b.notes ?? [],
    customer: (b.customer ?? null) as Invoice["customer"],
    customerName: b.customerName ?? null,
    seller: (b.seller ?? null) as Invoice["seller"],
    ...(b.carriedIn?.length ? { carriedIn: b.carriedIn as Invoice["carriedIn"] } : {}),
  };
}

/** What an invoice prints besides its lines, and the carried debits it took (payments/carries.ts; outside its total), as stored (JSON; NULL when there is nothing). */
function bookingToRow(i: Invoice): InvoiceRow["booking"] {
  const b = { discounts: i.discounts ?? [], taxAmounts: i.taxAmounts ?? [], notes: i.notes ?? [], customer: i.customer ?? null, customerName: i.customerName ?? null, seller: i.seller ?? null };
  const empty = b.discounts.length === 0 && b.taxAmounts.length === 0 && b.notes.length === 0 && b.customer === null && b.customerName === null && b.seller === null;
  return i.carriedIn?.length ? { ...b, carriedIn: i.carriedIn } : empty ? null : b;
}

/** Domain → the invoice row (its lines are invoiceLineRows). */
export function invoiceToRow(i: Invoice): InvoiceRow {
  return {
    id: i.id,
    environment_id: i.environmentId,
    subject_id: i.subjectId,
    subscription_id: i.subscriptionId,
    period_key: i.periodKey,
    status: i.status,
    currency: i.currency,
    total: i.total,
    hosted_token: i.hostedToken,
    period_start: i.periodStart,
    period_end: i.periodEnd,
    created_at: i.createdAt,
    updated_at: i.createdAt,
    finalizes_at: i.finalizesAt,
    finalized_at: i.finalizedAt,
    clock_id: i.clockId,
    usage_from: i.window?.from ?? null,
    usage_to: i.window?.to ?? null,
    basis: i.window
      ? {
          rateCardId: i.window.rateCardId,
          fixedRateQuantities: i.window.fixedRateQuantities,
          rateMultipliers: i.window.rateMultipliers,
          ...(i.window.cycleStart && i.window.cycleEnd ? { cycleStart: i.window.cycleStart.toISOString(), cycleEnd: i.window.cycleEnd.toISOString() } : {}),
          ...(i.window.firstSeen ? { firstSeen: isoAnchors(i.window.firstSeen) } : {}),
          ...(i.window.usageAdjustments?.length ? { usageAdjustments: i.window.usageAdjustments } : {}),
        }
      : null,
    credits_applied: i.creditsApplied?.length ? i.creditsApplied : null,
    amount_due: amountDueOf(i),
    number: i.number ?? null,
    subtotal: i.subtotal ?? i.total,
    total_discount: i.totalDiscount ?? "0",
    total_tax: i.totalTax ?? "0",
    amount_credited: i.amountCredited ?? "0",
    booking: bookingToRow(i),
  };
}

/** Domain → the line rows of an invoice, in order (each key whole: keyRow). */
export function invoiceLineRows(i: Invoice): InvoiceLineRow[] {
  return i.lines.map((l, position) => ({
    invoice_id: i.id,
    position,
    description: l.description.slice(0, 1000),
    quantity: l.quantity,
    unit_amount: l.unitAmount,
    amount: l.amount,
    kind: l.kind,
    line_key: keyRow(l.key),
    window_invoice_id: l.windowInvoiceId,
    booking: lineBookingRow(l),
  }));
}

const INSERT_INVOICES =
  "INSERT INTO invoices (id, environment_id, subject_id, subscription_id, period_key, status, currency, total, hosted_token, period_start, period_end, created_at, updated_at, finalizes_at, finalized_at, clock_id, usage_from, usage_to, basis, credits_applied, amount_due, number, subtotal, total_discount, total_tax, amount_credited, booking) VALUES ";
const INSERT_LINES = "INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_amount, amount, kind, line_key, window_invoice_id, booking) VALUES ";

/** Kinds a window's invoice bills for it: usage, minimum, maximum (what late usage is diffed against), the true-up it closed the period with. */
const WINDOW_KINDS: InvoiceLineKind[] = ["usage", "minimum", "maximum", "commitment_true_up"];
/** A window's own lines (WINDOW_KINDS, and its usage-terms adjustments: adjustments of no earlier window) of invoices `part`. */
const ownLinesOf = (part: string[]) => [
  { invoice_id: In(part), kind: In(WINDOW_KINDS) },
  { invoice_id: In(part), kind: "adjustment" as const, window_invoice_id: IsNull() },
];

const timeOrNull = (d: Date | null | undefined) => (d ? dbTime(d) : null);

/** An invoice row's values as INSERT_INVOICES lists them (what the entity's transformers would write). */
function invoiceValues(i: Invoice): unknown[] {
  const r = invoiceToRow(i);
  return [
    r.id,
    r.environment_id,
    r.subject_id,
    r.subscription_id,
    r.period_key,
    r.status,
    r.currency,
    canonicalDecimal(r.total),
    r.hosted_token,
    dbTime(r.period_start),
    dbTime(r.period_end),
    dbTime(r.created_at),
    dbTime(r.updated_at),
    timeOrNull(r.finalizes_at),
    timeOrNull(r.finalized_at),
    r.clock_id ?? null,
    timeOrNull(r.usage_from),
    timeOrNull(r.usage_to),
    r.basis ? JSON.stringify(r.basis) : null,
    r.credits_applied ? JSON.stringify(r.credits_applied) : null,
    canonicalDecimal(r.amount_due ?? r.total),
    r.number ?? null,
    canonicalDecimal(r.subtotal ?? r.total),
    canonicalDecimal(r.total_discount ?? "0"),
    canonicalDecimal(r.total_tax ?? "0"),
    canonicalDecimal(r.amount_credited ?? "0"),
    r.booking ? JSON.stringify(r.booking) : null,
  ];
}

function lineValues(l: InvoiceLineRow): unknown[] {
  return [
    l.invoice_id,
    l.position,
    l.description,
    canonicalDecimal(l.quantity),
    canonicalDecimal(l.unit_amount),
    canonicalDecimal(l.amount),
    l.kind,
    l.line_key ?? null,
    l.window_invoice_id ?? null,
    l.booking ? JSON.stringify(l.booking) : null,
  ];
}

/** Multi-row INSERTs of `rows` (each a row's values for `insert`'s columns), as few statements as STATEMENT_BYTES allows, at most 200 rows each. Plain SQL: a cycle close writes a hundred invoices and their lines at once, and TypeORM's insert builder cost more CPU than their round trips. */
async function insertRows(em: EntityManager, insert: string, rows: unknown[][]): Promise<void> {
  if (rows.length === 0) return;
  const width = (rows[0] as unknown[]).length;
  for (const part of groupBySize(rows, paramsBytes, STATEMENT_BYTES, 200)) await em.query(insert + placeholders(part.length, width), part.flat());
}

/** The invoice writes of a billing transaction on `em`. */
export function invoiceWrites(em: EntityManager, E: Entities): InvoiceWrites {
  // MySQL locks the rows read until the transaction ends; SQLite serialises writers anyway (one shared connection).
  const lock = em.connection.options.type === "better-sqlite3" ? "" : " FOR UPDATE";
  const insertInvoices = async (list: Invoice[]) => {
    if (list.length === 0) return;
    try {
      await insertRows(em, INSERT_INVOICES, list.map(invoiceValues));
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new AlreadyExistsError("INVOICE_EXISTS", `${list.length === 1 ? `subscription ${list[0]?.subscriptionId}` : "one of these subscriptions"} already has an invoice for its period`);
      }
      throw err;
    }
    await insertRows(em, INSERT_LINES, list.flatMap(invoiceLineRows).map(lineValues));
  };
  const moveInvoices = async (ids: string[], from: InvoiceStatus, to: InvoiceStatus, at: Date, environmentId: string) => {
    const moved: string[] = [];
    for (const part of chunks(ids)) {
      const marks = part.map(() => "?").join(", ");
      const rows = (await em.query(`SELECT id FROM invoices WHERE environment_id = ? AND id IN (${marks}) AND status = ?${lock}`, [environmentId, ...part, from])) as { id: string }[];
      if (rows.length === 0) continue;
      // A void or a write-off keeps its instant (voided_at, marked_uncollectible_at): the finance export reads them by it.
      const stamp = to === "void" ? ", voided_at = ?" : to === "uncollectible" ? ", marked_uncollectible_at = ?" : "";
      const params = [to, dbTime(at), ...(stamp ? [dbTime(at)] : []), environmentId, ...rows.map((r) => r.id)];
      await em.query(`UPDATE invoices SET status = ?, updated_at = ?${stamp} WHERE environment_id = ? AND id IN (${rows.map(() => "?").join(", ")})`, params);
      moved.push(...rows.map((r) => r.id));
    }
    return moved;
  };
  const lockDraft = async (environmentId: string, id: string) => {
    const rows: { status: string }[] = await em.query(`SELECT status FROM invoices WHERE environment_id = ? AND id = ?${lock}`, [environmentId, id]);
    return rows[0]?.status === "draft";
  };
  // A draft becomes open with its recomputed lines, once: only the run that moves it out of draft writes them.
  const finalizeDraft = async (i: Invoice, at: Date) => {
    const res = await em.update(
      E.Invoice,
      { id: i.id, status: "draft" },
      {
        status: "open",
        total: i.total,
        credits_applied: i.creditsApplied?.length ? i.creditsApplied : null,
        amount_due: amountDueOf(i),
        number: i.number ?? null,
        subtotal: i.subtotal ?? i.total,
        total_discount: i.totalDiscount ?? "0",
        total_tax: i.totalTax ?? "0",
        booking: bookingToRow(i) as never,
        finalized_at: at,
        updated_at: at,
      },
    );
    if ((res.affected ?? 0) === 0) return false;
    await em.delete(E.InvoiceLine, { invoice_id: i.id });
    await insertRows(em, INSERT_LINES, invoiceLineRows(i).map(lineValues));
    return true;
  };
  return { insertInvoices, insertInvoice: (i) => insertInvoices([i]), lockDraft, finalizeDraft, moveInvoices };
}

export class SqlInvoiceStore implements InvoiceStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  private async withLines(em: EntityManager, rows: InvoiceRow[]): Promise<Invoice[]> {
    if (rows.length === 0) return [];
    const lines = await em.find(this.entities.InvoiceLine, { where: { invoice_id: In(rows.map((r) => r.id)) }, order: { invoice_id: "ASC", position: "ASC" } });
    const linesOf = (id: string) => lines.filter((l) => l.invoice_id === id);
    return rows.map((r) => invoiceFromRows(r, linesOf(r.id)));
  }

  async get(environmentId: string, id: string): Promise<Invoice | undefined> {
    return this.sql.run(async (em) => {
      const r = await em.findOneBy(this.entities.Invoice, { environment_id: environmentId, id });
      return r ? (await this.withLines(em, [r]))[0] : undefined;
    });
  }

  async byToken(token: string): Promise<Invoice | undefined> {
    return this.sql.run(async (em) => {
      const r = await em.findOneBy(this.entities.Invoice, { hosted_token: token });
      return r ? (await this.withLines(em, [r]))[0] : undefined;
    });
  }

  async byPeriodKey(subscriptionId: string, periodKey: string): Promise<Invoice | undefined> {
    return this.sql.run(async (em) => {
      const r = await em.findOneBy(this.entities.Invoice, { subscription_id: subscriptionId, period_key: periodKey });
      return r ? (await this.withLines(em, [r]))[0] : undefined;
    });
  }

  async billedWithin(subscriptionId: string, environmentId: string, from: Date, to: Date): Promise<Invoice[]> {
    return this.sql.run(async (em) => this.withLines(em, await billedWithinRows(em, this.entities, { subscriptionId, environmentId, from, to })));
  }

  async createdWithin(subscriptionId: string, environmentId: string, from: Date, to: Date): Promise<{ invoice: Invoice; tied: InvoiceLine[] }[]> {
    const found = await this.sql.run((em) => createdWithinRows(em, this.entities, { subscriptionId, environmentId, from, to }));
    return found.map((f) => ({ invoice: invoiceFromRows(f.row, f.lines), tied: f.tied.map(lineFromRow) }));
  }

  private async paged(em: EntityManager, rows: InvoiceRow[], page: Page): Promise<PageResult<Invoice>> {
    const result = toPageResult(rows, page);
    return { items: await this.withLines(em, result.items), hasMore: result.hasMore };
  }

  async list(environmentId: string, filter: InvoiceFilter, page: Page): Promise<PageResult<Invoice>> {
    return this.sql.run(async (em) => this.paged(em, await invoiceListRows(em, this.entities, environmentId, filter, page), page));
  }

  /** Over ix_invoices_env_finalized; exact on both stores (DECIMAL SUM on MySQL, the dec_sum aggregate on SQLite). */
  async revenue(environmentId: string, from: Date, to: Date): Promise<{ currency: string; total: string; count: number }[]> {
    const sum = this.sql.dialect === "mysql" ? "SUM" : "dec_sum";
    const rows: { currency: string; total: unknown; n: unknown }[] = await this.sql.query(
      `SELECT currency, ${sum}(total) AS total, COUNT(*) AS n FROM invoices WHERE environment_id = ? AND finalized_at >= ? AND finalized_at < ? AND status IN ('open', 'paid', 'uncollectible') GROUP BY currency ORDER BY currency`,
      [environmentId, dbTime(from), dbTime(to)],
    );
    return rows.map((r) => ({ currency: r.currency, total: formatDecimal(dec(String(r.total))), count: Number(r.n) }));
  }

  /** Newest first over ix_invoices_env_status_seq (environment, status, seq), or ix_invoices_subscription_seq for one subscription's. */
  async listAll(environmentId: string, filter: { status?: InvoiceStatus; subscriptionId?: string }, page: Page): Promise<PageResult<Invoice>> {
    return this.sql.run(async (em) => this.paged(em, await newestFirstRows(em, this.entities, environmentId, filter, page), page));
  }

  async recent(environmentId: string, subjectId: string, limit: number): Promise<Invoice[]> {
    return this.sql.run(async (em) => {
      const rows = await em.find(this.entities.Invoice, { where: { environment_id: environmentId, subject_id: subjectId }, order: { seq: "DESC" }, take: limit });
      return this.withLines(em, rows);
    });
  }

  async dueDrafts(now: Date, clockId: string | null, limit: number): Promise<Invoice[]> {
    return this.sql.run(async (em) => {
      const rows = await em
        .createQueryBuilder(this.entities.Invoice, "i")
        .where("i.status = 'draft' AND i.finalizes_at <= :now", { now: dbTime(now) })
        .andWhere(clockId === null ? "i.clock_id IS NULL" : "i.clock_id = :clock", { clock: clockId })
        .orderBy("i.finalizes_at", "ASC")
        .addOrderBy("i.seq", "ASC")
        .limit(limit)
        .getMany();
      return this.withLines(em, rows);
    });
  }

  async nextDraftDue(after: Date | null, upTo: Date, clockId: string): Promise<Date | null> {
    const since = after ? " AND i.finalizes_at > ?" : "";
    const params = after ? [dbTime(upTo), clockId, dbTime(after)] : [dbTime(upTo), clockId];
    const [row] = await this.sql.query<{ at: unknown }[]>(`SELECT MIN(i.finalizes_at) AS at FROM invoices i WHERE i.status = 'draft' AND i.finalizes_at <= ? AND i.clock_id = ?${since}`, params);
    return row?.at ? fromDbTime(row.at) : null;
  }

  async windows(subscriptionId: string, environmentId: string): Promise<{ invoice: Invoice; billed: InvoiceLine[] }[]> {
    return (await this.windowsOf([subscriptionId], environmentId)).get(subscriptionId) ?? [];
  }

  async windowsOf(subscriptionIds: string[], environmentId: string): Promise<Map<string, { invoice: Invoice; billed: InvoiceLine[] }[]>> {
    const out = new Map<string, { invoice: Invoice; billed: InvoiceLine[] }[]>();
    if (subscriptionIds.length === 0) return out;
    return this.sql.run(async (em) => {
      const rows: InvoiceRow[] = [];
      for (const part of chunks(subscriptionIds)) {
        rows.push(
          ...(await em
            .createQueryBuilder(this.entities.Invoice, "i")
            .where("i.environment_id = :environmentId AND i.subscription_id IN (:...ids) AND i.status <> 'draft' AND i.usage_from IS NOT NULL", { environmentId, ids: part })
            .orderBy("i.seq", "ASC")
            .getMany()),
        );
      }
      if (rows.length === 0) return out;
      const own = new Map<string, InvoiceLineRow[]>();
      const adjustments = new Map<string, InvoiceLineRow[]>();
      const add = (m: Map<string, InvoiceLineRow[]>, key: string, l: InvoiceLineRow) => {
        const list = m.get(key);
        if (list) list.push(l);
        else m.set(key, [l]);
      };
      for (const part of chunks(rows.map((r) => r.id))) {
        for (const l of await em.find(this.entities.InvoiceLine, { where: ownLinesOf(part), order: { seq: "ASC" } })) add(own, l.invoice_id, l);
        for (const l of await em.find(this.entities.InvoiceLine, { where: { window_invoice_id: In(part) }, order: { seq: "ASC" } })) add(adjustments, l.window_invoice_id as string, l);
      }
      // Lines in seq order per window, as one subscription's read gave them (chunks keep each window's lines in one part).
      rows.sort((x, y) => Number(x.seq) - Number(y.seq));
      for (const r of rows) {
        const list = out.get(r.subscription_id) ?? [];
        list.push({ invoice: invoiceFromRows(r, []), billed: [...(own.get(r.id) ?? []), ...(adjustments.get(r.id) ?? [])].map(lineFromRow) });
        out.set(r.subscription_id, list);
      }
      return out;
    });
  }
}
