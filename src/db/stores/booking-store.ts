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
import { billingDetailsOf, cardTaxRateIds, taxRatesOf } from "./tax-store.js";

/** The seller details of an environment as stored (JSON), in the domain's shape. */
export function sellerFromRow(raw: unknown): SellerDetails | null {
  if (raw === null || raw === undefined) return null;
  const s = (typeof raw === "string" ? JSON.parse(raw) : raw) as Partial<SellerDetails>;
  return { legalName: s.legalName ?? null, address: s.address ?? null, taxId: s.taxId ?? null, email: s.email ?? null, footer: s.footer ?? null };
}

async function parties(em: EntityManager, inv: Invoice): Promise<InvoiceParties> {
  const [subject] = (await em.query("SELECT name FROM subjects WHERE id = ?", [inv.subjectId])) as { name: string | null }[];
  const [env] = (await em.query("SELECT seller FROM environments WHERE id = ?", [inv.environmentId])) as { seller: unknown }[];
  const [sub] = (await em.query("SELECT rate_card_id AS c FROM subscriptions WHERE id = ?", [inv.subscriptionId])) as { c: string }[];
  return {
    customerName: subject?.name ?? null,
    customer: await billingDetailsOf(em, inv.subjectId),
    seller: sellerFromRow(env?.seller),
    cardTaxRateIds: sub ? await cardTaxRateIds(em, sub.c) : [],
  };
}

export function bookingWrites(em: EntityManager, sql: Sql): BookingTx {
  return {
    discountsFor: (inv, at) => discountsFor(em, inv, at),
    discounted: (ids, invoiceId, at) => recordDiscounted(em, ids, invoiceId, at),
    parties: (inv) => parties(em, inv),
    taxes: new BuiltInTaxProvider((environmentId, ids) => taxRatesOf(em, environmentId, ids)),
    nextNumbers: (environmentId, kind, count) => nextNumbers(em, sql.dialect, environmentId, kind, count),
  };
}
