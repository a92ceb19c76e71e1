/** Taxes, billing details and invoice settings: proto ⇄ domain (DESIGN §15). */
import type { AddressInput, BillingDetailsInput, SellerInput } from "../../billing/taxes/details.js";
import type { InvoiceSettings, UpdateInvoiceSettingsInput } from "../../billing/taxes/settings.js";
import type { TaxRate } from "../../billing/taxes/types.js";
import type { Address, BillingDetails, SellerDetails } from "../../gen/billing/v1/billing_details_pb.js";
import { type InvoiceSettings as InvoiceSettingsPb, InvoiceSettingsSchema, type UpdateInvoiceSettingsRequest } from "../../gen/billing/v1/invoice_service_pb.js";
import { type TaxRate as TaxRatePb, TaxRateSchema } from "../../gen/billing/v1/tax_rate_pb.js";
import { toPb } from "./common.js";

export const taxRateToPb = (r: TaxRate): TaxRatePb => toPb(TaxRateSchema, r);

function addressInput(a: Address): AddressInput {
  return { line1: a.line1, line2: a.line2, city: a.city, postalCode: a.postalCode, state: a.state, country: a.country };
}

export function billingDetailsInput(d: BillingDetails): BillingDetailsInput {
  return {
    legalName: d.legalName,
    email: d.email,
    address: d.address && addressInput(d.address),
    taxIds: d.taxIds.map((t) => ({ type: t.type, value: t.value })),
    taxExempt: d.taxExempt,
    taxRateIds: [...d.taxRateIds],
  };
}

function sellerInput(s: SellerDetails): SellerInput {
  return { legalName: s.legalName, address: s.address && addressInput(s.address), taxId: s.taxId, email: s.email, footer: s.footer };
}

export function invoiceSettingsToPb(s: InvoiceSettings): InvoiceSettingsPb {
  return toPb(InvoiceSettingsSchema, { ...s, nextInvoiceSequence: BigInt(s.nextInvoiceSequence) });
}

export function updateInvoiceSettingsInput(req: UpdateInvoiceSettingsRequest): UpdateInvoiceSettingsInput {
  return { numberPrefix: req.numberPrefix, seller: req.seller && sellerInput(req.seller) };
}
