/** Tables of subscription timelines and their items. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, jsonColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface TimelineRow {
  seq?: string;
  id: string;
  environment_id: string;
  subject_id: string;
  rate_card_id: string;
  subscription_id: string | null;
  status: string;
  effective_at: Date | null;
  next_transition_at: Date | null;
  test_clock_id: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface TimelineItemRow {
  seq?: string;
  id: string;
  timeline_id: string;
  environment_id: string;
  period_start: Date;
  period_end: Date | null;
  rate_card_id: string;
  fixed_rate_quantities: Record<string, string>;
  rate_multipliers: Record<string, string>;
  created_at: Date;
}

export function timelinesEntities(dialect: Dialect, exact: ExactText) {
  const Timeline = new EntitySchema<TimelineRow>({
    name: "Timeline",
    tableName: "subscription_timelines",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      subject_id: idColumn(),
      rate_card_id: idColumn(),
      subscription_id: textColumn(32),
      status: textColumn(12, false),
      effective_at: timeColumn(true),
      next_transition_at: timeColumn(true),
      test_clock_id: textColumn(32),
      created_at: timeColumn(),
      updated_at: timeColumn(),
    }),
    uniques: [{ name: "uq_subscription_timelines_id", columns: ["id"] }],
    indices: [
      { name: "ix_subscription_timelines_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_subscription_timelines_due", columns: ["status", "test_clock_id", "next_transition_at"] },
    ],
  });

  const TimelineItem = new EntitySchema<TimelineItemRow>({
    name: "TimelineItem",
    tableName: "timeline_items",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      timeline_id: idColumn(),
      environment_id: idColumn(),
      period_start: timeColumn(),
      period_end: timeColumn(true),
      rate_card_id: idColumn(),
      fixed_rate_quantities: jsonColumn(dialect),
      rate_multipliers: jsonColumn(dialect),
      created_at: timeColumn(),
    }),
    uniques: [{ name: "uq_timeline_items_id", columns: ["id"] }],
    indices: [{ name: "ix_timeline_items_timeline_start", columns: ["timeline_id", "period_start"] }],
  });

  return { Timeline, TimelineItem };
}
