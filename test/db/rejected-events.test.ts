/**
 * Rejected usage events as stored for the dashboard, on both stores: written in one call, read
 * newest first per environment with paging, and an environment keeps only its newest `keep`
 * (the first write of a process prunes, then one per 1,000 rejected events written).
 */
import test from "ava";
import type { RejectedEvent } from "../../src/billing/metering/usage-store.js";
import { SqlUsageStore } from "../../src/db/stores/usage-store.js";
import { STORES, withMigratedDatabase } from "../helpers/db.js";

const rejected = (n: number, at: Date): RejectedEvent => ({
  receivedAt: at,
  idempotencyKey: `k${n}`,
  subjectId: "nobody",
  eventName: "api_call",
  timestamp: null,
  reason: "SUBJECT_NOT_FOUND",
  message: `subject_id: subject "nobody" not found (${n})`,
  field: "subject_id",
});

for (const store of STORES) {
  test(`${store}: rejected events are read newest first per environment, and only the newest are kept`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const usage = new SqlUsageStore(db.sql, db.entities);
      const at = new Date("2026-01-01T00:00:00Z");
      // The first write of this process prunes: 12 written, 5 kept.
      await usage.recordRejected(
        "env_a",
        Array.from({ length: 12 }, (_, i) => rejected(i, at)),
        5,
      );
      await usage.recordRejected("env_b", [rejected(100, at)], 5);
      const a = await usage.rejectedEvents("env_a", { limit: 3, offset: 0 });
      t.deepEqual(
        a.items.map((e) => e.idempotencyKey),
        ["k11", "k10", "k9"],
      );
      t.true(a.hasMore);
      const rest = await usage.rejectedEvents("env_a", { limit: 10, offset: 3 });
      t.deepEqual(
        rest.items.map((e) => e.idempotencyKey),
        ["k8", "k7"],
        "the older ones were pruned",
      );
      t.false(rest.hasMore);
      t.like(a.items[0], { reason: "SUBJECT_NOT_FOUND", field: "subject_id", timestamp: null, subjectId: "nobody" });
      t.is(a.items[0]?.receivedAt.toISOString(), at.toISOString());
      // Later writes below the pruning interval only add; the next interval prunes again.
      await usage.recordRejected("env_a", [rejected(12, at)], 5);
      t.is((await usage.rejectedEvents("env_a", { limit: 100, offset: 0 })).items.length, 6);
      await usage.recordRejected(
        "env_a",
        Array.from({ length: 1000 }, (_, i) => rejected(13 + i, at)),
        5,
      );
      const after = await usage.rejectedEvents("env_a", { limit: 100, offset: 0 });
      t.deepEqual(
        after.items.map((e) => e.idempotencyKey),
        ["k1012", "k1011", "k1010", "k1009", "k1008"],
      );
      t.deepEqual(
        (await usage.rejectedEvents("env_b", { limit: 10, offset: 0 })).items.map((e) => e.idempotencyKey),
        ["k100"],
        "another environment's are its own",
      );
    });
  });
}
