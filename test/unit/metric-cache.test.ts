/**
 * BillingReads' metric cache (reads.ts) answers every metric asked for, also while another call
 * empties the cache once it is full (over 10,000 entries): a cycle close asking for a metric it
 * had cached, while another close's read took the cache past its size and a third emptied it, got
 * undefined and was set aside. Pure: the cache over a store of metrics whose reads this test
 * answers one by one, in the order it chooses.
 */
import test from "ava";
import type { PricingMetric } from "../../src/billing/catalog/types.js";
import { BillingReads } from "../../src/billing/subscriptions/reads.js";

const metric = (id: string) => ({ id, environmentId: "env", name: id }) as unknown as PricingMetric;

test("a metric cached before a read is answered when another call empties the full cache during that read", async (t) => {
  const pending: (() => void)[] = [];
  const metrics = {
    getMany: (_env: string, ids: string[]) => new Promise<PricingMetric[]>((resolve) => pending.push(() => resolve(ids.map(metric)))),
  };
  const reads = new BillingReads({} as never, { cards: {} as never, catalogs: {} as never, metrics: metrics as never }, {} as never);
  const settle = async () => {
    while (pending.length > 0) (pending.shift() as () => void)();
    await new Promise((r) => setImmediate(r));
  };
  // 9,999 cached: not full yet.
  const fill = reads.metricsOf(
    "env",
    Array.from({ length: 9_999 }, (_, i) => `f${i}`),
  );
  await settle();
  await fill;
  // C reads 5 new ones and A (f1 cached, new-a not) starts its read: neither empties the cache.
  const c = reads.metricsOf("env", ["c1", "c2", "c3", "c4", "c5"]);
  const a = reads.metricsOf("env", ["f1", "new-a"]);
  // C's read comes back first: 10,004 cached; then B finds the cache full and empties it before A's read comes back.
  (pending.shift() as () => void)();
  await c;
  const b = reads.metricsOf("env", ["new-b"]);
  await settle();
  const [ra, rb] = await Promise.all([a, b]);
  t.deepEqual([ra.get("f1")?.id, ra.get("new-a")?.id, rb.get("new-b")?.id], ["f1", "new-a", "new-b"]);
});
