/**
 * A subject as billing keeps it: the customer being billed. A leaf module, so that the events of
 * a subject (events/types.ts) and its use cases (subjects.ts) can both name it.
 */
import type { Metadata } from "./metadata.js";
import type { BillingDetails } from "./taxes/types.js";

export interface Subject {
  id: string;
  environmentId: string;
  createdAt: Date;
  email: string | null;
  externalId: string | null;
  metadata: Metadata;
  name: string | null;
  testClockId: string | null;
  hasPaymentMethod: boolean;
  /** What invoices print about the buyer and how it is taxed (DESIGN §15); null (or absent): never set. */
  billingDetails?: BillingDetails | null;
}
