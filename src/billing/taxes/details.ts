/**
 * Checks of the parties' details (DESIGN §15): a subject's billing details and an environment's
 * seller, each violation named by its full path (e.g. `billing_details.tax_ids[0].value`).
 */
import type { Violations } from "../errors.js";
import { isCountry } from "./countries.js";
import { TAX_ID_TYPES, normalizeTaxId, taxIdProblem } from "./tax-ids.js";
import { type Address, type BillingDetails, type SellerDetails, TAX_EXEMPT, type TaxExempt } from "./types.js";

export interface AddressInput {
  line1?: string;
  line2?: string;
  city?: string;
  postalCode?: string;
  state?: string;
  country: string;
}

export interface BillingDetailsInput {
  legalName?: string;
  email?: string;
  address?: AddressInput;
  taxIds: { type: string; value: string }[];
  /** "" means the default, "none". */
  taxExempt: string;
  taxRateIds: string[];
}

export interface SellerInput {
  legalName?: string;
  address?: AddressInput;
  taxId?: string;
  email?: string;
  footer?: string;
}

export const MAX_TAX_IDS = 10;
export const MAX_TAX_RATES = 10;
export const MAX_FOOTER = 500;
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;

/** Optional text: "" is none; longer than `max` a violation. */
function text(value: string | undefined, field: string, max: number, v: Violations): string | null {
  if (value === undefined || value === "") return null;
  if (value.length > max) v.add(field, `must have at most ${max} characters`);
  return value;
}

function email(value: string | undefined, field: string, v: Violations): string | null {
  if (value === undefined || value === "") return null;
  if (value.length > 254 || !EMAIL.test(value)) v.add(field, "must be a valid email address");
  return value;
}

/** An ISO 3166-1 alpha-2 code, upper-cased; a violation at `field` otherwise. */
export function checkCountry(code: string, field: string, v: Violations): string {
  if (code === "") v.add(field, "is required");
  else if (!isCountry(code)) v.add(field, `${JSON.stringify(code)} is not an ISO 3166-1 alpha-2 country code`);
  return code.toUpperCase();
}

export function checkAddress(a: AddressInput, v: Violations): Address {
  return {
    line1: text(a.line1, "line1", 200, v),
    line2: text(a.line2, "line2", 200, v),
    city: text(a.city, "city", 200, v),
    postalCode: text(a.postalCode, "postal_code", 20, v),
    state: a.state ? (text(a.state, "state", 100, v) as string).toUpperCase() : null,
    country: checkCountry(a.country, "country", v),
  };
}

/**
 * A subject's billing details, normalized (tax IDs without spaces and dots, upper-case; country
 * codes upper-case), `v` at `billing_details`. The tax rates' existence is checked apart
 * (rates.ts checkTaxRateIds): it needs the store.
 */
export function checkBillingDetails(d: BillingDetailsInput, v: Violations): BillingDetails {
  const taxIds = d.taxIds.map((t, i) => {
    const at = v.at("tax_ids").at(i);
    const value = normalizeTaxId(t.value);
    if (!(t.type in TAX_ID_TYPES)) at.add("type", `must be one of ${Object.keys(TAX_ID_TYPES).join(", ")}`);
    else {
      const problem = taxIdProblem(t.type, value);
      if (problem) at.add("value", problem);
    }
    return { type: t.type, value };
  });
  if (d.taxIds.length > MAX_TAX_IDS) v.add("tax_ids", `must have at most ${MAX_TAX_IDS} entries`);
  const taxExempt = (d.taxExempt === "" ? "none" : d.taxExempt) as TaxExempt;
  if (!TAX_EXEMPT.includes(taxExempt)) v.add("tax_exempt", `must be one of ${TAX_EXEMPT.join(", ")}`);
  if (d.taxRateIds.length > MAX_TAX_RATES) v.add("tax_rate_ids", `must have at most ${MAX_TAX_RATES} entries`);
  return {
    legalName: text(d.legalName, "legal_name", 255, v),
    email: email(d.email, "email", v),
    address: d.address ? checkAddress(d.address, v.at("address")) : null,
    taxIds,
    taxExempt,
    taxRateIds: [...d.taxRateIds],
  };
}

/** An environment's seller details, `v` at `seller`; none given at all: null. */
export function checkSeller(s: SellerInput, v: Violations): SellerDetails | null {
  const seller: SellerDetails = {
    legalName: text(s.legalName, "legal_name", 255, v),
    address: s.address ? checkAddress(s.address, v.at("address")) : null,
    taxId: text(s.taxId?.trim(), "tax_id", 64, v),
    email: email(s.email, "email", v),
    footer: text(s.footer, "footer", MAX_FOOTER, v),
  };
  return Object.values(seller).every((x) => x === null) ? null : seller;
}
