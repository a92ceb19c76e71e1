/**
 * A subject as billing keeps it: the customer being billed. A leaf module, so that the events of
 * a subject (events/types.ts) and its use cases (subjects.ts) can both name it.
 */
import type { Metadata } from "./metadata.js";

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
}
