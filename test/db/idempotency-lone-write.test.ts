/**
 * A call holding an idempotency key (DESIGN §12) whose change is one statement outside an explicit
 * transaction (creating a test clock, a timeline, a checkout session, a portal session; revoking an
 * API key): the statement marks the key changed in the same commit, as a transaction does. A
 * write whose answer was lost (committed, then heard as `unavailable`) must leave the key kept,
 * so that a retry hears IDEMPOTENCY_OUTCOME_LOST rather than making a second clock. Both stores.
 */
import test from "ava";
import { SqlIdempotencyStore } from "../../src/db/stores/idempotency-store.js";
import { SqlTestClockStore } from "../../src/db/stores/clock-store.js";
import { STORES, withMigratedDatabase } from "../helpers/db.js";

for (const store of STORES) {
  test(`${store}: a test clock created under an idempotency key marks the key: the key is kept when the call then fails`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const keys = new SqlIdempotencyStore(db.sql);
      const clocks = new SqlTestClockStore(db.sql, db.entities);
      const now = new Date();
      const claimed = await keys.claim("env_lone", "k-clock", "fp", "CreateTestClock", now);
      if (claimed.kind !== "claimed") return t.fail(`claim answered ${claimed.kind}`);
      await keys.within(claimed.claim, () => clocks.insert({ id: "clk_lone", environmentId: "env_lone", name: "lone", frozenTime: now, createdAt: now }));
      // The call fails after its write (its answer lost): the key is released unless the write marked it.
      t.false(await keys.release(claimed.claim), "the clock stands: the key is kept, not released for a second run");
      const again = await keys.claim("env_lone", "k-clock", "fp", "CreateTestClock", new Date(Date.now() + 1000));
      t.is(again.kind, "lost", "a retry is told the outcome was lost, never run again");
    });
  });

  test(`${store}: a read under an idempotency key does not mark it: a call that failed before changing anything runs again`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const keys = new SqlIdempotencyStore(db.sql);
      const clocks = new SqlTestClockStore(db.sql, db.entities);
      const now = new Date();
      const claimed = await keys.claim("env_lone", "k-read", "fp", "GetTestClock", now);
      if (claimed.kind !== "claimed") return t.fail(`claim answered ${claimed.kind}`);
      t.is(await keys.within(claimed.claim, () => clocks.get("env_lone", "clk_none")), undefined);
      t.true(await keys.release(claimed.claim), "nothing changed: the key is released");
      const again = await keys.claim("env_lone", "k-read", "fp", "GetTestClock", new Date(Date.now() + 1000));
      t.is(again.kind, "claimed");
    });
  });
}
