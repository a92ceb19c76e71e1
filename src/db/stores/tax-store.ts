/** Storage of tax rates and of subjects' billing details (DESIGN §15). */
import type { EntityManager } from "typeorm";
import type { BillingDetails, TaxRate } from "../../billing/taxes/types.js";

/** Tax rates of an environment by id (archived ones too). */
export async function taxRatesOf(_em: EntityManager, _environmentId: string, _ids: readonly string[]): Promise<TaxRate[]> {
  return [];
}

/** A subject's billing details (null: never set). */
export async function billingDetailsOf(_em: EntityManager, _subjectId: string): Promise<BillingDetails | null> {
  return null;
}

/** A rate card's default tax rates. */
export async function cardTaxRateIds(_em: EntityManager, _rateCardId: string): Promise<string[]> {
  return [];
}
