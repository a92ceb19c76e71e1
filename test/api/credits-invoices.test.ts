/**
 * Credits applied to invoices (DESIGN §14), golden cases through the public API on test clocks,
 * on MariaDB and SQLite: part and all of an invoice (amount_due 0: nothing charged, paid even
 * with a card whose charges fail), the spend order (priority, then soonest expiry, then oldest), a
 * grant restricted to one rate, a draft showing what would apply, a commitment true-up paid by
 * credit, the webhook payload's fields. Amounts in cents (USD). The clock starts on 2026-01-15:
 * the first cycle is [Jan 15, Feb 15).
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { money } from "../helpers/price-bodies.js";
import { CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

type Case = [string, (s: Scenario) => Promise<unknown>, unknown];

/** A promotional grant named `name` (metadata) of `value`, with `opts`; its id. */
async function grant(s: Scenario, name: string, value: number, opts: Json = {}): Promise<string> {
  return (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: money(value), category: "promotional", metadata: { name }, ...opts })).credit_grant.id;
}

/** Invoices as [status, total, credits applied as [grant name, amount], amount_due], oldest first. */
async function credited(s: Scenario): Promise<[string, string, [string, string][], string][]> {
  const names = new Map(((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&limit=100`)).credit_grants as Json[]).map((g) => [g.id, g.metadata.name]));
  return (await s.invoices()).map((i) => [i.status, i.total_amount.value, (i.credits_applied as Json[]).map((c) => [names.get(c.credit_grant_id), c.amount.value]), i.amount_due.value]);
}

/** A card of 10.00 a seat and API calls at 1 cent each, subscribed at `quantity` seats with `card` (a checkout puts it on file); the card's id. */
async function subscribed(s: Scenario, quantity: number, cardNumber = CARD_OK, extra: Json = {}): Promise<string> {
  const m = await s.metric();
  const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: quantity }, ...extra }, cardNumber);
  return card;
}

const cases: Case[] = [
  [
    "a grant pays part of an invoice: the rest is due and charged",
    async (s) => {
      await subscribed(s, 1);
      await grant(s, "promo", 600);
      await s.advance("2026-02-15T00:00:00Z");
      return credited(s);
    },
    [
      ["paid", "1000", [], "1000"],
      // Feb 15: 1000; 600 of credit: 400 due, charged
      ["paid", "1000", [["promo", "600"]], "400"],
    ],
  ],
  [
    "credit pays all of an invoice: amount_due 0, nothing charged (a card whose charges fail), paid",
    async (s) => {
      await subscribed(s, 1, CARD_FAILS_LATER);
      await grant(s, "promo", 1500);
      await s.advance("2026-03-15T00:00:00Z");
      const g = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants[0];
      return [await credited(s), g.remaining_amount.value];
    },
    [
      [
        // Jan 15: the charge fails (open)
        ["open", "1000", [], "1000"],
        // Feb 15: 1000 paid by credit: 0 due, paid without a charge (1500 − 1000 = 500 left)
        ["paid", "1000", [["promo", "1000"]], "0"],
        // Mar 15: the 500 left; 500 due, the charge fails
        ["open", "1000", [["promo", "500"]], "500"],
      ],
      "0",
    ],
  ],
  [
    "spend order: priority first, then the soonest expiry, then the oldest",
    async (s) => {
      await subscribed(s, 1);
      await grant(s, "old", 300);
      // Later on the clock: "new" is younger than "old" (the same priority, neither expires).
      await s.advance("2026-01-20T00:00:00Z");
      await grant(s, "urgent", 300, { priority: 10 });
      await grant(s, "expiring", 300, { expires_at: "2026-06-01T00:00:00Z" });
      await grant(s, "new", 300);
      await s.advance("2026-02-15T00:00:00Z");
      return (await credited(s)).at(-1);
    },
    // 1000: urgent (priority 10) 300, expiring (50, the soonest expiry) 300, old (50, the oldest) 300, new 100
    [
      "paid",
      "1000",
      [
        ["urgent", "300"],
        ["expiring", "300"],
        ["old", "300"],
        ["new", "100"],
      ],
      "0",
    ],
  ],
  [
    "a grant restricted to one rate pays only that rate's lines",
    async (s) => {
      await subscribed(s, 1);
      await grant(s, "api only", 5000, { applies_to_rate_codes: ["api"], priority: 20 });
      await grant(s, "seats only", 400, { applies_to_rate_codes: ["seats"], priority: 30 });
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-15T00:00:00Z");
      return (await credited(s)).at(-1);
    },
    // Feb 15: seats 1000 (next period) + API calls 1500 = 2500; "api only" pays the 1500 of API
    // calls, "seats only" 400 of the seats: 2500 − 1900 = 600 due
    [
      "paid",
      "2500",
      [
        ["api only", "1500"],
        ["seats only", "400"],
      ],
      "600",
    ],
  ],
  [
    "a commitment true-up is paid by credit like any line",
    async (s) => {
      // A first subscription's checkout puts the card on file, so the second (with its commitment) starts at once.
      const card = await subscribed(s, 1);
      await s.call("POST", `/subscriptions/${(await s.subscriptions())[0].id}/cancel`, {});
      await s.call("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 1 }, minimum_commitment: money(5000) });
      await grant(s, "promo", 2000);
      await s.events([["2026-01-20T00:00:00Z", "1500"]]);
      await s.advance("2026-02-15T00:00:00Z");
      const last = (await s.invoices()).at(-1) as Json;
      return [(last.line_items as Json[]).map((l) => [l.kind, l.amount.value]), (await credited(s)).at(-1)];
    },
    [
      [
        ["fixed", "1000"],
        ["usage", "1500"],
        ["commitment_true_up", "2500"],
      ],
      // period: 1000 + 1500 = 2500 < 5000: true-up 2500 (credit does not count toward it); total
      // 1000 + 1500 + 2500 = 5000; 2000 of credit: 3000 due
      ["paid", "5000", [["promo", "2000"]], "3000"],
    ],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      t.deepEqual(await run(s), expected);
    });
  }

  test(`${store}: a draft shows what credit would apply; finalizing spends it, and the ledger says so`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    await subscribed(s, 1);
    await grant(s, "promo", 700);
    await s.events([["2026-01-20T00:00:00Z", "200"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const draft = (await credited(s)).at(-1);
    const ledgerOf = async () => ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);
    const before = await ledgerOf();
    await s.advance("2026-02-15T02:00:00Z");
    // 1000 + 200 = 1200: 700 would apply (nothing spent yet: only the grant in the ledger); at finalization 700 spent, 500 due
    t.deepEqual(draft, ["draft", "1200", [["promo", "700"]], "500"]);
    t.deepEqual(before, [["grant", "700"]]);
    t.deepEqual((await credited(s)).at(-1), ["paid", "1200", [["promo", "700"]], "500"]);
    t.deepEqual(await ledgerOf(), [
      ["grant", "700"],
      ["application", "-700"],
    ]);
    // The invoice's events carry the fields: invoice.paid's payload names the credit and what was due.
    const events = (await s.call("GET", "/events?limit=100")).events as Json[];
    const paid = events.filter((e) => e.type === "invoice.paid").at(-1) as Json;
    const invoice = paid.data?.object ?? paid.data?.invoice ?? paid.data;
    t.deepEqual([invoice.amount_due?.value, (invoice.credits_applied as Json[] | undefined)?.map((c) => c.amount.value)], ["500", ["700"]]);
  });
}
