/**
 * Billing state of a dimensional usage rate (DESIGN §8) through the public API, on MariaDB and
 * SQLite: `used_units` is the sum of the rate's cells' usage, each measured per cell as the
 * invoice measures it (unique_count distinct per cell, max per cell, combinations without a
 * cell not counted), so `has_overage_for_usage` and `usage.threshold_crossed` agree with what
 * the invoice charges beyond the included units.
 */
import test from "ava";
import { usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** A card with one dimensional rate by region on `metric`: `included` units, a cell per [region, price]. */
function byRegion(metric: string, included: number, cells: [string, number][]): Json {
  return {
    usage_based_rates: [
      {
        usage_based_rate_type: "dimensional",
        code: "regional",
        name: "Regional",
        pricing_metric_id: metric,
        included_units: included,
        dimensions: [{ key: "region", values: cells.map(([region]) => region) }],
        pricing_matrix: { cells: cells.map(([region, price]) => ({ dimension_coordinates: { region }, price: usd(price) })) },
      },
    ],
  };
}

/** Billing state's [used_units, included_units] per rate, and has_overage_for_usage. */
async function state(s: Scenario): Promise<[[string, number][], boolean]> {
  const b = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
  return [b.usage_data.map((u: Json) => [u.used_units, u.included_units]), b.has_overage_for_usage];
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: unique_count by region: used_units counts a user once per cell, as the invoice does`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, ["region"], "active");
    await s.subscribe({
      rate_card_id: await s.card(
        byRegion(m, 3, [
          ["eu", 1000],
          ["us", 2000],
        ]),
      ),
    });
    await s.events(
      [
        ["2026-01-16T00:00:00Z", "1", { user: "ann", region: "eu" }],
        ["2026-01-17T00:00:00Z", "1", { user: "ann", region: "us" }],
        ["2026-01-18T00:00:00Z", "1", { user: "bob", region: "us" }],
        ["2026-01-19T00:00:00Z", "1", { user: "cat", region: "eu" }],
      ],
      "active",
    );
    await s.advance("2026-02-10T00:00:00Z");
    // eu {ann, cat} = 2 + us {ann, bob} = 2 = 4 > 3 included (over all events: 3 users, no overage).
    t.deepEqual(await state(s), [[["4", 3]], true]);
    await s.advance("2026-02-15T00:00:00Z");
    // 3 included go to us first (2,000 a unit): us 2 covered, eu 1 of 2 covered; eu 1 × 1,000 = 1,000 = (4 − 3) × 1,000.
    t.deepEqual(await s.bills(), [["open", "1000", [["Regional (region=eu)", "1", "1000", "1000"]]]]);
  });

  test(`${store}: sum by region: a combination without a cell is not in used_units (billed nothing, takes no included units)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
    await s.subscribe({
      rate_card_id: await s.card(
        byRegion(m, 10, [
          ["eu", 100],
          ["us", 200],
        ]),
      ),
    });
    await s.events([
      ["2026-01-16T00:00:00Z", "6", { region: "eu" }],
      ["2026-01-17T00:00:00Z", "3", { region: "us" }],
      ["2026-01-18T00:00:00Z", "50", { region: "ap" }],
    ]);
    await s.advance("2026-02-10T00:00:00Z");
    // eu 6 + us 3 = 9 ≤ 10 included; ap's 50 has no cell (over all events: 59, an overage).
    t.deepEqual(await state(s), [[["9", 10]], false]);
    await s.advance("2026-02-15T00:00:00Z");
    // 10 included cover us 3 and eu 6; ap's 50 is a zero line: nothing is charged (a zero invoice is paid at once).
    t.deepEqual(await s.bills(), [["paid", "0", [["Regional (region=ap: no price for this combination)", "50", "0", "0"]]]]);
  });

  test(`${store}: max by region: used_units is the sum of each cell's max, as the invoice does; thresholds follow it`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric({ aggregation_type: "max", value_field: "n" }, ["region"]);
    const sub = (
      await s.subscribe({
        rate_card_id: await s.card(
          byRegion(m, 10, [
            ["eu", 100],
            ["us", 200],
          ]),
        ),
      })
    ).subscription;
    await s.events([
      ["2026-01-16T00:00:00Z", "4", { region: "eu" }],
      ["2026-01-17T00:00:00Z", "7", { region: "eu" }],
      ["2026-01-18T00:00:00Z", "6", { region: "us" }],
      ["2026-01-19T00:00:00Z", "2", { region: "us" }],
    ]);
    await s.advance("2026-02-10T00:00:00Z");
    // eu max 7 + us max 6 = 13 > 10 included (the max over all events, 7, would be below even 80%).
    t.deepEqual(await state(s), [[["13", 10]], true]);
    await s.advance("2026-02-11T00:00:00Z");
    const crossed = (await s.call("GET", "/events?types=usage.threshold_crossed&limit=100")).events.map((e: Json) => [e.data.subscription_id, e.data.threshold_percent, e.data.used_units]);
    t.deepEqual(
      crossed.sort((a: Json[], b: Json[]) => a[1] - b[1]),
      [
        [sub.id, 80, "13"],
        [sub.id, 100, "13"],
      ],
    );
    await s.advance("2026-02-15T00:00:00Z");
    // 10 included go to us first (200 a unit): us 6 covered, eu 4 of 7 covered; eu 3 × 100 = 300 = (13 − 10) × 100.
    t.deepEqual(await s.bills(), [["open", "300", [["Regional (region=eu)", "3", "100", "300"]]]]);
  });
}
