/**
 * Storage of coupons and discounts (DESIGN §15) on SQL. A redemption is one conditional UPDATE
 * whose affected rows decide (not archived, not past redeem_by, below max_redemptions), in the
 * transaction that writes the discount; migration 28's CHECK refuses any row past
 * max_redemptions besides. An invoice becoming open reads its discounts locked (FOR UPDATE on
 * MySQL; SQLite's transaction holds the file), so two finalizations never both use a "once" one.
 */
import type { EntityManager, FindOptionsWhere } from "typeorm";
import { In, IsNull, Not } from "typeorm";
import type { CouponStore, CouponTx, CouponWrites, DiscountFilter } from "../../billing/coupons/ports.js";
import type { BookingDiscount, Coupon, CouponDuration, Discount, DiscountStatus } from "../../billing/coupons/types.js";
import { AbortedError } from "../../billing/errors.js";
import type { EventEncoder } from "../../billing/events/types.js";
import { type Decimal, dec, formatDecimal } from "../../billing/money.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { OnceHold } from "../../billing/subscriptions/ports.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import { type Dialect, isMysql } from "../columns.js";
import type { CouponRow, DiscountRow, Entities } from "../entities/index.js";
import { isTransient } from "../errors.js";
import { dbTime } from "../raw.js";
import { type Sql, rowLock } from "../sql.js";
import { changed, eventWrites } from "./outbox.js";

export function couponFromRow(r: CouponRow): Coupon {
  return {
    id: r.id,
    environmentId: r.environment_id,
    name: r.name,
    percentOff: r.percent_off,
    amountOff: r.amount_off !== null && r.amount_currency !== null ? { currency: r.amount_currency, value: r.amount_off } : null,
    duration: r.duration as CouponDuration,
    durationInMonths: r.duration_in_months === null ? null : Number(r.duration_in_months),
    maxRedemptions: r.max_redemptions === null ? null : Number(r.max_redemptions),
    redeemBy: r.redeem_by,
    appliesToRateCodes: r.applies_to_rate_codes ?? [],
    timesRedeemed: Number(r.times_redeemed),
    archived: r.archived_at !== null,
    metadata: r.metadata ?? {},
    createdAt: r.created_at,
  };
}

function couponToRow(c: Coupon): CouponRow {
  return {
    id: c.id,
    environment_id: c.environmentId,
    name: c.name,
    percent_off: c.percentOff,
    amount_currency: c.amountOff?.currency ?? null,
    amount_off: c.amountOff?.value ?? null,
    duration: c.duration,
    duration_in_months: c.durationInMonths,
    max_redemptions: c.maxRedemptions,
    redeem_by: c.redeemBy,
    applies_to_rate_codes: c.appliesToRateCodes,
    times_redeemed: c.timesRedeemed,
    metadata: c.metadata,
    created_at: c.createdAt,
    archived_at: c.archived ? c.createdAt : null,
  };
}

export function discountFromRow(r: DiscountRow): Discount {
  return {
    id: r.id,
    environmentId: r.environment_id,
    couponId: r.coupon_id,
    subscriptionId: r.subscription_id,
    subjectId: r.subject_id,
    start: r.starts_at,
    end: r.ends_at,
    status: r.status as DiscountStatus,
    invoicesDiscounted: Number(r.invoices_discounted),
    removedAt: r.removed_at,
    heldFor: r.held_for_invoice_id ?? null,
    onceTaken: r.once_taken ?? null,
  };
}

function discountToRow(d: Discount): DiscountRow {
  return {
    id: d.id,
    environment_id: d.environmentId,
    coupon_id: d.couponId,
    subscription_id: d.subscriptionId,
    subject_id: d.subjectId,
    starts_at: d.start,
    ends_at: d.end,
    status: d.status,
    invoices_discounted: d.invoicesDiscounted,
    removed_at: d.removedAt,
    held_for_invoice_id: d.heldFor ?? null,
    once_taken: d.onceTaken ?? null,
  };
}

const dialectOf = (em: EntityManager): Dialect => (isMysql(em.connection.options.type) ? "mysql" : "sqlite");

async function readCoupon(em: EntityManager, environmentId: string, id: string): Promise<Coupon | undefined> {
  const r = await em.findOneBy<CouponRow>("Coupon", { environment_id: environmentId, id });
  return r ? couponFromRow(r) : undefined;
}

async function readDiscount(em: EntityManager, environmentId: string, id: string, lock?: ReturnType<typeof rowLock>): Promise<Discount | undefined> {
  const r = await em.findOne<DiscountRow>("Discount", { where: { environment_id: environmentId, id }, lock });
  return r ? discountFromRow(r) : undefined;
}

async function couponsById(em: EntityManager, environmentId: string, ids: string[]): Promise<Map<string, Coupon>> {
  if (ids.length === 0) return new Map();
  const rows = await em.findBy<CouponRow>("Coupon", { environment_id: environmentId, id: In(ids) });
  return new Map(rows.map((r) => [r.id, couponFromRow(r)]));
}

/** Whether discount `d` of coupon `c` discounts `inv` finalized at `at` (see discountsFor). */
function applies(d: Discount, c: Coupon, inv: Invoice, at: Date): boolean {
  // A "repeating" one marked ended (by an invoice dated at or past its end) still discounts an
  // invoice dated before its end that is booked afterwards: its own `at` decides, not the mark.
  if (d.status === "removed" || (d.status === "ended" && c.duration !== "repeating")) return false;
  if (c.duration === "once" && d.invoicesDiscounted > 0) return false;
  // Split by an upgrade: only the invoice that kept the other lines, and an amount off only while some of it is left.
  if (c.duration === "once" && d.heldFor && d.heldFor !== inv.id) return false;
  if (c.amountOff !== null && onceLeft(d, c).lte(0)) return false;
  if (c.duration === "repeating" && d.end !== null && at.getTime() >= d.end.getTime()) return false;
  return c.amountOff === null || c.amountOff.currency === inv.currency;
}

/** What is left of `c`'s amount off for discount `d`: less what an upgrade's change lines took of a "once" one (change-credit.ts). */
function onceLeft(d: Discount, c: Coupon): Decimal {
  const whole = dec(c.amountOff?.value ?? "0");
  return c.duration === "once" && d.onceTaken ? whole.minus(dec(d.onceTaken)) : whole;
}

/** Whether a discount row may still discount an invoice: active, or a "repeating" one (it has an end) marked ended, which the invoice's `at` then decides. */
const live = (r: Pick<DiscountRow, "status" | "ends_at">): boolean => r.status === "active" || (r.status === "ended" && r.ends_at !== null);

/** The where clauses of live rows (see `live`) matching `where`. */
function liveWhere(where: FindOptionsWhere<DiscountRow>): FindOptionsWhere<DiscountRow>[] {
  return [
    { ...where, status: "active" },
    { ...where, status: "ended", ends_at: Not(IsNull()) },
  ];
}

/**
 * The live discounts (see `live`) of `inv`'s subscription and subject, oldest first. For a finalization on
 * MySQL they are then locked by ID (record locks only: a locking read over the secondary index
 * would lock its gaps too, and deadlock with other subscriptions' discounts being written) and read
 * again as the lock found them. `candidates`: the IDs discountCandidates found for its batch,
 * read again by ID (locked when finalizing) instead of the first read.
 */
async function activeDiscounts(em: EntityManager, inv: Invoice, finalizing: boolean, candidates?: readonly string[]): Promise<Discount[]> {
  const lock = finalizing ? rowLock(dialectOf(em)) : undefined;
  let ids = candidates;
  if (ids === undefined) {
    const rows = await em.find<DiscountRow>("Discount", {
      where: [
        ...liveWhere({ environment_id: inv.environmentId, subscription_id: inv.subscriptionId }),
        ...liveWhere({ environment_id: inv.environmentId, subscription_id: IsNull(), subject_id: inv.subjectId }),
      ],
      order: { seq: "ASC" },
    });
    if (rows.length === 0 || !lock) return rows.map(discountFromRow);
    ids = rows.map((r) => r.id);
  }
  if (ids.length === 0) return [];
  const locked = await em.find<DiscountRow>("Discount", { where: { environment_id: inv.environmentId, id: In([...ids]) }, order: { seq: "ASC" }, lock });
  return locked.filter(live).map(discountFromRow);
}

/**
 * What activeDiscounts would find first of each of `list` (invoices of environment
 * `environmentId`), in one read: the IDs of the live discounts of its subscription or (of no
 * subscription) of its subject, oldest first, keyed by invoice ID. A discount only stops being
 * live while invoices are booked, so those found live later are among these: activeDiscounts
 * reads them again by ID (locked when finalizing) as they are then, and keeps the live ones.
 */
export async function discountCandidates(em: EntityManager, environmentId: string, list: readonly Invoice[]): Promise<Map<string, string[]>> {
  if (list.length === 0) return new Map();
  const rows = await em.find<DiscountRow>("Discount", {
    select: { id: true, subscription_id: true, subject_id: true, seq: true },
    where: [
      ...liveWhere({ environment_id: environmentId, subscription_id: In([...new Set(list.map((i) => i.subscriptionId))]) }),
      ...liveWhere({ environment_id: environmentId, subscription_id: IsNull(), subject_id: In([...new Set(list.map((i) => i.subjectId))]) }),
    ],
    order: { seq: "ASC" },
  });
  const mine = (inv: Invoice, r: DiscountRow): boolean => r.subscription_id === inv.subscriptionId || (r.subscription_id === null && r.subject_id === inv.subjectId);
  return new Map(list.map((inv) => [inv.id, rows.filter((r) => mine(inv, r)).map((r) => r.id)]));
}

/**
 * The discounts that apply to `inv` becoming open at `at`, in the order they apply: the live
 * discounts of its subscription, then of its subject, each oldest first; a "once" one only if it
 * discounted no invoice yet, a "repeating" one only while `at` (the invoice's own date) is before
 * its end, whatever an invoice booked before it marked (a batch or a later run may book an earlier-
 * dated invoice after a later-dated one), an amount coupon only on an invoice of its currency.
 * For an open invoice (a finalization) the rows are locked until the transaction ends, and a
 * "repeating" discount found past its end is marked ended (what the API shows; not what decides).
 * `candidates`: the invoice's of discountCandidates (its batch's read), else read here.
 */
export async function discountsFor(em: EntityManager, inv: Invoice, at: Date, candidates?: readonly string[]): Promise<BookingDiscount[]> {
  const finalizing = inv.status === "open";
  const discounts = await activeDiscounts(em, inv, finalizing, candidates);
  if (discounts.length === 0) return [];
  const ordered = [...discounts.filter((d) => d.subscriptionId !== null), ...discounts.filter((d) => d.subscriptionId === null)];
  const coupons = await couponsById(em, inv.environmentId, [...new Set(ordered.map((d) => d.couponId))]);
  const out: BookingDiscount[] = [];
  const over: string[] = [];
  for (const d of ordered) {
    const c = coupons.get(d.couponId);
    if (!c) continue;
    if (c.duration === "repeating" && d.end !== null && at.getTime() >= d.end.getTime()) over.push(d.id);
    if (!applies(d, c, inv, at)) continue;
    out.push({
      discountId: d.id,
      couponId: c.id,
      name: c.name,
      percentOff: c.percentOff,
      amountOff: c.amountOff ? formatDecimal(onceLeft(d, c)) : null,
      appliesToRateCodes: c.appliesToRateCodes,
      duration: c.duration,
      ...(c.duration === "once" ? { onceTaken: d.onceTaken ?? null } : {}),
    });
  }
  if (finalizing && over.length > 0) await em.query(`UPDATE discounts SET status = 'ended' WHERE environment_id = ? AND status = 'active' AND id IN (${marks(over)})`, [inv.environmentId, ...over]);
  return out;
}

const marks = (ids: readonly string[]): string => ids.map(() => "?").join(", ");

/**
 * Records that these discounts discounted `invoiceId`: each one's invoices_discounted goes up by
 * one, and a "once" discount ends (it has had its invoice). Rows are changed by environment and
 * ID only (their locks are the ones discountsFor took).
 */
export async function recordDiscounted(em: EntityManager, discountIds: string[], _invoiceId: string, _at: Date, environmentId: string): Promise<void> {
  if (discountIds.length === 0) return;
  await em.query(`UPDATE discounts SET invoices_discounted = invoices_discounted + 1 WHERE environment_id = ? AND id IN (${marks(discountIds)})`, [environmentId, ...discountIds]);
  const rows = await em.findBy<DiscountRow>("Discount", { environment_id: environmentId, id: In(discountIds) });
  const [first] = rows;
  const coupons = first ? await couponsById(em, environmentId, [...new Set(rows.map((r) => r.coupon_id))]) : new Map<string, Coupon>();
  const once = rows.filter((r) => coupons.get(r.coupon_id)?.duration === "once").map((r) => r.id);
  if (once.length > 0) await em.query(`UPDATE discounts SET status = 'ended' WHERE environment_id = ? AND status = 'active' AND id IN (${marks(once)})`, [environmentId, ...once]);
}

/**
 * Locks these "once" discounts an upgrade's change lines took (booked for `invoiceId`, of
 * environment `environmentId`, from an unlocked read) and checks each is still as that read found
 * it: active, on no invoice yet, held for no other invoice, its once_taken `read`. Any that is not
 * (an invoice's finalization or another upgrade took or held it meanwhile): false, nothing
 * written, and the upgrade starts over. Else each with a `taken` is held for `invoiceId` with it
 * added to what earlier ones took, in exact decimals: it discounts no other invoice, and that one
 * is offered an amount off less what was taken (change-credit.ts). Rows are locked by ID, oldest
 * first, as a finalization locks them.
 */
export async function holdOnce(em: EntityManager, holds: readonly OnceHold[], invoiceId: string, environmentId: string): Promise<boolean> {
  if (holds.length === 0) return true;
  const rows = await em.find<DiscountRow>("Discount", {
    where: { environment_id: environmentId, id: In(holds.map((h) => h.discountId)) },
    order: { seq: "ASC" },
    lock: rowLock(dialectOf(em)),
  });
  const found = new Map(rows.map((r) => [r.id, discountFromRow(r)]));
  if (!holds.every((h) => asRead(found.get(h.discountId), h.read, invoiceId))) return false;
  for (const { discountId, taken } of holds) {
    if (taken === undefined) continue;
    const sum = dec(found.get(discountId)?.onceTaken ?? "0").plus(dec(taken));
    await em.query("UPDATE discounts SET held_for_invoice_id = ?, once_taken = ? WHERE environment_id = ? AND id = ?", [invoiceId, formatDecimal(sum), environmentId, discountId]);
  }
  return true;
}

/** Whether "once" discount `d` is as a booking of `invoiceId` read it with once_taken `read` (holdOnce). */
function asRead(d: Discount | undefined, read: string | null, invoiceId: string): boolean {
  if (d?.status !== "active" || d.invoicesDiscounted > 0) return false;
  if (d.heldFor && d.heldFor !== invoiceId) return false;
  return dec(d.onceTaken ?? "0").eq(dec(read ?? "0"));
}

/** The coupon writes of a transaction on `em`. */
export function couponWrites(em: EntityManager, sql: Sql, E: Entities): CouponWrites {
  const lock = rowLock(sql.dialect);
  return {
    insertCoupon: async (c) => {
      await em.insert(E.Coupon, couponToRow(c));
    },
    archive: async (environmentId, id) => {
      await em.query("UPDATE coupons SET archived_at = ? WHERE environment_id = ? AND id = ? AND archived_at IS NULL", [dbTime(new Date()), environmentId, id]);
      return readCoupon(em, environmentId, id);
    },
    redeem: async (environmentId, couponId, at) => {
      const n = await changed(
        em,
        "UPDATE coupons SET times_redeemed = times_redeemed + 1 WHERE environment_id = ? AND id = ? AND archived_at IS NULL AND (redeem_by IS NULL OR redeem_by >= ?) AND (times_redeemed < max_redemptions OR max_redemptions IS NULL)",
        [environmentId, couponId, dbTime(at)],
      );
      return n === 0 ? undefined : readCoupon(em, environmentId, couponId);
    },
    getCoupon: (environmentId, id) => readCoupon(em, environmentId, id),
    insertDiscount: async (d) => {
      await em.insert(E.Discount, discountToRow(d));
    },
    lockDiscount: (environmentId, id) => readDiscount(em, environmentId, id, lock),
    remove: async (environmentId, id, at) => {
      const n = await changed(em, "UPDATE discounts SET status = 'removed', removed_at = ? WHERE environment_id = ? AND id = ? AND status <> 'removed'", [dbTime(at), environmentId, id]);
      return n === 0 ? undefined : readDiscount(em, environmentId, id);
    },
  };
}

export class SqlCouponStore implements CouponStore {
  constructor(
    private readonly sql: Sql,
    private readonly E: Entities,
    private readonly encode: EventEncoder,
    private readonly now: () => Date = () => new Date(),
  ) {}

  get(environmentId: string, id: string): Promise<Coupon | undefined> {
    return this.sql.run((em) => readCoupon(em, environmentId, id));
  }

  async list(environmentId: string, archived: boolean | undefined, page: Page): Promise<PageResult<Coupon>> {
    const where: FindOptionsWhere<CouponRow> = { environment_id: environmentId };
    if (archived !== undefined) where.archived_at = archived ? Not(IsNull()) : IsNull();
    const rows = await this.sql.run((em) => em.find(this.E.Coupon, { where, order: { seq: "ASC" }, skip: page.offset, take: page.limit + 1 }));
    return toPageResult(rows.map(couponFromRow), page);
  }

  getDiscount(environmentId: string, id: string): Promise<Discount | undefined> {
    return this.sql.run((em) => readDiscount(em, environmentId, id));
  }

  async listDiscounts(environmentId: string, filter: DiscountFilter, page: Page): Promise<PageResult<Discount>> {
    const where: FindOptionsWhere<DiscountRow> = { environment_id: environmentId };
    if (filter.subscriptionId !== undefined) where.subscription_id = filter.subscriptionId;
    if (filter.subjectId !== undefined) where.subject_id = filter.subjectId;
    const rows = await this.sql.run((em) => em.find(this.E.Discount, { where, order: { seq: "ASC" }, skip: page.offset, take: page.limit + 1 }));
    return toPageResult(rows.map(discountFromRow), page);
  }

  coupons(environmentId: string, ids: string[]): Promise<Map<string, Coupon>> {
    return this.sql.run((em) => couponsById(em, environmentId, ids));
  }

  transaction<T>(fn: (tx: CouponTx) => Promise<T>): Promise<T> {
    const run = this.sql.transaction((em) => fn({ ...couponWrites(em, this.sql, this.E), ...eventWrites(em, this.encode, this.now, this.sql.dialect) }));
    return run.catch((err: unknown) => {
      if (isTransient(err)) throw new AbortedError("TRANSACTION_CONFLICT", "the write conflicted with another one (deadlock or lock wait timeout); try again");
      throw err;
    });
  }
}
