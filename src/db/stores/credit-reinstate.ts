/**
 * Credit given back when an invoice is voided (DESIGN §14; BillingCreditWrites.reinstate): each
 * "application" entry of the invoice is matched by a "reinstatement" entry of the same amount,
 * positive, and the grant's `remaining` goes back up by it (a depleted grant active again). A grant
 * that has since expired or been voided, or whose expires_at has passed, takes it back only to let
 * it go at once: an "expiry" (or "void") entry of the same amount on the invoice, its `remaining`
 * left as it is, so the balance (the ledger's sum, the remaining of active and depleted grants)
 * stays right. A grant voided by a refund of its purchase (the refund took back what was unspent,
 * down to 0) gets back as spendable credit, the grant active again, what was paid for and neither
 * refunded nor spent elsewhere: at most its amount less its purchase's refund notes (money given
 * back) less what it pays on other invoices; the rest is let go at once. The ledger's unique key (grant_id, invoice_id, entry_type, credit_note_id) lets
 * each application be reinstated once, whatever runs at the same time.
 */
import type { EntityManager } from "typeorm";
import type { CreditGrant, LedgerEntry } from "../../billing/credits/types.js";
import { AbortedError } from "../../billing/errors.js";
import { type Decimal, ZERO, dec, formatDecimal } from "../../billing/money.js";
import type { Dialect } from "../columns.js";
import type { Entities } from "../entities/index.js";
import { dbTime } from "../raw.js";
import { type Sql, rowLock } from "../sql.js";
import { decParam, grantFromRow, insertEntry } from "./credit-store.js";
import { changed } from "./outbox.js";

/** Whether voided grant `g` was voided by a refund of its purchase (the refund's "void" entry, naming its credit note, made at the grant's voided_at), not by an operator. */
async function voidedByRefund(em: EntityManager, g: CreditGrant): Promise<boolean> {
  if (g.status !== "voided" || !g.voidedAt) return false;
  const rows = (await em.query("SELECT grant_id FROM credit_ledger WHERE environment_id = ? AND grant_id = ? AND entry_type = 'void' AND credit_note_id <> '' AND created_at = ? LIMIT 1", [
    g.environmentId,
    g.id,
    dbTime(g.voidedAt),
  ])) as unknown[];
  return rows.length > 0;
}

/**
 * What of `spent` (an application of refund-voided grant `g` to invoice `invoiceId`) comes back
 * spendable: its amount less the refund notes of its purchase's invoice (money given back) less
 * what it pays on other invoices (applications less reinstatements), at most `spent`.
 */
async function unrefunded(em: EntityManager, g: CreditGrant, spent: Decimal, invoiceId: string): Promise<Decimal> {
  const refunds = g.invoiceId
    ? ((await em.query("SELECT total FROM credit_notes WHERE environment_id = ? AND invoice_id = ? AND outcome = 'refund'", [g.environmentId, g.invoiceId])) as { total: string }[])
    : [];
  const moves = (await em.query("SELECT amount FROM credit_ledger WHERE environment_id = ? AND grant_id = ? AND entry_type IN ('application', 'reinstatement') AND invoice_id <> ?", [
    g.environmentId,
    g.id,
    invoiceId,
  ])) as { amount: string }[];
  const refunded = refunds.reduce((a, r) => a.plus(dec(String(r.total))), ZERO);
  const elsewhere = moves.reduce((a, m) => a.minus(dec(String(m.amount))), ZERO);
  const left = dec(g.amount).minus(refunded).minus(elsewhere);
  return left.lte(0) ? ZERO : left.lt(spent) ? left : spent;
}

/** The reinstatement of one application (−`spent` of `g`, locked) on invoice `invoiceId` at `at`: its entries. */
async function reinstateOne(em: EntityManager, E: Entities, d: Dialect, g: CreditGrant, spent: string, invoiceId: string, at: Date): Promise<LedgerEntry[]> {
  const back = await insertEntry(em, E, g, "reinstatement", spent, invoiceId, `Reinstated: invoice ${invoiceId} was voided`, at);
  const lapsed = g.expiresAt !== null && g.expiresAt.getTime() <= at.getTime();
  // What comes back spendable: all of it to an active or depleted grant; to one a refund voided, what was paid for and not given back.
  const kept = lapsed ? ZERO : g.status === "active" || g.status === "depleted" ? dec(spent) : (await voidedByRefund(em, g)) ? await unrefunded(em, g, dec(spent), invoiceId) : ZERO;
  const out = [back];
  const gone = dec(spent).minus(kept);
  if (gone.gt(0)) {
    // Gone from the balance already (or due to go): what does not come back spendable leaves again at once.
    const how = g.status === "voided" ? "void" : "expiry";
    out.push(await insertEntry(em, E, g, how, formatDecimal(gone.neg()), invoiceId, how === "void" ? "Voided" : "Expired", at));
  }
  if (!kept.gt(0)) return out;
  const remaining = dec(g.remaining).plus(kept);
  if (remaining.gt(dec(g.amount))) throw new Error(`grant ${g.id} would hold ${formatDecimal(remaining)} of ${g.amount} after reinstating ${spent}`);
  const p = decParam(d);
  const n = await changed(em, `UPDATE credit_grants SET status = 'active', voided_at = NULL, remaining = ? WHERE environment_id = ? AND id = ? AND status = ? AND remaining = ${p}`, [
    formatDecimal(remaining),
    g.environmentId,
    g.id,
    g.status,
    g.remaining,
  ]);
  if (n === 0) throw new AbortedError("TRANSACTION_CONFLICT", "the grant changed while its credit was being reinstated; try again");
  return out;
}

/**
 * BillingCreditWrites.reinstate on `em`: the applications of invoice `invoiceId` (subject
 * `subjectId`) in the order they were made, each grant locked (the spend order, as finalizations
 * lock them), then reinstated; the new ledger entries.
 */
export async function reinstateOn(em: EntityManager, E: Entities, sql: Sql, x: { environmentId: string; subjectId: string; invoiceId: string; at: Date }): Promise<LedgerEntry[]> {
  const spent = await em.find(E.CreditLedgerEntry, {
    where: { environment_id: x.environmentId, subject_id: x.subjectId, invoice_id: x.invoiceId, entry_type: "application" },
    order: { seq: "ASC" },
  });
  const out: LedgerEntry[] = [];
  for (const a of spent) {
    const r = await em.findOne(E.CreditGrant, { where: { environment_id: x.environmentId, id: a.grant_id }, lock: rowLock(sql.dialect) });
    if (!r) throw new Error(`grant ${a.grant_id} of an application to invoice ${x.invoiceId} not found`);
    const amount = formatDecimal(dec(a.amount).neg());
    if (!dec(amount).gt(0)) continue;
    out.push(...(await reinstateOne(em, E, sql.dialect, grantFromRow(r), amount, x.invoiceId, x.at)));
  }
  return out;
}

/** The reinstatement writes of a billing transaction on `em`. */
export function reinstateWrites(em: EntityManager, sql: Sql, E: Entities) {
  return {
    reinstate: (environmentId: string, subjectId: string, invoiceId: string, at: Date) => reinstateOn(em, E, sql, { environmentId, subjectId, invoiceId, at }),
  };
}
