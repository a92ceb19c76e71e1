/**
 * Closing a subscription's usage window before its cycle ends, when the terms its usage is priced
 * at change mid-period: a change of rate card (changes.ts) or a `PATCH /subscriptions/{id}` that
 * changes a usage rate's multiplier or which usage rates are charged (a usage-based catalog add-on
 * taken or dropped; updates.ts). The usage of [usage_since, at) is invoiced at once under the card
 * and terms it was used under — a draft for the environment's grace period (its window keeps those
 * terms, so late usage and the draft's recomputation price by them), or final at once — and `at`
 * becomes the new usage_since, from which the new terms price the rest of the period. Minimums
 * and maximums of each window are prorated by its share of the period (limits.ts windowShare), and
 * a minimum commitment counts every window of the period (commitments.ts periodCharges).
 */
import type { RateCard } from "../catalog/types.js";
import { randomBase62 } from "../ids.js";
import type { BillLine, InvoiceBuilder } from "./invoice-building.js";
import { multiplierOf } from "./invoice-building.js";
import type { TermsOf } from "./proration.js";
import type { BillingReads } from "./reads.js";
import type { Invoice, Subscription } from "./types.js";

/**
 * The invoice of `lines` that closes `s`'s usage window at `at`: it bills [usage_since, at) of
 * `card` (the card the usage was used under), keyed `<kind>:<ms>:<random>` so that several
 * changes at one instant (a frozen test clock) each get their own; the locked row's fence is what
 * keeps one change from being applied twice.
 */
export async function windowInvoice(builder: InvoiceBuilder, s: Subscription, card: RateCard, kind: string, lines: BillLine[], at: Date): Promise<Invoice> {
  const terms = await builder.windowTerms(s, s.usageSince, at, at);
  return builder.newInvoice(s, card, `${kind}:${at.getTime()}:${randomBase62(8)}`, lines, s.usageSince, at, at, terms);
}

/**
 * Whether moving from terms `before` to `after` on `card` changes how usage is priced: another
 * set of usage rates charged (a usage-based catalog add-on taken or dropped), or another
 * multiplier on a usage rate charged at both. A change of fixed-rate quantities alone (seats), or
 * of a fixed rate's multiplier, prices no usage differently.
 */
export async function usageTermsChange(reads: Pick<BillingReads, "rates">, card: RateCard, before: TermsOf, after: TermsOf): Promise<boolean> {
  const was = (await reads.rates(card, before.fixedRateQuantities)).usage.map((r) => r.code);
  const now = new Set((await reads.rates(card, after.fixedRateQuantities)).usage.map((r) => r.code));
  if (was.length !== now.size || was.some((code) => !now.has(code))) return true;
  return was.some((code) => !multiplierOf(before, code).eq(multiplierOf(after, code)));
}
