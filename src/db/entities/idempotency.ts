/** Table of idempotency keys of mutating calls (DESIGN §12): the claim, and the stored outcome. */
import { EntitySchema } from "typeorm";
import { type Dialect, type ExactText, idColumn, intColumn, jsonColumn, textColumn, timeColumn } from "../columns.js";

export interface IdempotencyKeyRow {
  environment_id: string;
  /** The caller's Idempotency-Key header, byte for byte. */
  idem_key: string;
  /** SHA-256 (hex) of the method and the request message: what a repeat must match. */
  fingerprint: string;
  /** The method, `billing.v1.SubscriptionService/CreateSubscription`: told in errors. */
  rpc: string;
  /** `running` while the first call runs; `done` once its outcome is stored. */
  state: string;
  /** Random, per claim: which call holds a `running` key (a takeover gets a new one). */
  claim_token: string;
  /** 1 once a transaction of the first call committed a change (written in that transaction). */
  changed: number;
  /** A `running` claim older than this belongs to a call that died: the key may be taken over. */
  locked_until: Date;
  /** The outcome (IdempotencyOutcome as JSON), once `done`. */
  outcome: unknown;
  created_at: Date;
  /** Kept until then (at least 24 hours), then swept. */
  expires_at: Date;
}

export function idempotencyEntities(dialect: Dialect, exact: ExactText) {
  const IdempotencyKey = new EntitySchema<IdempotencyKeyRow>({
    name: "IdempotencyKey",
    tableName: "idempotency_keys",
    columns: exact({
      environment_id: idColumn(true),
      idem_key: { type: "varchar", length: 255, primary: true, nullable: false },
      fingerprint: textColumn(64, false),
      rpc: textColumn(200, false),
      state: textColumn(12, false),
      claim_token: textColumn(32, false),
      changed: intColumn(),
      locked_until: timeColumn(),
      outcome: jsonColumn(dialect, true),
      created_at: timeColumn(),
      expires_at: timeColumn(),
    }),
    indices: [{ name: "ix_idempotency_keys_expires", columns: ["expires_at"] }],
  });
  return { IdempotencyKey };
}
