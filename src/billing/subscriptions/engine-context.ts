/** What every part of the billing engine shares: storage, the time, and where failures nobody sees are told. */
import type { BillingStores } from "./ports.js";
import type { BillingFailure, Subscription } from "./types.js";

/** What the engine reports of failures no caller sees: the scheduler's work. */
export interface EngineEvents {
  /** A subscription was set aside because its cycle close failed. */
  setAside?(s: Subscription, failure: BillingFailure, err: unknown): void;
  /** Charging or marking a committed invoice failed: it stays open. */
  settleFailed?(invoiceId: string, err: unknown): void;
  /** Finalizing a draft (or billing an ended subscription's late usage) failed: tried again on the next run. */
  finalizeFailed?(id: string, err: unknown): void;
  /** Resuming a paused subscription at its `resumes_at` failed unexpectedly: tried again on the next run. */
  resumeFailed?(subscriptionId: string, err: unknown): void;
}

export interface EngineContext {
  stores: BillingStores;
  now: () => Date;
  /** Told what went wrong where no caller can be (to log it). */
  events: EngineEvents;
}
