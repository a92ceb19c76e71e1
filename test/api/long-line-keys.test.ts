/**
 * Late usage of dimensional cells whose line key (`<code>|<coordinates JSON>`, line-keys.ts) is
 * longer than the 1,000 characters invoice_lines.line_key holds, through the public API on test
 * clocks, on MariaDB and SQLite. A dimension value may be 995 characters (a rate card's, or an
 * event's for a combination without a cell), so `regional|[["region","aaa…"]]` is 1,016.
 * Stored cut to 1,000, the key never matched the recomputed one: each late-usage run took back the
 * whole cell billed so far and billed it again (−10 units −1,000 and +11 units +1,100 instead of
 * +1 unit +100). Stored as `regional|#<hash>` it matches, and a row stored cut before (an invoice
 * written by an earlier version) is still compared under its cut key.
 *
 * The card: one dimensional rate "Regional" on region, cells A (flat 100 cents a unit) and T
 * (graduated: units 1–5 at 100, 6+ at 50); region U has no cell (billed at 0, named). The clock
 * starts on 2026-01-15: the first cycle is [Jan 15, Feb 15). Amounts in cents (USD).
 */
import test from "ava";
import { usd } from "../helpers/catalog-bodies.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { graduated, tier } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const A = "a".repeat(995);
const T = "t".repeat(995);
const U = "u".repeat(995);

/**
 * A line as [region letter, unit price, quantity, amount], so descriptions of 1,000 characters stay
 * readable (a description is cut to 1,000 characters: T's tier lines are told apart by their unit price).
 */
type Short = [string, string, string, string];

const regionOf = (description: string) => [A, T, U].find((v) => description.includes(v.slice(0, 50)))?.[0] ?? description;

function short(l: Json): Short {
  return [regionOf(l.description), l.price_in_unit_amount.value, l.quantity, l.amount.value];
}

/** The subject's invoices with lines, oldest first, as their short lines (sorted: an adjustment invoice's order is its keys'). */
async function bills(s: Scenario): Promise<Short[][]> {
  return (await s.invoices()).filter((i: Json) => i.line_items.length > 0).map((i: Json) => i.line_items.map(short).sort());
}

/** The card above, subscribed (with `coupon`'s discount when given); events of January (10 units in each of A, T, U) billed at the Feb 15 close. */
async function billedJanuary(server: TestServer, coupon?: Json): Promise<Scenario> {
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
  const card = await s.card({
    usage_based_rates: [
      {
        usage_based_rate_type: "dimensional",
        code: "regional",
        name: "Regional",
        pricing_metric_id: m,
        included_units: 0,
        dimensions: [{ key: "region", values: [A, T] }],
        pricing_matrix: {
          cells: [
            { dimension_coordinates: { region: A }, price: usd(100) },
            { dimension_coordinates: { region: T }, price: graduated(tier(5, 100), tier(null, 50)) },
          ],
        },
      },
    ],
  });
  const discount = coupon ? { coupon_id: (await s.call("POST", "/coupons", coupon)).id } : {};
  await s.subscribe({ rate_card_id: card, ...discount });
  await s.events([
    ["2026-01-20T00:00:00Z", "10", { region: A }],
    ["2026-01-20T00:00:00Z", "10", { region: T }],
    ["2026-01-20T00:00:00Z", "10", { region: U }],
  ]);
  await s.advance("2026-02-16T00:00:00Z");
  return s;
}

/** One unit more in each of A, T, U in January, reported late, then the next close; twice. */
async function lateTwice(s: Scenario): Promise<void> {
  await s.events([
    ["2026-01-21T00:00:00Z", "1", { region: A }],
    ["2026-01-21T00:00:00Z", "1", { region: T }],
    ["2026-01-21T00:00:00Z", "1", { region: U }],
  ]);
  await s.advance("2026-03-16T00:00:00Z");
  await s.events([
    ["2026-01-22T00:00:00Z", "1", { region: A }],
    ["2026-01-22T00:00:00Z", "1", { region: T }],
    ["2026-01-22T00:00:00Z", "1", { region: U }],
  ]);
  await s.advance("2026-04-16T00:00:00Z");
}

/** January's close: A 10 × 100 = 1,000; T 5 × 100 = 500 (tier 1) and 5 × 50 = 250 (tier 2); U 10 at 0. */
const JANUARY: Short[] = [
  ["a", "100", "10", "1000"],
  ["t", "100", "5", "500"],
  ["t", "50", "5", "250"],
  ["u", "0", "10", "0"],
].sort() as Short[];

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: late usage of cells whose line keys exceed 1,000 characters adds what is new, once`, async (t) => {
    // A coupon limited to the rate's code still finds its lines (their keys still begin "regional|").
    const s = await billedJanuary(server, { name: "Regional 10%", percent_off: "10", duration: "forever", applies_to_rate_codes: ["regional"] });
    await lateTwice(s);
    // Each run: A +1 × 100 = +100; T +1 in tier 2 × 50 = +50; U +1 at 0. Not −10/−1,000 and +11/+1,100 (A),
    // −5/−500 −5/−250 and +5/+500 +6/+300 (T), −10 and +11 (U).
    const late: Short[] = [
      ["a", "100", "1", "100"],
      ["t", "50", "1", "50"],
      ["u", "0", "1", "0"],
    ];
    t.deepEqual(await bills(s), [JANUARY, late, late]);
    // [total, discount]: 1,750 − 10% (175) = 1,575; each run 150 − 10% (15) = 135.
    const totals = (await s.invoices()).filter((i: Json) => i.line_items.length > 0).map((i: Json) => [i.total_amount.value, i.total_discount.value]);
    t.deepEqual(totals, [
      ["1575", "175"],
      ["135", "15"],
      ["135", "15"],
    ]);
  });

  test(`${store}: late usage of an invoice that stored such keys cut to 1,000 characters still matches them`, async (t) => {
    const s = await billedJanuary(server);
    // Stored now as `regional|#<SHA-256>`; what an earlier version stored instead: each usage line's key cut to its first 1,000 characters (T's tier lines share theirs).
    const full: Record<string, string> = {
      a: `regional|[["region","${A}"]]`,
      t100: `regional|[["region","${T}"]]|tier:1`,
      t50: `regional|[["region","${T}"]]|tier:2`,
      u: `regional|unpriced:[["region","${U}"]]`,
    };
    const [feb] = (await s.invoices()).filter((i: Json) => i.line_items.length > 0);
    await withDatabase(server.db.url, async (db) => {
      const rows: { position: number; description: string; line_key: string; unit_amount: string }[] = await db.dataSource.query(
        "SELECT position, description, line_key, unit_amount FROM invoice_lines WHERE invoice_id = ?",
        [feb.id],
      );
      t.is(rows.length, 4);
      for (const r of rows) {
        const region = regionOf(r.description);
        const line = region === "t" ? `t${Number(r.unit_amount)}` : region;
        const key = full[line] as string;
        t.true(key.length > 1000 && /^regional\|#[0-9a-f]{64}$/.test(r.line_key), `${line}: stored ${r.line_key.length} characters for a key of ${key.length}`);
        await db.dataSource.query("UPDATE invoice_lines SET line_key = ? WHERE invoice_id = ? AND position = ?", [key.slice(0, 1000), feb.id, r.position]);
      }
    });
    await lateTwice(s);
    // Each run: A +1 × 100 = +100; U +1 at 0; T's tier lines were stored under one key: they are compared together,
    // 5/500 + 5/250 = 10/750 billed, 5/500 + 6/300 = 11/800 now, +1 unit +50 (unit price and description its first line's, tier 1).
    const late: Short[] = [
      ["a", "100", "1", "100"],
      ["t", "100", "1", "50"],
      ["u", "0", "1", "0"],
    ];
    t.deepEqual(await bills(s), [JANUARY, late, late]);
  });
}
