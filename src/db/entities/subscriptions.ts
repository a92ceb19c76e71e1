/** Tables of subscriptions. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, intColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

/** A tax as paid, per rate (see BookedTax in src/billing/invoicing/booking.ts). */
export interface PaidTaxRow {
  taxRateId: string;
  displayName: string;
  percentage: string;
  inclusive: boolean;
  taxableAmount: string;
  amount: string;
}

/** See UsageCheck in src/billing/subscriptions/types.ts. */
export interface UsageCheckRow {
  windows: string[];
  from: string | null;
  to: string | null;
  counts: Record<string, string>;
}

export interface SubscriptionRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  rate_card_id: string;
  status: string;
  cancels_at_end_of_cycle: boolean;
  anchor: Date;
  cycle_index: number;
  period_start: Date;
  period_end: Date;
  usage_since: Date;
  fixed_rate_quantities: Record<string, string>;
  rate_multipliers: Record<string, string>;
  metadata: Record<string, string>;
  test_clock_id: string | null;
  timeline_id: string | null;
  cancelled_at: Date | null;
  cancel_reason: string | null;
  billing_error: string | null;
  billing_attempts: number;
  billing_failed_at: Date | null;
  billing_retry_at: Date | null;
  usage_check?: UsageCheckRow | null;
  usage_checked_at?: Date | null;
  paused_at?: Date | null;
  resumes_at?: Date | null;
  cycle_epoch?: number;
  /** Per credit, its taxes per rate as paid (see ProrationCredit.taxAmounts). */
  proration_credits?: { description: string; amount: string; whole?: string; tax?: string; taxAmounts?: PaidTaxRow[] }[] | null;
  commitment?: { currency: string; current: string | null; next?: string | null } | null;
  charged_terms?: { fixedRateQuantities: Record<string, string>; rateMultipliers: Record<string, string>; rateCardId?: string } | null;
  first_seen?: Record<string, string | { at: string; billedMultiplier: string }> | null;
  usage_adjustments?: { code: string; since: string; changedAt: string; old: string; new: string; description: string; settled?: string }[] | null;
  created_at: Date;
  updated_at: Date;
}

export function subscriptionsEntities(dialect: Dialect, exact: ExactText) {
  const Subscription = new EntitySchema<SubscriptionRow>({
    name: "Subscription",
    tableName: "subscriptions",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      rate_card_id: idColumn(),
      status: textColumn(12, false),
      cancels_at_end_of_cycle: { type: "boolean", nullable: false },
      anchor: timeColumn(),
      cycle_index: intColumn(),
      period_start: timeColumn(),
      period_end: timeColumn(),
      usage_since: timeColumn(),
      fixed_rate_quantities: jsonColumn(dialect),
      rate_multipliers: jsonColumn(dialect),
      metadata: jsonColumn(dialect),
      test_clock_id: textColumn(32),
      timeline_id: textColumn(32),
      cancelled_at: timeColumn(true),
      cancel_reason: textColumn(500),
      // A cycle close that failed: set aside until billing_retry_at (real time), error kept.
      billing_error: textColumn(500),
      billing_attempts: { type: "int", nullable: false, default: 0 },
      billing_failed_at: timeColumn(true),
      billing_retry_at: timeColumn(true),
      // The event counts its finalized usage windows were last reconciled with (late usage).
      usage_check: jsonColumn(dialect, true),
      usage_checked_at: timeColumn(true),
      // Paused: since when, and when it resumes by itself (NULL: only by a call).
      paused_at: timeColumn(true),
      resumes_at: timeColumn(true),
      // Bumped by each resume: cycles restart from the resume instant under a new period key.
      cycle_epoch: { type: "int", nullable: false, default: 0 },
      // Proration credits carried to the next invoices (JSON list; NULL: none).
      proration_credits: jsonColumn(dialect, true),
      // Minimum commitment per period: in effect, and pending for the next period (JSON; NULL: none).
      commitment: jsonColumn(dialect, true),
      // The terms the current period's fixed charges were billed at, where they differ from the row's (JSON; NULL: the row's).
      charged_terms: jsonColumn(dialect, true),
      // The first-seen anchors of the usage window from usage_since: per rate (pricing metric ID "/" rate code), ISO 8601, with the multiplier its earlier windows were billed at (JSON; NULL: none).
      first_seen: jsonColumn(dialect, true),
      // The usage window's changes of usage terms to settle on its invoice: per change, rate, instant, old and new multiplier, the window's start (JSON; NULL: none).
      usage_adjustments: jsonColumn(dialect, true),
      created_at: timeColumn(),
      updated_at: timeColumn(),
    }),
    uniques: [{ name: "uq_subscriptions_id", columns: ["id"] }],
    indices: [
      { name: "ix_subscriptions_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_subscriptions_env_status_seq", columns: ["environment_id", "status", "seq"] },
      { name: "ix_subscriptions_env_retry", columns: ["environment_id", "billing_retry_at"] },
      { name: "ix_subscriptions_subject", columns: ["subject_id", "status"] },
      { name: "ix_subscriptions_due", columns: ["status", "test_clock_id", "period_end"] },
      { name: "ix_subscriptions_status_checked", columns: ["status", "usage_checked_at"] },
      { name: "ix_subscriptions_resumes", columns: ["status", "test_clock_id", "resumes_at"] },
    ],
  });

  return { Subscription };
}
