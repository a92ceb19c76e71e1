/**
 * An environment's invoice settings (DESIGN §15): the prefix its invoice numbers carry and the
 * seller its invoices and credit notes print.
 */
import { Violations } from "../errors.js";
import type { Caller } from "../tenancy.js";
import { type SellerInput, checkSeller } from "./details.js";
import type { SellerDetails } from "./types.js";

export interface InvoiceSettings {
  numberPrefix: string;
  /** The number the next finalized invoice gets. */
  nextInvoiceSequence: number;
  seller: SellerDetails | null;
}

/** Storage port: the environment's row and its invoice sequence. */
export interface InvoiceSettingsStore {
  get(environmentId: string): Promise<InvoiceSettings>;
  /** Sets what is given (undefined: unchanged); the settings as they are then. */
  update(environmentId: string, change: { numberPrefix?: string; seller?: SellerDetails | null }): Promise<InvoiceSettings>;
}

export interface UpdateInvoiceSettingsInput {
  numberPrefix?: string;
  /** Replaces the seller whole; undefined: unchanged. */
  seller?: SellerInput;
}

export const DEFAULT_PREFIX = "INV";
const PREFIX = /^[A-Z0-9-]{1,12}$/;

/** Why `prefix` cannot number invoices, or undefined. */
export function numberPrefixProblem(prefix: string): string | undefined {
  return PREFIX.test(prefix) ? undefined : 'must be 1 to 12 characters of A-Z, 0-9 and "-"';
}

export class InvoiceSettingsService {
  constructor(private readonly store: InvoiceSettingsStore) {}

  get(caller: Caller): Promise<InvoiceSettings> {
    return this.store.get(caller.environmentId);
  }

  async update(caller: Caller, input: UpdateInvoiceSettingsInput): Promise<InvoiceSettings> {
    const v = new Violations();
    if (input.numberPrefix !== undefined) {
      const problem = numberPrefixProblem(input.numberPrefix);
      if (problem) v.add("number_prefix", problem);
    }
    const seller = input.seller === undefined ? undefined : checkSeller(input.seller, v.at("seller"));
    v.throwIfAny();
    return this.store.update(caller.environmentId, { numberPrefix: input.numberPrefix, seller });
  }
}
