/**
 * A change of rate card that charges nothing (a downgrade) leaves the period billed at the card it
 * was charged on: a later upgrade in the same period is computed from that card, not from the one
 * downgraded to. Through the public API on test clocks, on MariaDB and SQLite: change-rate-card
 * and a timeline's moves. Amounts in cents (USD); monthly from January 1, a 31-day period; Pro
 * 3,000, Basic 1,000, Max 5,000 a cycle (one fixed rate "base"). A bill is [created, total, lines
 * (each [description, quantity, unit price, amount])], oldest first, invoices without lines left out.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function cards(s: Scenario) {
  const card = (name: string, value: number) => s.card({ name, fixed_rates: [seats(value, "base", name)] });
  return { pro: await card("Pro", 3000), basic: await card("Basic", 1000), max: await card("Max", 5000) };
}

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices())
    .filter((i) => i.line_items.length > 0)
    .map((i) => [i.created_at, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value])]);
}

const change = (s: Scenario, id: string, card: string) => s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: card, upgrade_behavior: "prorate" });

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: change-rate-card Pro → Basic on Jan 11, → Pro on Jan 21: nothing charged, January was billed at Pro`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { pro, basic } = await cards(s);
    const id = (await s.subscribe({ rate_card_id: pro, fixed_rate_quantities: { base: 1 } })).subscription.id;
    await s.advance("2026-01-11T00:00:00Z");
    await change(s, id, basic);
    await s.advance("2026-01-21T00:00:00Z");
    await change(s, id, pro);
    await s.advance("2026-02-01T00:00:00Z");
    t.deepEqual(await bills(s), [
      ["2026-01-01T00:00:00Z", "3000", [["Pro", "1", "3000", "3000"]]],
      // Jan 21, back to Pro: Pro 3,000 − the 3,000 paid = 0, nothing invoiced (the old code took the
      // period as paid at Basic: −1,000 × 11/31 = −355 and +3,000 × 11/31 = 1,065, 710 charged)
      ["2026-02-01T00:00:00Z", "3000", [["Pro", "1", "3000", "3000"]]],
    ]);
  });

  test(`${store}: change-rate-card Pro → Basic on Jan 11, → Max on Jan 21: the upgrade is from the Pro paid`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { pro, basic, max } = await cards(s);
    const id = (await s.subscribe({ rate_card_id: pro, fixed_rate_quantities: { base: 1 } })).subscription.id;
    await s.advance("2026-01-11T00:00:00Z");
    await change(s, id, basic);
    await s.advance("2026-01-21T00:00:00Z");
    await change(s, id, max);
    await s.advance("2026-02-01T00:00:00Z");
    t.deepEqual(await bills(s), [
      ["2026-01-01T00:00:00Z", "3000", [["Pro", "1", "3000", "3000"]]],
      // Jan 21, to Max: (5,000 − the 3,000 paid) × 11/31 = 709.68, 710: the Pro paid credited, −3,000 × 11/31 =
      // −1,064.52, −1,065, and Max charged 710 + 1,065 = 1,775 (the old code took the period as paid at Basic:
      // (5,000 − 1,000) × 11/31 = 1,419)
      [
        "2026-01-21T00:00:00Z",
        "710",
        [
          ["Unused time on Pro (prorated: 35.48% of the period left)", "1", "-1064.516129032258", "-1065"],
          ["Remaining time on Max (prorated: 35.48% of the period left)", "1", "1775", "1775"],
        ],
      ],
      ["2026-02-01T00:00:00Z", "5000", [["Max", "1", "5000", "5000"]]],
    ]);
  });

  test(`${store}: a timeline Pro (Jan 1–11) → Basic (Jan 11–21) → Pro (from Jan 21): its move back to Pro charges nothing`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const { pro, basic } = await cards(s);
    const item = (start: string, end: string, card: string) => ({ period: { start, end }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { base: 1 } } });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: pro });
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
      items: [item("2026-01-01T00:00:00Z", "2026-01-11T00:00:00Z", pro), item("2026-01-11T00:00:00Z", "2026-01-21T00:00:00Z", basic), item("2026-01-21T00:00:00Z", "2026-03-01T00:00:00Z", pro)],
    });
    const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };
    const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
    t.is((await s.payCheckout(started.result.action.checkout_url, CARD_OK)).status, 303);
    await s.advance("2026-02-01T00:00:00Z");
    const sub = await s.call("GET", `/subscriptions/${(await s.call("GET", `/subscription-timelines/${tl.id}`)).subscription_id}`);
    t.is(sub.rate_card_id, pro);
    // The move to Basic on Jan 11 charges nothing; the move back to Pro on Jan 21 neither: 3,000 − the 3,000
    // paid = 0 (the old code: −1,000 × 11/31 = −355 and +3,000 × 11/31 = 1,065, 710 charged on Jan 21)
    t.deepEqual(await bills(s), [
      ["2026-01-01T00:00:00Z", "3000", [["Pro", "1", "3000", "3000"]]],
      ["2026-02-01T00:00:00Z", "3000", [["Pro", "1", "3000", "3000"]]],
    ]);
  });
}
