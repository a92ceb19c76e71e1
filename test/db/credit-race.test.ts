/**
 * Credit storage under concurrency and at its limits (DESIGN §14): on MariaDB, twelve
 * finalization-like transactions (each allocates from the grants it reads, spends through the
 * billing transaction's credit writes, and rolls back and tries again when a spend finds less
 * than it needs) never spend more than the grants hold, and the ledger adds up; on both stores the
 * CHECK constraint refuses a direct UPDATE that would take remaining below 0 or above amount, a
 * grant is applied to one invoice at most once, and expiry takes the rest off the balance once.
 */
import test from "ava";
import { allocateCredits } from "../../src/billing/credits/apply.js";
import { Credits } from "../../src/billing/credits/grants.js";
import type { CreditGrant } from "../../src/billing/credits/types.js";
import { AlreadyExistsError } from "../../src/billing/errors.js";
import type { Database } from "../../src/db/datasource.js";
import { sqlBillingStores } from "../../src/db/stores/billing-stores.js";
import { SqlCreditStore } from "../../src/db/stores/credit-store.js";
import { STORES, type Store, createTestDatabase, withDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

const encode = () => "{}";
const T0 = new Date("2026-01-15T00:00:00Z");

function grant(id: string, amount: string, extra: Partial<CreditGrant> = {}): CreditGrant {
  return {
    id,
    environmentId: "env_race",
    subjectId: "subj_race",
    currency: "USD",
    amount,
    remaining: amount,
    category: "promotional",
    priority: 50,
    effectiveAt: T0,
    expiresAt: null,
    appliesToRateCodes: [],
    metadata: {},
    status: "active",
    invoiceId: null,
    createdAt: T0,
    voidedAt: null,
    expiredAt: null,
    ...extra,
  };
}

async function withMigrated<T>(store: Store, fn: (db: Database) => Promise<T>): Promise<T> {
  const tdb = await createTestDatabase(store);
  try {
    return await withDatabase(
      tdb.url,
      async (db) => {
        await db.dataSource.runMigrations({ transaction: "each" });
        return fn(db);
      },
      14,
    );
  } finally {
    await tdb.drop();
  }
}

async function addGrants(db: Database, grants: CreditGrant[]): Promise<SqlCreditStore> {
  const store = new SqlCreditStore(db.sql, db.entities, encode);
  await store.transaction(async (tx) => {
    for (const g of grants) await tx.insertGrant(g, { type: "grant", invoiceId: null, description: "test" });
  });
  return store;
}

class Lost extends Error {}

mysqlOnly("mysql: 12 concurrent finalizations never spend more than the grants hold; the ledger adds up", async (t) => {
  await withMigrated("mysql", async (db) => {
    const credits = await addGrants(db, [grant("cg_first", "1000", { priority: 10 }), grant("cg_second", "500")]);
    const billing = sqlBillingStores(db.sql, db.entities, encode);
    let retries = 0;
    const finalize = async (n: number): Promise<bigint> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await billing.transaction(async (tx) => {
            const c = tx.credits;
            if (!c) throw new Error("no credit writes in the billing transaction");
            const spendable = await c.spendable("env_race", "subj_race", "USD", T0);
            const apps = allocateCredits([{ rateCode: "api", amount: "170" }], "170", spendable);
            for (const a of apps) if (!(await c.spend(a.grantId, a.amount, `inv_race_${n}`, "race", T0, "env_race"))) throw new Lost();
            return apps.reduce((s, a) => s + BigInt(a.amount), 0n);
          });
        } catch (err) {
          if (attempt > 50 || !(err instanceof Lost || (err as { code?: string }).code === "aborted" || String(err).includes("conflict"))) throw err;
          retries++;
        }
      }
    };
    const applied = await Promise.all(Array.from({ length: 12 }, (_, i) => finalize(i)));
    const total = applied.reduce((a, b) => a + b, 0n);
    // 12 × 170 = 2040 wanted; 1500 held: every unit spent once, never more.
    t.is(total, 1500n);
    const [first, second] = [await credits.get("env_race", "cg_first"), await credits.get("env_race", "cg_second")];
    t.like(first, { remaining: "0", status: "depleted" });
    t.like(second, { remaining: "0", status: "depleted" });
    const entries = (await credits.ledger("env_race", "subj_race", undefined, { limit: 100, offset: 0 })).items;
    t.is(
      entries.filter((e) => e.type === "application").reduce((a, e) => a + BigInt(e.amount), 0n),
      -1500n,
    );
    t.deepEqual(await credits.balances("env_race", "subj_race"), [{ currency: "USD", balance: "0" }]);
    t.log(`spends lost and retried: ${retries}`);
  });
});

for (const store of STORES) {
  test(`${store}: the database refuses remaining below 0 or above amount; a spend is conditional and once per invoice`, async (t) => {
    await withMigrated(store, async (db) => {
      const credits = await addGrants(db, [grant("cg_check", "100")]);
      await t.throwsAsync(db.dataSource.query("UPDATE credit_grants SET remaining = ? WHERE id = 'cg_check'", [store === "mysql" ? -1 : "-1"]));
      await t.throwsAsync(db.dataSource.query("UPDATE credit_grants SET remaining = ? WHERE id = 'cg_check'", ["101"]));
      t.like(await credits.get("env_race", "cg_check"), { remaining: "100" });
      t.false(await credits.transaction((tx) => tx.spend("cg_check", "101", "inv_a", "too much", T0, "env_race")));
      t.true(await credits.transaction((tx) => tx.spend("cg_check", "60", "inv_a", "ok", T0, "env_race")));
      await t.throwsAsync(
        credits.transaction((tx) => tx.spend("cg_check", "10", "inv_a", "again", T0, "env_race")),
        { instanceOf: AlreadyExistsError },
      );
      t.like(await credits.get("env_race", "cg_check"), { remaining: "40", status: "active" }, "the refused second application rolled back");
      t.true(await credits.transaction((tx) => tx.spend("cg_check", "40", "inv_b", "rest", T0, "env_race")));
      t.like(await credits.get("env_race", "cg_check"), { remaining: "0", status: "depleted" });
      t.false(await credits.transaction((tx) => tx.spend("cg_check", "1", "inv_c", "empty", T0, "env_race")));
    });
  });

  test(`${store}: expiry takes the rest off once, dated at expires_at; spent credit stays spent`, async (t) => {
    await withMigrated(store, async (db) => {
      const expires = new Date("2026-02-01T00:00:00Z");
      const credits = await addGrants(db, [grant("cg_exp", "300", { expiresAt: expires }), grant("cg_keep", "50")]);
      t.true(await credits.transaction((tx) => tx.spend("cg_exp", "120", "inv_x", "usage", T0, "env_race")));
      const uses = new Credits(credits, undefined as never, undefined as never);
      t.is(await uses.expireDue(new Date("2026-01-31T23:59:59Z"), null), 0, "not yet");
      t.is(await uses.expireDue(new Date("2026-02-02T00:00:00Z"), null), 1);
      t.is(await uses.expireDue(new Date("2026-02-03T00:00:00Z"), null), 0, "once");
      t.like(await credits.get("env_race", "cg_exp"), { status: "expired", remaining: "0", expiredAt: expires });
      const entries = (await credits.ledger("env_race", "subj_race", "USD", { limit: 10, offset: 0 })).items.map((e) => [e.grantId, e.type, e.amount]);
      t.deepEqual(entries, [
        ["cg_exp", "grant", "300"],
        ["cg_keep", "grant", "50"],
        ["cg_exp", "application", "-120"],
        ["cg_exp", "expiry", "-180"],
      ]);
      t.deepEqual(await credits.balances("env_race", "subj_race"), [{ currency: "USD", balance: "50" }]);
      t.deepEqual(
        (await credits.spendable("env_race", "subj_race", "USD", new Date("2026-02-02T00:00:00Z"))).map((g) => g.id),
        ["cg_keep"],
      );
    });
  });
}
