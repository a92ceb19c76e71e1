/** Tables of test clocks. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, seqColumn, textColumn, timeColumn } from "../columns.js";

export interface TestClockRow {
  seq?: string;
  id: string;
  environment_id: string;
  name: string;
  frozen_time: Date;
  created_at: Date;
  /** Migration 31: "advancing" from an advance's move of frozen_time until everything due by it ran, then "ready". */
  status?: string;
  /** When the advance in progress (or the last one) moved the clock. */
  advance_started_at?: Date | null;
}

export function testClocksEntities(dialect: Dialect, exact: ExactText) {
  const TestClock = new EntitySchema<TestClockRow>({
    name: "TestClock",
    tableName: "test_clocks",
    columns: exact({
      seq: seqColumn(dialect),
      id: idColumn(),
      environment_id: idColumn(),
      name: textColumn(255, false),
      frozen_time: timeColumn(),
      created_at: timeColumn(),
      status: { type: "varchar", length: 16, nullable: false, default: "ready" },
      advance_started_at: timeColumn(true),
    }),
    uniques: [{ name: "uq_test_clocks_id", columns: ["id"] }],
    indices: [
      { name: "ix_test_clocks_env_seq", columns: ["environment_id", "seq"] },
      { name: "ix_test_clocks_status_started", columns: ["status", "advance_started_at"] },
    ],
  });

  return { TestClock };
}
