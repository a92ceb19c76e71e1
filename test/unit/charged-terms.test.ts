/**
 * The terms a subscription's current period was billed at (proration.ts, chargedTerms): what a
 * proration or an unused-time credit takes as paid, and what a change without proration
 * (proration_behavior none) leaves them at. Pure, table-driven.
 */
import test from "ava";
import { type TermsOf, chargedAfterUnbilled, chargedTerms } from "../../src/billing/subscriptions/proration.js";
import type { Subscription } from "../../src/billing/subscriptions/types.js";

const terms = (seats: string, multiplier?: string): TermsOf => ({ fixedRateQuantities: { seats }, rateMultipliers: multiplier ? { seats: multiplier } : {} });
const row = (t: TermsOf, charged?: TermsOf | null) => ({ ...t, chargedTerms: charged }) as Subscription;

// [what, the row's terms, its chargedTerms, the terms the period was billed at]
const billed: [string, TermsOf, TermsOf | null | undefined, TermsOf][] = [
  ["a row written before chargedTerms: its own terms", terms("2"), undefined, terms("2")],
  ["null: the row's terms", terms("5"), null, terms("5")],
  ["after a none change 2 → 5: the 2 billed", terms("5"), terms("2"), terms("2")],
  ["after a none change of the multiplier 1 → 1.5: the 1 billed", terms("2", "1.5"), terms("2"), terms("2")],
];
for (const [what, t, charged, expected] of billed) {
  test(`chargedTerms: ${what}`, (tt) => tt.deepEqual(chargedTerms(row(t, charged)), expected));
}

// [what, the row's terms, its chargedTerms, the change without proration, chargedTerms after it]
const unbilled: [string, TermsOf, TermsOf | null, TermsOf, TermsOf | null][] = [
  ["paid 2, 2 → 5: the period keeps the 2", terms("2"), null, terms("5"), terms("2")],
  ["paid 2, then 5 → 3: still the 2 (not the 5 it never paid)", terms("5"), terms("2"), terms("3"), terms("2")],
  ["paid 2, then 5 → 2: back at what was paid, null", terms("5"), terms("2"), terms("2"), null],
  ["paid 2, multiplier 1 → 1.5: the period keeps multiplier 1", terms("2"), null, terms("2", "1.5"), terms("2")],
  ["no change of terms: nothing moves", terms("2"), null, terms("2"), null],
];
for (const [what, t, charged, next, expected] of unbilled) {
  test(`chargedAfterUnbilled: ${what}`, (tt) => tt.deepEqual(chargedAfterUnbilled(row(t, charged), next), expected));
}
