/**
 * Coupon redemption and discount use under concurrency (DESIGN §15), on MariaDB: eight concurrent
 * applications of a coupon with max_redemptions 3 make exactly three discounts (the conditional
 * UPDATE decides; the others are refused COUPON_MAX_REDEMPTIONS), and two concurrent
 * finalizations of invoices of one subscription never both use its "once" discount (the rows
 * discountsFor reads are locked until commit).
 */
import { redeemIn } from "../../src/billing/coupons/redeem.js";
import type { Coupon } from "../../src/billing/coupons/types.js";
import { FailedPreconditionError } from "../../src/billing/errors.js";
import type { Invoice } from "../../src/billing/subscriptions/types.js";
import type { Database } from "../../src/db/datasource.js";
import { SqlCouponStore, discountsFor, recordDiscounted } from "../../src/db/stores/coupon-store.js";
import { type Store, createTestDatabase, withDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

const encode = () => "{}";
const T0 = new Date("2026-01-15T00:00:00Z");
const ENV = "env_race";

function coupon(id: string, extra: Partial<Coupon> = {}): Coupon {
  return {
    id,
    environmentId: ENV,
    name: "Race",
    percentOff: "10",
    amountOff: null,
    duration: "once",
    durationInMonths: null,
    maxRedemptions: null,
    redeemBy: null,
    appliesToRateCodes: [],
    timesRedeemed: 0,
    archived: false,
    metadata: {},
    createdAt: T0,
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
      12,
    );
  } finally {
    await tdb.drop();
  }
}

mysqlOnly("mysql: 8 concurrent applications of a coupon with max_redemptions 3 make exactly 3 discounts", async (t) => {
  await withMigrated("mysql", async (db) => {
    const store = new SqlCouponStore(db.sql, db.entities, encode);
    await store.transaction((tx) => tx.insertCoupon(coupon("cpn_race", { maxRedemptions: 3 })));
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => store.transaction((tx) => redeemIn(tx, tx, "cpn_race", { environmentId: ENV, subjectId: `subj_${i}`, subscriptionId: `sub_${i}`, currency: "USD" }, T0))),
    );
    const won = outcomes.filter((o) => o.status === "fulfilled");
    const lost = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason] : []));
    t.is(won.length, 3);
    t.deepEqual(
      lost.map((e) => (e instanceof FailedPreconditionError ? e.reason : String(e))),
      Array(5).fill("COUPON_MAX_REDEMPTIONS"),
    );
    t.is((await store.get(ENV, "cpn_race"))?.timesRedeemed, 3);
    const [{ n }] = (await db.dataSource.query("SELECT COUNT(*) AS n FROM discounts WHERE coupon_id = 'cpn_race'")) as { n: string }[];
    t.is(Number(n), 3);
  });
});

mysqlOnly("mysql: two concurrent finalizations of one subscription's invoices use its once discount once", async (t) => {
  await withMigrated("mysql", async (db) => {
    const store = new SqlCouponStore(db.sql, db.entities, encode);
    await store.transaction((tx) => tx.insertCoupon(coupon("cpn_once")));
    const target = { environmentId: ENV, subjectId: "subj_1", subscriptionId: "sub_1", currency: "USD" };
    const { discount } = await store.transaction((tx) => redeemIn(tx, tx, "cpn_once", target, T0));
    const invoice = (id: string) => ({ id, environmentId: ENV, subjectId: "subj_1", subscriptionId: "sub_1", status: "open", currency: "USD" }) as Invoice;
    const finalize = (id: string) =>
      db.sql.transaction(async (em) => {
        const found = await discountsFor(em, invoice(id), T0);
        // Hold the lock a while, as a finalization computing its invoice would.
        await new Promise((r) => setTimeout(r, 200));
        await recordDiscounted(
          em,
          found.map((d) => d.discountId),
          id,
          T0,
          ENV,
        );
        return found.length;
      });
    const used = await Promise.all([finalize("inv_a"), finalize("inv_b")]);
    t.deepEqual(
      used.sort((a, b) => a - b),
      [0, 1],
    );
    const after = await store.getDiscount(ENV, discount.id);
    t.like(after, { status: "ended", invoicesDiscounted: 1 });
  });
});
