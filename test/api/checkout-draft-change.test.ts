/**
 * A change checkout whose invoice is a draft for the environment's grace period (the old card has
 * usage-based rates) bills at completion what its page shows: the draft booked as it would
 * finalize now (the old card's usage so far, the new card's remaining time, its tax), labelled as
 * charged when the period's usage is final rather than "Due today" 0.00; the saved card is charged
 * that once the grace period ends. Through the real server, on MariaDB and SQLite, on test clocks.
 */
import test from "ava";
import { taxRate } from "../helpers/booking-bodies.js";
import { CALLBACKS } from "../helpers/credit-bodies.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { fixedRate, flat, usageRate } from "../helpers/price-bodies.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN_1 = "2026-01-01T00:00:00Z";

/** The amount sentence of the checkout page ([its label, its amount]) and its summary rows as [label, amount]. */
async function shown(url: string): Promise<{ due: [string, string]; rows: [string, string][] }> {
  const page = await (await fetch(url)).text();
  const m = /<p>([^<]*): <strong>([^<]*)<\/strong><\/p>/.exec(page);
  const rows = [...page.matchAll(/<tr class="[a-z-]+"><td>(.*?)<\/td><td class="n">(.*?)<\/td><\/tr>/g)].map((r) => [r[1], (r[2] as string).replace(/<[^>]*>/g, "")] as [string, string]);
  return { due: [(m?.[1] ?? "").replaceAll("&#39;", "'"), m?.[2] ?? ""], rows };
}

/** The subject's invoices with something on them, as [status, amount_due]. */
async function charged(s: Scenario): Promise<[string, string][]> {
  const r = await s.call("GET", `/invoices?subject_id=${s.subjectId}&limit=100`);
  return (r.invoices as Json[]).filter((i) => i.total_amount.value !== "0").map((i) => [i.status, i.amount_due.value]);
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a change checkout from a card with usage rates shows the draft's booked total, which is charged when the grace period ends`, async (t) => {
    const s = await Scenario.start(server, JAN_1, { invoiceGraceSeconds: 3600 });
    const metric = await s.metric();
    const metered = await s.card({ name: "Metered", fixed_rates: [fixedRate(flat(0), "base", "Base")], usage_based_rates: [usageRate(metric, flat(100))] });
    const pro = await s.card({ name: "Pro", fixed_rates: [fixedRate(flat(3100), "base", "Base")], default_tax_rate_ids: [await taxRate(s, "VAT", "20")] });
    const sub = await s.subscribe({ rate_card_id: metered, fixed_rate_quantities: { base: 1 } }, null);
    t.is(sub.result_type, "success", "nothing due up front: no card is saved");
    await s.events([["2026-01-05T00:00:00Z", "5"]]);
    await s.advance("2026-01-11T00:00:00Z");
    const change = await s.call("POST", `/subscriptions/${sub.subscription.id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate", checkout_callback_urls: CALLBACKS });
    const url = change.result.action.checkout_url as string;
    // Jan 11, 21 of 31 days left: Pro's 3,100 × 21/31 = 2,100 (taxed 20% by Pro: 420); Metered's
    // usage so far 5 × 100 = 500 (untaxed); total 2,100 + 500 + 420 = 3,020, charged when the draft
    // finalizes an hour after the change is written.
    const page = await shown(url);
    t.deepEqual(page.due, ["Charged when this period's usage is final, about 1 hour after you complete this checkout (usage reported until then is added)", "USD 30.20"]);
    // Metered's unused time is 0.00: left out.
    t.deepEqual(page.rows, [
      ["API calls", "USD 5.00"],
      ["Remaining time on Pro (prorated: 67.74% of the period left)", "USD 21.00"],
      ["Subtotal", "USD 26.00"],
      ["VAT 20%", "USD 4.20"],
      ["Total", "USD 30.20"],
    ]);
    // The checkout's amount, kept as it opened: the same booked amount due (MariaDB keeps its decimal places).
    const token = new URL(url).pathname.split("/").at(-1);
    const kept = await withDatabase(server.db.url, (db) => db.dataSource.query("SELECT amount_due FROM checkout_sessions WHERE token = ?", [token]));
    t.deepEqual(
      (kept as { amount_due: string }[]).map((r) => String(r.amount_due).replace(/\.0+$/, "")),
      ["3020"],
    );
    t.is((await s.payCheckout(url, CARD_OK)).status, 303);
    // Written as a draft: nothing charged yet.
    t.deepEqual(await charged(s), [["draft", "3020"]]);
    await s.advance("2026-01-11T02:00:00Z");
    t.deepEqual(await charged(s), [["paid", "3020"]]);
  });
}
