/**
 * What a resume credits for the cycle a pause cut short, and what a later credit for unused time
 * in the new cycle can be worth (DESIGN §13): the credit a resume's invoice carries for the old
 * cycle takes nothing of what the new cycle's invoices took for fixed charges, and the old cycle's
 * unused time is priced on the card it was billed on. Golden cases through the REST API on test
 * clocks, on MariaDB and SQLite. Amounts in USD cents. An invoice (those with lines) is [status,
 * total, lines as [description, amount], amount due], oldest first.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

async function bills(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).filter((i) => i.line_items.length > 0).map((i) => [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, l.amount.value]), i.amount_due.value]);
}

const unused = (rate: string, at: string, days: string) => `${rate}: unused time of the cycle paused at 2026-01-${at}T00:00:00Z (remaining ${days} of 31 days)`;

/** `quantity` seats at 1,000 a month from January 15, paused on January 18 and resumed on January 20 (a new cycle to February 20). */
async function resumedOnce(s: Scenario, quantity: number): Promise<string> {
  const card = await s.card({ fixed_rates: [seats()] });
  const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: quantity } })).subscription;
  await s.advance("2026-01-18T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
  await s.advance("2026-01-20T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
  return sub.id;
}

/** Pro, 1 seat at 10,000 a month from January 15 (31 days), changed on January 17 to Ent at 20,000 (29 days left), the clock on January 18 (28 left). */
async function upgradedToEnt(s: Scenario): Promise<string> {
  const pro = await s.card({ name: "Pro", fixed_rates: [seats(10000, "pro", "Pro")] });
  const ent = await s.card({ name: "Ent", fixed_rates: [seats(20000, "ent", "Ent")] });
  const sub = (await s.subscribe({ rate_card_id: pro, fixed_rate_quantities: { pro: 1 } })).subscription;
  await s.advance("2026-01-17T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: ent });
  await s.advance("2026-01-18T00:00:00Z");
  return sub.id;
}

/** The upgrade's invoice: Pro's unused 10,000 × 29/31 back, Ent's 20,000 × 29/31 charged. */
const UPGRADE = [
  "paid",
  "9355",
  [
    ["Unused time on Pro (prorated: 93.55% of the period left)", "-9355"],
    ["Remaining time on Ent (prorated: 93.55% of the period left)", "18710"],
  ],
  "9355",
];

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a second pause credits the new cycle's unused time in full: 1,000 × 28/31 = 903, not the 97 the first resume's invoice came to after its credit`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await resumedOnce(s, 1);
    await s.advance("2026-01-23T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/pause`, {});
    await s.advance("2026-01-25T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    t.deepEqual(await bills(s), [
      ["paid", "1000", [["Seats", "1000"]], "1000"],
      [
        "paid",
        "97",
        [
          ["Seats", "1000"],
          [unused("Seats × 1", "18", "28"), "-903"],
        ],
        "97",
      ],
      [
        "paid",
        "97",
        [
          ["Seats", "1000"],
          [unused("Seats × 1", "23", "28"), "-903"],
        ],
        "97",
      ],
    ]);
  });

  test(`${store}: a seat decrease after a resume credits what the new cycle paid for the seats: 9 × 1,000 × 15.5/31 = 4,500, not the 968 its invoice came to after the old cycle's credit`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await resumedOnce(s, 10);
    await s.advance("2026-02-04T12:00:00Z");
    await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 1 } });
    t.deepEqual((await bills(s)).at(-1), [
      "paid",
      "968",
      [
        ["Seats", "10000"],
        [unused("Seats × 10", "18", "28"), "-9032"],
      ],
      "968",
    ]);
    t.deepEqual(await ledger(s), [["proration", "4500"]]);
  });

  test(`${store}: after a downgrade that charged nothing, a pause credits the card the cycle was paid on: Pro 10,000 × 30/31 = 9,677, not Basic 2,000 × 30/31; the resume's 2,000 takes 2,000 of it, 7,677 to the balance`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const pro = await s.card({ name: "Pro", fixed_rates: [seats(10000, "pro", "Pro")] });
    const basic = await s.card({ name: "Basic", fixed_rates: [seats(2000, "basic", "Basic")] });
    const sub = (await s.subscribe({ rate_card_id: pro, fixed_rate_quantities: { pro: 1 } })).subscription;
    await s.advance("2026-01-16T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: basic });
    await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
    t.deepEqual(await bills(s), [
      ["paid", "10000", [["Pro", "10000"]], "10000"],
      [
        "paid",
        "0",
        [
          ["Basic", "2000"],
          [`${unused("Pro × 1", "16", "30")} (USD 20.00 of USD 96.77; the rest on the next invoice)`, "-2000"],
        ],
        "0",
      ],
    ]);
    // The 7,677 left goes to the balance at the next cycle close (February 20) and pays its 2,000.
    await s.advance("2026-02-20T00:00:00Z");
    t.deepEqual((await bills(s)).at(-1), ["paid", "2000", [["Basic", "2000"]], "0"]);
    t.deepEqual(
      (await ledger(s)).filter(([type]) => type === "proration"),
      [["proration", "7677"]],
    );
  });

  test(`${store}: after an upgrade, a pause credits the new card's unused time in full: Ent 20,000 × 28/31 = 18,065, not the 9,355 its invoice came to after Pro's credit`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await upgradedToEnt(s);
    await s.call("POST", `/subscriptions/${id}/pause`, {});
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    t.deepEqual((await bills(s)).slice(1), [
      UPGRADE,
      [
        "paid",
        "1935",
        [
          ["Ent", "20000"],
          [unused("Ent × 1", "18", "28"), "-18065"],
        ],
        "1935",
      ],
    ]);
    t.deepEqual(await ledger(s), []);
  });

  test(`${store}: after an upgrade, a seat decrease credits the new card's unused time in full: Ent 1 → 0 gives back 20,000 × 28/31 = 18,065, not 9,355`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await upgradedToEnt(s);
    await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { ent: 0 } });
    t.deepEqual((await bills(s)).slice(1), [UPGRADE]);
    t.deepEqual(await ledger(s), [["proration", "18065"]]);
  });

  test(`${store}: after an upgrade, a seat decrease never credits more than the period's paid invoices took: 10,000 given back by credit notes, Ent 1 → 0 gives back 9,355, not 18,065`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await upgradedToEnt(s);
    const [pro, upgrade] = (await s.invoices()).filter((i) => i.line_items.length > 0);
    // The upgrade's credit gave back 9,355 of Pro's 10,000 (given-back.ts): a note gives back the 645 left, another all the upgrade's 9,355.
    const note = async (i: Json | undefined) => (await s.call("POST", "/credit-notes", { invoice_id: i?.id, reason: "other", outcome: "credit_balance" })).total.value;
    t.deepEqual([await note(pro), await note(upgrade)], ["645", "9355"]);
    await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { ent: 0 } });
    // Paid for the period: 10,000 + 9,355 = 19,355, of which the notes gave back 645 + 9,355: 9,355 left; Ent's unused
    // 18,065 is held to it (9fb3522 added Pro's credit on the upgrade's invoice back to Ent's room whatever became of
    // Pro's payment: 18,065).
    t.deepEqual(
      (await ledger(s)).filter(([type]) => type === "proration"),
      [["proration", "9355"]],
    );
  });
}
