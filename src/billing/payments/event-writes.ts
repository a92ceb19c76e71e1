/** Provider events as stored (DESIGN §16): the port of their writes in a billing transaction. */
import type { ProviderKind } from "./types.js";

/** One event of a provider, by its id there (Stripe `evt_…`). */
export interface ProviderEventRef {
  provider: ProviderKind;
  eventId: string;
  eventType: string;
}

/** The provider-event writes of a billing transaction (src/db/stores/provider-store.ts). */
export interface ProviderEventWrites {
  /** Records the event; false when it was recorded already (a repeat: do nothing). */
  recordProviderEvent(environmentId: string, event: ProviderEventRef, at: Date): Promise<boolean>;
  /** Whether the event was recorded already (a repeat), read without writing. */
  providerEventRecorded(environmentId: string, event: ProviderEventRef): Promise<boolean>;
}
