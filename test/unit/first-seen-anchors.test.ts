/**
 * First-seen anchors as kept in JSON (src/db/raw.ts isoAnchors, anchorsOfIso): an anchor with the
 * multiplier its earlier windows were billed at round-trips; one kept as ISO text alone (before the
 * multiplier was kept) reads back without it, so its window prices the earlier windows at the
 * multiplier in force, as before.
 */
import test from "ava";
import { billedMultiplierOf } from "../../src/billing/subscriptions/first-seen.js";
import { anchorsOfIso, isoAnchors } from "../../src/db/raw.js";

const rate = { pricingMetricId: "pm_1", code: "mau" };

test("an anchor with its billed multiplier round-trips through JSON", (t) => {
  const kept = isoAnchors({ "pm_1/mau": { at: new Date("2026-01-01T00:00:00Z"), billedMultiplier: "2" } });
  t.deepEqual(kept, { "pm_1/mau": { at: "2026-01-01T00:00:00.000Z", billedMultiplier: "2" } });
  const back = anchorsOfIso(JSON.parse(JSON.stringify(kept)));
  t.deepEqual(back, { "pm_1/mau": { at: new Date("2026-01-01T00:00:00Z"), billedMultiplier: "2" } });
  t.is(billedMultiplierOf(back, rate), "2");
});

test("an anchor kept as ISO text alone reads back without a multiplier, and is written back so", (t) => {
  const back = anchorsOfIso({ "pm_1/mau": "2026-01-01T00:00:00.000Z" });
  t.deepEqual(back, { "pm_1/mau": { at: new Date("2026-01-01T00:00:00Z") } });
  t.is(billedMultiplierOf(back, rate), undefined);
  t.deepEqual(isoAnchors(back), { "pm_1/mau": "2026-01-01T00:00:00.000Z" });
});
