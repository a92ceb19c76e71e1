/**
 * What booking an invoice reads and writes in its finalizing transaction (BookingTx, DESIGN §15):
 * discounts (coupon-store.ts), the parties and tax rates (tax-store.ts, the built-in tax engine),
 * numbers (numbering.ts). A batch (a cycle close books a hundred invoices in one transaction)
 * reads its invoices' parties and candidate discounts at once (prefetch), a few set-based reads
 * per environment instead of a few per invoice.
 */
import type { EntityManager } from "typeorm";
import { cardOfKey } from "../../billing/subscriptions/line-cards.js";
import type { BookingTx, InvoiceParties } from "../../billing/subscriptions/ports.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import { BuiltInTaxProvider } from "../../billing/taxes/built-in.js";
import type { BillingDetails, SellerDetails } from "../../billing/taxes/types.js";
import type { Sql } from "../sql.js";
import { discountCandidates, discountsFor, holdOnce, recordDiscounted } from "./coupon-store.js";
import { nextNumbers } from "./numbering.js";
import { billingDetailsOf, cardTaxRateIds, cardTaxRateIdsOf, sellerFromJson, subjectsBillingOf, taxRatesOf } from "./tax-store.js";

/** What one transaction reads once for many invoices (a cycle close books a hundred): sellers by environment, tax rates by `<environment> <card>`. */
interface Memo {
  sellers: Map<string, SellerDetails | null>;
  cards: Map<string, string[]>;
}

/**
 * What a batch's prefetch read of its invoices, as the single reads would find it (nothing the
 * batch's booking writes changes it): subjects by `<environment> <ID>` (null: no such subject),
 * subscriptions' rate cards likewise (null: no such subscription; read only for invoices without a
 * usage window), candidate discounts by invoice ID.
 */
interface Batch {
  subjects: Map<string, { name: string | null; details: BillingDetails | null } | null>;
  cards: Map<string, string | null>;
  discounts: Map<string, string[]>;
}

const keyOf = (environmentId: string, id: string): string => `${environmentId} ${id}`;

async function sellerOf(em: EntityManager, environmentId: string, memo: Memo): Promise<SellerDetails | null> {
  let seller = memo.sellers.get(environmentId);
  if (seller === undefined) {
    const [env] = (await em.query("SELECT seller FROM environments WHERE id = ?", [environmentId])) as { seller: unknown }[];
    seller = sellerFromJson(env?.seller);
    memo.sellers.set(environmentId, seller);
  }
  return seller;
}

async function parties(em: EntityManager, inv: Invoice, memo: Memo, batch?: Batch): Promise<InvoiceParties> {
  const known = batch?.subjects.get(keyOf(inv.environmentId, inv.subjectId));
  let subject: { name: string | null } | undefined = known ?? undefined;
  if (known === undefined) {
    [subject] = (await em.query("SELECT name FROM subjects WHERE environment_id = ? AND id = ?", [inv.environmentId, inv.subjectId])) as { name: string | null }[];
  }
  const seller = await sellerOf(em, inv.environmentId, memo);
  // The card the invoice priced: its usage window's (a change's invoice of the old card, finalized
  // after the subscription moved on, is taxed as that card says), else its subscription's.
  let card: string | null | undefined = inv.window?.rateCardId;
  if (card === undefined) card = batch?.cards.get(keyOf(inv.environmentId, inv.subscriptionId));
  if (card === undefined) {
    const [sub] = (await em.query("SELECT rate_card_id AS c FROM subscriptions WHERE environment_id = ? AND id = ?", [inv.environmentId, inv.subscriptionId])) as { c: string }[];
    card = sub?.c ?? null;
  }
  let cardRates: string[] = [];
  if (card !== null) {
    const key = keyOf(inv.environmentId, card);
    cardRates = memo.cards.get(key) ?? (await cardTaxRateIds(em, inv.environmentId, card));
    memo.cards.set(key, cardRates);
  }
  const customer = known === undefined ? await billingDetailsOf(em, inv.environmentId, inv.subjectId) : (known?.details ?? null);
  const adjustedCardTaxRateIds = await adjustedCards(em, inv, card, memo);
  return { customerName: subject?.name ?? null, customer, seller, cardTaxRateIds: cardRates, ...(adjustedCardTaxRateIds.size > 0 ? { adjustedCardTaxRateIds } : {}) };
}

/**
 * The default tax rates of the cards that priced lines of `inv` where that card is not `card`
 * (the invoice's): by window invoice ID, the cards of the earlier windows its adjustment lines
 * adjust (late usage of a card left by a change is taxed as that card says); by line key, the
 * cards a change's credit and charge lines name (change-lines.ts). One read of windows, only for
 * an invoice with adjustments.
 */
async function adjustedCards(em: EntityManager, inv: Invoice, card: string | null, memo: Memo): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const ratesOf = async (priced: string): Promise<string[]> => {
    const key = keyOf(inv.environmentId, priced);
    const ids = memo.cards.get(key) ?? (await cardTaxRateIds(em, inv.environmentId, priced));
    memo.cards.set(key, ids);
    return ids;
  };
  for (const l of inv.lines) {
    const priced = cardOfKey(l.key);
    if (l.key && priced && priced !== card && !out.has(l.key)) out.set(l.key, await ratesOf(priced));
  }
  const windows = [...new Set(inv.lines.flatMap((l) => (l.kind === "adjustment" && l.windowInvoiceId ? [l.windowInvoiceId] : [])))];
  if (windows.length === 0) return out;
  const rows = (await em.query(`SELECT id, basis FROM invoices WHERE environment_id = ? AND id IN (${windows.map(() => "?").join(", ")})`, [inv.environmentId, ...windows])) as {
    id: string;
    basis: unknown;
  }[];
  for (const r of rows) {
    const basis = (typeof r.basis === "string" ? JSON.parse(r.basis) : r.basis) as { rateCardId?: string } | null;
    const priced = basis?.rateCardId;
    if (!priced || priced === card) continue;
    out.set(r.id, await ratesOf(priced));
  }
  return out;
}

/** Reads for the batch `list` what parties and discountsFor read of each invoice, per environment with set-based reads. */
async function prefetch(em: EntityManager, list: readonly Invoice[], memo: Memo): Promise<Batch> {
  const batch: Batch = { subjects: new Map(), cards: new Map(), discounts: new Map() };
  const byEnv = new Map<string, Invoice[]>();
  for (const inv of list) byEnv.set(inv.environmentId, [...(byEnv.get(inv.environmentId) ?? []), inv]);
  for (const [env, invoices] of byEnv) {
    const subjectIds = [...new Set(invoices.map((i) => i.subjectId))];
    const subjects = await subjectsBillingOf(em, env, subjectIds);
    for (const id of subjectIds) batch.subjects.set(keyOf(env, id), subjects.get(id) ?? null);
    // Subscriptions' cards only for the invoices without a usage window (parties takes the window's).
    const subIds = [...new Set(invoices.filter((i) => !i.window).map((i) => i.subscriptionId))];
    const rows =
      subIds.length === 0
        ? []
        : ((await em.query(`SELECT id, rate_card_id AS c FROM subscriptions WHERE environment_id = ? AND id IN (${subIds.map(() => "?").join(", ")})`, [env, ...subIds])) as {
            id: string;
            c: string;
          }[]);
    const cardOf = new Map(rows.map((r) => [r.id, r.c]));
    for (const id of subIds) batch.cards.set(keyOf(env, id), cardOf.get(id) ?? null);
    const cards = [...rows.map((r) => r.c), ...invoices.flatMap((i) => (i.window ? [i.window.rateCardId] : []))];
    const unknown = [...new Set(cards)].filter((c) => !memo.cards.has(keyOf(env, c)));
    for (const [card, ids] of await cardTaxRateIdsOf(em, env, unknown)) memo.cards.set(keyOf(env, card), ids);
    await sellerOf(em, env, memo);
    for (const [invoiceId, ids] of await discountCandidates(em, env, invoices)) batch.discounts.set(invoiceId, ids);
  }
  return batch;
}

export function bookingWrites(em: EntityManager, sql: Sql): BookingTx {
  const memo: Memo = { sellers: new Map(), cards: new Map() };
  const booking: BookingTx = {
    discountsFor: (inv, at) => discountsFor(em, inv, at),
    discounted: (ids, invoiceId, at, environmentId) => recordDiscounted(em, ids, invoiceId, at, environmentId),
    holdOnce: (holds, invoiceId, environmentId) => holdOnce(em, holds, invoiceId, environmentId),
    parties: (inv) => parties(em, inv, memo),
    prefetch: async (list) => {
      const batch = await prefetch(em, list, memo);
      return {
        ...booking,
        discountsFor: (inv, at) => discountsFor(em, inv, at, batch.discounts.get(inv.id)),
        parties: (inv) => parties(em, inv, memo, batch),
      };
    },
    taxes: new BuiltInTaxProvider((environmentId, ids) => taxRatesOf(em, environmentId, ids)),
    nextNumbers: (environmentId, kind, count) => nextNumbers(em, sql.dialect, environmentId, kind, count),
  };
  return booking;
}
