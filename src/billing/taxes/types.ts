/**
 * Taxes and the parties of an invoice (DESIGN §15): tax rates, a subject's billing details, the
 * seller per environment, and the TaxProvider port that decides which rates apply to which line.
 */
import type { Metadata } from "../metadata.js";

export interface TaxRate {
  id: string;
  environmentId: string;
  displayName: string;
  /** An exact decimal percentage, 0..100, at most 4 decimal places. */
  percentage: string;
  inclusive: boolean;
  /** ISO 3166-1 alpha-2; null: any country. */
  country: string | null;
  region: string | null;
  description: string | null;
  archived: boolean;
  createdAt: Date;
  metadata: Metadata;
}

/** What a line's tax is computed with: the rate as it was when the invoice was finalized. */
export type AppliedTaxRate = Pick<TaxRate, "id" | "displayName" | "percentage" | "inclusive">;

export type TaxExempt = "none" | "exempt" | "reverse";
export const TAX_EXEMPT: readonly TaxExempt[] = ["none", "exempt", "reverse"];

export interface Address {
  line1: string | null;
  line2: string | null;
  city: string | null;
  postalCode: string | null;
  state: string | null;
  /** ISO 3166-1 alpha-2, upper-case. */
  country: string;
}

export interface TaxId {
  type: string;
  /** Normalized: spaces and dots removed, upper-case. */
  value: string;
}

export interface BillingDetails {
  legalName: string | null;
  email: string | null;
  address: Address | null;
  taxIds: TaxId[];
  taxExempt: TaxExempt;
  /** Overrides the rate cards' default tax rates; empty: the defaults. */
  taxRateIds: string[];
}

export interface SellerDetails {
  legalName: string | null;
  address: Address | null;
  taxId: string | null;
  email: string | null;
  footer: string | null;
}

/** The notes an invoice prints for a buyer that is not taxed. */
export const REVERSE_CHARGE_NOTE = "Reverse charge: VAT to be accounted for by the recipient (Article 196, Council Directive 2006/112/EC).";
export const TAX_EXEMPT_NOTE = "Tax exempt.";

/** What a tax engine is asked about an invoice. */
export interface TaxQuery {
  environmentId: string;
  subjectId: string;
  currency: string;
  /** The buyer's billing details (null: none set). */
  customer: BillingDetails | null;
  /** The default tax rates of the rate card the invoice priced (none for an invoice of no card). */
  cardTaxRateIds: readonly string[];
  /**
   * Each line: its rate code (null: none) and amount after discounts; and the default tax rates of
   * the card that priced it when that is another card (late usage of a window of a card left by a
   * change), absent: the invoice's.
   */
  lines: readonly { rateCode: string | null; amount: string; cardTaxRateIds?: readonly string[] }[];
}

/** What it answers: per line (same order) the rates that apply, and whether the buyer is exempt. */
export interface TaxAnswer {
  exempt: TaxExempt;
  ratesPerLine: AppliedTaxRate[][];
}

/**
 * The port of a tax engine (DESIGN §15). The built-in adapter (taxes/built-in.ts) applies the
 * environment's tax rates: the subject's own, else the rate card's defaults, each where its
 * country and region match the buyer's address; an external engine would answer the same query.
 */
export interface TaxProvider {
  taxesFor(query: TaxQuery): Promise<TaxAnswer>;
}
