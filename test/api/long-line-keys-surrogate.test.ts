/**
 * Rows an earlier version wrote with a line key cut to 1,000 characters through a surrogate pair
 * (an emoji whose first half is the 1,000th character), through the public API on test clocks, on
 * MariaDB and SQLite. The drivers store the half character as U+FFFD (MariaDB one, SQLite three,
 * so SQLite reads back 1,002 characters). Late usage compares such a row under the key cut the
 * same way (line-keys.ts legacyKeyOf, readBackKey), and a draft holding one finalizes, its key
 * stored in today's form. Amounts in cents (USD); the first cycle is [Jan 15, Feb 15).
 */
import test from "ava";
import { usd } from "../helpers/catalog-bodies.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

// The key `regional|[["region","` (21 characters) + A + `"]]`: the emoji's first half is its 1,000th character.
const A = `${"a".repeat(999 - 21)}\u{1F600}${"a".repeat(10)}`;
const KEY = `regional|[["region",${JSON.stringify(A)}]]`;

/** A dimensional rate "regional" with one cell, region A at 100 a unit; the subject subscribed from Jan 15. */
async function start(server: TestServer, options: { invoiceGraceSeconds?: number } = {}): Promise<Scenario> {
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z", options);
  const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
  const card = await s.card({
    usage_based_rates: [
      {
        usage_based_rate_type: "dimensional",
        code: "regional",
        name: "Regional",
        pricing_metric_id: m,
        included_units: 0,
        dimensions: [{ key: "region", values: [A] }],
        pricing_matrix: { cells: [{ dimension_coordinates: { region: A }, price: usd(100) }] },
      },
    ],
  });
  await s.subscribe({ rate_card_id: card });
  return s;
}

/** Writes the cut key an earlier version wrote on `invoiceId`'s lines (of `kind`, or all). */
async function cutKeys(server: TestServer, invoiceId: string, kind?: string): Promise<void> {
  await withDatabase(server.db.url, async (db) => {
    const where = kind === undefined ? "" : " AND kind = ?";
    await db.dataSource.query(`UPDATE invoice_lines SET line_key = ? WHERE invoice_id = ?${where}`, [KEY.slice(0, 1000), invoiceId, ...(kind === undefined ? [] : [kind])]);
  });
}

const quantities = async (s: Scenario) => (await s.invoices()).filter((i: Json) => i.line_items.length > 0).map((i: Json) => i.line_items.map((l: Json) => [l.quantity, l.amount.value]));

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: late usage of a window whose stored key was cut through a surrogate pair adds 1 unit, 100`, async (t) => {
    const s = await start(server);
    await s.events([["2026-01-20T00:00:00Z", "10", { region: A }]]);
    await s.advance("2026-02-16T00:00:00Z");
    const [first] = (await s.invoices()).filter((i: Json) => i.line_items.length > 0);
    await cutKeys(server, first.id);
    await s.events([["2026-01-21T00:00:00Z", "1", { region: A }]]);
    await s.advance("2026-03-16T00:00:00Z");
    // Jan 15–Feb 15: 10 × 100 = 1,000; the late unit: 1 × 100 = 100 (the old comparison: −10/−1,000 and +11/+1,100).
    t.deepEqual(await quantities(s), [[["10", "1000"]], [["1", "100"]]]);
  });

  test(`${store}: a draft holding an adjustment whose key was cut through a surrogate pair finalizes`, async (t) => {
    const s = await start(server, { invoiceGraceSeconds: 86_400 });
    await s.events([["2026-01-20T00:00:00Z", "10", { region: A }]]);
    await s.advance("2026-02-17T00:00:00Z");
    await s.events([["2026-01-21T00:00:00Z", "1", { region: A }]]);
    await s.advance("2026-03-15T12:00:00Z");
    const drafts = (await s.invoices()).filter((i: Json) => i.status === "draft");
    t.is(drafts.length, 1);
    await cutKeys(server, drafts[0].id, "adjustment");
    await s.advance("2026-03-17T00:00:00Z");
    const after = (await s.invoices()).find((i: Json) => i.id === drafts[0].id);
    // The draft's late unit: 1 × 100 = 100, finalized at the end of its grace (it used to stay a draft on SQLite).
    t.deepEqual([after.status === "draft", after.total_amount.value], [false, "100"]);
  });
}
