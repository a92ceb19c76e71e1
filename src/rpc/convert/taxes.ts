/** Taxes, billing details and invoice settings: proto ⇄ domain (DESIGN §15). */
import { create } from "@bufbuild/protobuf";
import type { AddressInput, BillingDetailsInput, SellerInput } from "../../billing/taxes/details.js";
import type { CreateTaxRateInput } from "../../billing/taxes/rates.js";
import type { InvoiceSettings, UpdateInvoiceSettingsInput } from "../../billing/taxes/settings.js";
import type { TaxRate } from "../../billing/taxes/types.js";
import type { Address, BillingDetails, SellerDetails } from "../../gen/billing/v1/billing_details_pb.js";
import { type InvoiceSettings as InvoiceSettingsPb, InvoiceSettingsSchema, type UpdateInvoiceSettingsRequest } from "../../gen/billing/v1/invoice_service_pb.js";
import { type TaxRate as TaxRatePb, TaxRateSchema } from "../../gen/billing/v1/tax_rate_pb.js";
import type { CreateTaxRateRequest } from "../../gen/billing/v1/tax_rate_service_pb.js";
import { sellerToPb } from "./billing.js";
import { ts } from "./common.js";

export function taxRateToPb(r: TaxRate): TaxRatePb {
  return create(TaxRateSchema, {
    id: r.id,
    displayName: r.displayName,
    percentage: r.percentage,
    inclusive: r.inclusive,
    country: r.country ?? undefined,
    region: r.region ?? undefined,
    description: r.description ?? undefined,
    archived: r.archived,
    createdAt: ts(r.createdAt),
    metadata: r.metadata,
  });
}

export function createTaxRateInput(req: CreateTaxRateRequest): CreateTaxRateInput {
  return {
    displayName: req.displayName,
    percentage: req.percentage,
    inclusive: req.inclusive,
    country: req.country,
    region: req.region,
    description: req.description,
    metadata: req.metadata,
  };
}

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
  return create(InvoiceSettingsSchema, {
    numberPrefix: s.numberPrefix,
    nextInvoiceSequence: BigInt(s.nextInvoiceSequence),
    seller: s.seller ? sellerToPb(s.seller) : undefined,
  });
}

export function updateInvoiceSettingsInput(req: UpdateInvoiceSettingsRequest): UpdateInvoiceSettingsInput {
  return { numberPrefix: req.numberPrefix, seller: req.seller && sellerInput(req.seller) };
}
