/**
 * What a mid-cycle change of terms (`PATCH /subscriptions/{id}`, updates.ts) may ask, and of
 * which subscription: its proration behavior, its metadata once merged, and a subscription that
 * can be updated (active, not following a timeline).
 */
import { FailedPreconditionError, type Violations } from "../errors.js";
import { METADATA_MAX_KEYS, type Metadata } from "../metadata.js";
import type { Invoice, Subscription } from "./types.js";

export const PRORATION_BEHAVIORS = ["create_prorations", "none"] as const;

/** Checks a proration_behavior ("" is the default, create_prorations). */
export function checkProrationBehavior(behavior: string, v: Violations): "create_prorations" | "none" {
  if (behavior === "" || behavior === "create_prorations") return "create_prorations";
  if (behavior === "none") return "none";
  v.add("proration_behavior", `must be ${PRORATION_BEHAVIORS.join(" or ")}`);
  return "create_prorations";
}

export interface UpdateInput {
  fixedRateQuantities: Record<string, string>;
  rateMultipliers: Record<string, string>;
  metadata: Metadata;
  prorationBehavior: string;
  /** A new minimum commitment per period, from the next period on ("0": removed); absent: unchanged. */
  minimumCommitment?: { currencyCode: string; value: string };
}

export interface UpdateResult {
  subscription: Subscription;
  /** The invoice that charged an increase now, if any. */
  prorationInvoice: Invoice | undefined;
  /** The invoice of the usage before a change of usage terms, at the old terms, when they charge more (usage-term-changes.ts). */
  usageInvoice?: Invoice | undefined;
}

/** `metadata` with the request's keys set, and those given "" removed. */
export function mergedMetadata(metadata: Metadata, changes: Metadata): Metadata {
  const out: Metadata = { ...metadata };
  for (const [k, value] of Object.entries(changes)) {
    if (value === "") delete out[k];
    else out[k] = value;
  }
  return out;
}

export function checkMergedMetadata(merged: Metadata, v: Violations): void {
  if (Object.keys(merged).length > METADATA_MAX_KEYS) v.add("metadata", `would have ${Object.keys(merged).length} keys; at most ${METADATA_MAX_KEYS} are allowed`);
}

/** `s` if it can be updated: active and not following a timeline. */
export function checkUpdatable(s: Subscription): Subscription {
  if (s.status !== "active") throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", `subscription ${s.id} is ${s.status}; only an active subscription can be updated`);
  if (s.timelineId) {
    throw new FailedPreconditionError(
      "SUBSCRIPTION_FOLLOWS_TIMELINE",
      `subscription ${s.id} follows subscription timeline ${s.timelineId}, which decides its rate cards and terms; it cannot be updated`,
      { subscription_timeline_id: s.timelineId },
    );
  }
  return s;
}
