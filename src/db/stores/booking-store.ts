/**
 * What booking an invoice reads and writes in its finalizing transaction (BookingTx, DESIGN §15):
 * discounts (coupon-store.ts), the parties and tax rates (tax-store.ts, the built-in tax engine),
 * numbers (numbering.ts).
 */
import type { EntityManager } from "typeorm";
import type { BookingTx, InvoiceParties } from "../../billing/subscriptions/ports.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import { BuiltInTaxProvider } from "../../billing/taxes/built-in.js";
import type { SellerDetails } from "../../billing/taxes/types.js";
import type { Sql } from "../sql.js";
import { discountsFor, recordDiscounted } from "./coupon-store.js";
import { nextNumbers } from "./numbering.js";
import { billingDetailsOf, cardTaxRateIds, sellerFromJson, taxRatesOf } from "./tax-store.js";

/** What one transaction reads once for many invoices (a cycle close books a hundred): sellers by environment, tax rates by card. */
interface Memo {
  sellers: Map<string, SellerDetails | null>;
  cards: Map<string, string[]>;
}

async function parties(em: EntityManager, inv: Invoice, memo: Memo): Promise<InvoiceParties> {
  const [subject] = (await em.query("SELECT name FROM subjects WHERE environment_id = ? AND id = ?", [inv.environmentId, inv.subjectId])) as { name: string | null }[];
  let seller = memo.sellers.get(inv.environmentId);
  if (seller === undefined) {
    const [env] = (await em.query("SELECT seller FROM environments WHERE id = ?", [inv.environmentId])) as { seller: unknown }[];
    seller = sellerFromJson(env?.seller);
    memo.sellers.set(inv.environmentId, seller);
  }
  const [sub] = (await em.query("SELECT rate_card_id AS c FROM subscriptions WHERE environment_id = ? AND id = ?", [inv.environmentId, inv.subscriptionId])) as { c: string }[];
  let cardRates: string[] = [];
  if (sub) {
    cardRates = memo.cards.get(sub.c) ?? (await cardTaxRateIds(em, inv.environmentId, sub.c));
    memo.cards.set(sub.c, cardRates);
  }
  return { customerName: subject?.name ?? null, customer: await billingDetailsOf(em, inv.environmentId, inv.subjectId), seller, cardTaxRateIds: cardRates };
}

export function bookingWrites(em: EntityManager, sql: Sql): BookingTx {
  const memo: Memo = { sellers: new Map(), cards: new Map() };
  return {
    discountsFor: (inv, at) => discountsFor(em, inv, at),
    discounted: (ids, invoiceId, at, environmentId) => recordDiscounted(em, ids, invoiceId, at, environmentId),
    parties: (inv) => parties(em, inv, memo),
    taxes: new BuiltInTaxProvider((environmentId, ids) => taxRatesOf(em, environmentId, ids)),
    nextNumbers: (environmentId, kind, count) => nextNumbers(em, sql.dialect, environmentId, kind, count),
  };
}
