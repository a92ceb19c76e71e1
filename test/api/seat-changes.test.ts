/**
 * Mid-cycle changes of a subscription's terms (DESIGN §13, PATCH /subscriptions/{id}), golden
 * cases through the public API on test clocks, on MariaDB and SQLite: proration invoices and
 * credits line by line, the rules, an idempotent replay, and one call over Connect. Amounts in
 * cents (USD); a line is [description, quantity, unit price, amount]; an invoice [status, total,
 * lines]. The clock starts on 2026-01-15, so the first cycle is [Jan 15, Feb 15): 31 days; the
 * second [Feb 15, Mar 15): 28 days.
 */
import test from "ava";
import { createDatabase } from "../../src/db/datasource.js";
import { SubscriptionService } from "../../src/gen/billing/v1/subscription_service_pb.js";
import { buildServices } from "../../src/wiring/services.js";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { startTestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

type Case = [string, (s: Scenario) => Promise<unknown>, unknown];

/** Subscribes the scenario's subject to a new card of `rates` at `quantities`; the subscription's ID. */
async function subscribed(s: Scenario, rates: Json[], quantities: Json, extra: Json = {}): Promise<string> {
  const card = await s.card({ fixed_rates: rates });
  return (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: quantities, ...extra })).subscription.id;
}

const patch = (s: Scenario, id: string, body: Json) => s.call("PATCH", `/subscriptions/${id}`, body);

/**
 * Invoices as [status, total, lines, credits applied (amounts), amount due], oldest first: a
 * decrease's credit goes to the subject's balance (DESIGN §13) and later invoices apply it.
 */
async function due(s: Scenario): Promise<unknown[]> {
  return (await s.invoices()).map((i) => [
    i.status,
    i.total_amount.value,
    i.line_items.map((l: Json) => [l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value]),
    (i.credits_applied as Json[]).map((c) => c.amount.value),
    i.amount_due.value,
  ]);
}

/** An invoice of the API as [status, total, lines] (the response's proration_invoice). */
const bill = (i: Json | null) =>
  i === null ? null : [i.status, i.total_amount.value, i.line_items.map((l: Json) => [l.description, String(l.quantity), l.price_in_unit_amount.value, l.amount.value])];

const cases: Case[] = [
  [
    "an increase mid-cycle is invoiced and charged at once for the rest of the period; the next cycle charges the new quantity",
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 3 });
      await s.advance("2026-01-31T00:00:00Z");
      const r = await patch(s, id, { fixed_rate_quantities: { seats: 5 } });
      await s.advance("2026-02-15T00:00:00Z");
      return [r.subscription.fixed_rate_quantities, bill(r.proration_invoice), await s.bills()];
    },
    [
      { seats: "5" },
      // (5 − 3) × 1000 = 2000 a cycle; Jan 31 → Feb 15 is 15 of 31 days: 2000 × 15/31 = 967.741935… → 968
      ["paid", "968", [["Seats: 3 → 5 (remaining 15 of 31 days)", "1", "967.741935483871", "968"]]],
      [
        ["paid", "3000", [["Seats", "3", "1000", "3000"]]],
        ["paid", "968", [["Seats: 3 → 5 (remaining 15 of 31 days)", "1", "967.741935483871", "968"]]],
        ["paid", "5000", [["Seats", "5", "1000", "5000"]]],
      ],
    ],
  ],
  [
    "a decrease is credited to the subject's balance and applied to the next cycle's invoice; nothing is invoiced now",
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 5 });
      await s.advance("2026-01-31T00:00:00Z");
      const r = await patch(s, id, { fixed_rate_quantities: { seats: 3 } });
      const now = (await s.invoices()).length;
      await s.advance("2026-02-15T00:00:00Z");
      return [r.proration_invoice, now, await due(s)];
    },
    [
      null,
      1,
      [
        ["paid", "5000", [["Seats", "5", "1000", "5000"]], [], "5000"],
        // 3 × 1000 = 3000; credit (3 − 5) × 1000 × 15/31 = −967.741935… → 968 (half-up, away from zero) granted; 3000 − 968 = 2032 due
        ["paid", "3000", [["Seats", "3", "1000", "3000"]], ["968"], "2032"],
      ],
    ],
  ],
  [
    "a decrease while the period's invoice is unpaid credits nothing and the period stays charged at the old quantity: increasing back charges nothing again",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 10 } }, CARD_FAILS_LATER)).subscription.id;
      // The Feb 15 renewal's charge is declined: that period's 10000 stays open while dunning retries.
      await s.advance("2026-03-01T00:00:00Z");
      const down = await patch(s, id, { fixed_rate_quantities: { seats: 2 } });
      const up = await patch(s, id, { fixed_rate_quantities: { seats: 10 } });
      return [down.proration_invoice, up.proration_invoice, up.subscription.fixed_rate_quantities, (await s.invoices()).map((i) => [i.status, i.total_amount.value])];
    },
    [
      // 10 → 2 on Mar 1 (14 of 28 days left): nothing of the period paid yet, so no credit (unused-credit.ts).
      null,
      // 2 → 10: the period is still charged at 10 seats (10000 open), so (10 − 10) × 1000 × 14/28 = 0: nothing invoiced,
      // where an increase from 2 would have charged 8 × 1000 × 14/28 = 4000 on top of the 10000 being collected.
      null,
      { seats: "10" },
      // The card on file declines every charge after the checkout: both periods' 10000 are open.
      [
        ["open", "10000"],
        ["open", "10000"],
      ],
    ],
  ],
  [
    "a decrease larger than the next invoice: nothing is due on it, the rest of the credit pays the one after",
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 4 });
      await s.advance("2026-01-26T00:00:00Z");
      await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
      await s.advance("2026-03-15T00:00:00Z");
      return await due(s);
    },
    [
      ["paid", "4000", [["Seats", "4", "1000", "4000"]], [], "4000"],
      // credit (1 − 4) × 1000 × 20/31 (Jan 26 → Feb 15) = −1935.483870… → 1935 granted; the Feb 15 invoice takes 1000 of it: due 0
      ["paid", "1000", [["Seats", "1", "1000", "1000"]], ["1000"], "0"],
      // the 935 left: 1000 − 935 = 65
      ["paid", "1000", [["Seats", "1", "1000", "1000"]], ["935"], "65"],
    ],
  ],
  [
    "proration_behavior none: nothing now, the new quantity from the next cycle's charges",
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 3 });
      await s.advance("2026-01-31T00:00:00Z");
      const r = await patch(s, id, { fixed_rate_quantities: { seats: 5 }, proration_behavior: "none" });
      const down = await patch(s, id, { fixed_rate_quantities: { seats: 4 }, proration_behavior: "none" });
      await s.advance("2026-02-15T00:00:00Z");
      return [r.proration_invoice, down.subscription.fixed_rate_quantities, await s.bills()];
    },
    [
      null,
      { seats: "4" },
      [
        ["paid", "3000", [["Seats", "3", "1000", "3000"]]],
        ["paid", "4000", [["Seats", "4", "1000", "4000"]]],
      ],
    ],
  ],
  [
    "a multiplier change is prorated like a quantity change",
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 2 });
      await s.advance("2026-01-31T00:00:00Z");
      const r = await patch(s, id, { rate_price_multipliers: { seats: "1.5" } });
      await s.advance("2026-02-15T00:00:00Z");
      return [r.subscription.rate_price_multipliers, bill(r.proration_invoice), (await s.bills()).at(-1)];
    },
    [
      { seats: "1.5" },
      // 2 × 1000 × (1.5 − 1) = 1000 a cycle; × 15/31 = 483.870967… → 484
      ["paid", "484", [["Seats: multiplier 1 → 1.5 (remaining 15 of 31 days)", "1", "483.870967741935", "484"]]],
      ["paid", "3000", [["Seats", "2", "1500", "3000"]]],
    ],
  ],
  [
    "an increase and a decrease in one call are netted: one invoice when the net is positive",
    async (s) => {
      const id = await subscribed(s, [seats(), seats(5000, "support", "Support")], { seats: 5, support: 1 });
      await s.advance("2026-01-31T00:00:00Z");
      const r = await patch(s, id, { fixed_rate_quantities: { seats: 3, support: 2 } });
      return [bill(r.proration_invoice), r.proration_invoice.credits_applied.map((c: Json) => c.amount.value), r.proration_invoice.amount_due.value];
    },
    // seats: −2000 × 15/31 = −967.74… → −968; support: +5000 × 15/31 = 2419.354838… → 2419; net 1451:
    // the increase is invoiced (booked with its discounts), the decrease's credit (valued at what the
    // period's invoices took for seats) granted first and applied to it: 2419 − 968 = 1451 due
    [["paid", "2419", [["Support: 1 → 2 (remaining 15 of 31 days)", "1", "2419.354838709677", "2419"]]], ["968"], "1451"],
  ],
  [
    "a net decrease is one credit naming both changes, in the balance; a later increase's invoice applies it",
    async (s) => {
      const id = await subscribed(s, [seats(), seats(5000, "support", "Support")], { seats: 5, support: 1 });
      await s.advance("2026-01-31T00:00:00Z");
      const down = await patch(s, id, { fixed_rate_quantities: { seats: 1, support: "1.5" } });
      const ledger = await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`);
      const up = await patch(s, id, { fixed_rate_quantities: { seats: 10 } });
      const inv = up.proration_invoice;
      return [
        down.proration_invoice,
        (await s.invoices()).length,
        (ledger.entries as Json[]).map((e) => [e.entry_type, e.amount.value, e.description]),
        bill(inv),
        [inv.credits_applied.map((c: Json) => c.amount.value), inv.amount_due.value],
      ];
    },
    [
      // down: seats −4000 × 15/31 = −1935.48… → −1935; support +2500 × 15/31 = 1209.67… → 1210; net −725: granted
      null,
      2,
      [["proration", "725", "Net of Seats: 5 → 1 (remaining 15 of 31 days); Support: 1 → 1.5 (remaining 15 of 31 days)"]],
      // up: seats 1 → 10: +9000 × 15/31 = 4354.838709… → 4355; the 725 applied: 3630 due
      ["paid", "4355", [["Seats: 1 → 10 (remaining 15 of 31 days)", "1", "4354.838709677419", "4355"]]],
      [["725"], "3630"],
    ],
  ],
  [
    "a catalog add-on taken mid-cycle is prorated from nothing; dropped, it is credited",
    async (s) => {
      const cat = (await s.call("POST", "/rate-catalogs", { name: "Add-ons", description: "" })).id;
      await s.call("POST", `/rate-catalogs/${cat}/add_rates`, { billing_interval: "monthly", fixed_rates: [seats(500, "support", "Support")] });
      const card = await s.card({ rate_catalog_id: cat, fixed_rates: [seats()] });
      const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
      await s.advance("2026-01-31T00:00:00Z");
      const taken = await patch(s, id, { fixed_rate_quantities: { support: 2 } });
      await s.advance("2026-03-01T00:00:00Z");
      const dropped = await patch(s, id, { fixed_rate_quantities: { support: 0 } });
      await s.advance("2026-03-15T00:00:00Z");
      return [taken.subscription.fixed_rate_quantities, dropped.proration_invoice, await due(s)];
    },
    [
      { seats: "1", support: "2" },
      null,
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]], [], "1000"],
        // 0 → 2 × 500 = 1000 a cycle; × 15/31 = 483.87… → 484
        ["paid", "484", [["Support: 0 → 2 (remaining 15 of 31 days)", "1", "483.870967741935", "484"]], [], "484"],
        [
          "paid",
          "2000",
          [
            ["Seats", "1", "1000", "1000"],
            ["Support", "2", "500", "1000"],
          ],
          [],
          "2000",
        ],
        // dropped on Mar 1, 14 of 28 days left: −1000 × 1/2 = 500 credited; Mar 15: 1000 − 500 due
        ["paid", "1000", [["Seats", "1", "1000", "1000"]], ["500"], "500"],
      ],
    ],
  ],
  [
    'metadata: keys set, "" removes a key; no invoice; a request that changes nothing writes nothing',
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 1 }, { metadata: { a: "1", b: "2" } });
      const r = await patch(s, id, { metadata: { b: "", c: "3" } });
      const same = await patch(s, id, { fixed_rate_quantities: { seats: "1.0" }, metadata: { nope: "" } });
      return [r.subscription.metadata, r.proration_invoice, same.subscription.metadata, same.subscription.fixed_rate_quantities, (await s.invoices()).length];
    },
    [{ a: "1", c: "3" }, null, { a: "1", c: "3" }, { seats: "1" }, 1],
  ],
  [
    "bad input: a 400 naming each field, nothing written",
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 2 });
      const bad = async (body: Json) => {
        const r = await s.raw("PATCH", `/subscriptions/${id}`, body);
        return [r.status, r.body.code, violatedFields(r.body)];
      };
      const got = [
        await bad({ fixed_rate_quantities: { seats: "-1" } }),
        await bad({ fixed_rate_quantities: { nope: 1 } }),
        await bad({ rate_price_multipliers: { seats: "-0.5", other: "1" } }),
        await bad({ fixed_rate_quantities: { seats: "1.0000000000001" } }),
        await bad({ proration_behavior: "always" }),
        await bad({ metadata: { ["k".repeat(41)]: "v" } }),
      ];
      const after = await s.call("GET", `/subscriptions/${id}`);
      return [got, after.fixed_rate_quantities, after.rate_price_multipliers, (await s.invoices()).length];
    },
    [
      [
        [400, "invalid_argument", ["fixed_rate_quantities.seats"]],
        [400, "invalid_argument", ["fixed_rate_quantities.nope"]],
        [400, "invalid_argument", ["rate_price_multipliers.seats", "rate_price_multipliers.other"]],
        [400, "invalid_argument", ["fixed_rate_quantities.seats"]],
        [400, "invalid_argument", ["proration_behavior"]],
        [400, "invalid_argument", [`metadata.${"k".repeat(41)}`]],
      ],
      { seats: "2" },
      {},
      1,
    ],
  ],
  [
    "only an active subscription: paused and cancelled ones are a 400 failed_precondition; an unknown one a 404",
    async (s) => {
      const id = await subscribed(s, [seats()], { seats: 2 });
      const body = { fixed_rate_quantities: { seats: 3 } };
      await s.call("POST", `/subscriptions/${id}/pause`, {});
      const paused = await s.raw("PATCH", `/subscriptions/${id}`, body);
      await s.call("POST", `/subscriptions/${id}/cancel`, {});
      const cancelled = await s.raw("PATCH", `/subscriptions/${id}`, body);
      const unknown = await s.raw("PATCH", "/subscriptions/sub_nope", body);
      return [[paused.status, paused.body.code], [cancelled.status, cancelled.body.code], unknown.status];
    },
    [[400, "failed_precondition"], [400, "failed_precondition"], 404],
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

  test(`${store}: a draft shows the credit it would take; finalizing spends it on the recomputed total`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    const m = await s.metric();
    const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 4 } })).subscription.id;
    await s.advance("2026-01-26T00:00:00Z");
    await patch(s, id, { fixed_rate_quantities: { seats: 1 } });
    await s.events([["2026-02-01T00:00:00Z", "5000"]]);
    await s.advance("2026-02-15T00:00:00Z");
    const draft = (await due(s)).at(-1);
    await s.advance("2026-03-15T02:00:00Z");
    // credit (1 − 4) × 1000 × 20/31 = −1935.48… → 1935 in the balance; the Feb 15 invoice (1000 + 5000 usage) takes all of it: 6000 − 1935 = 4065
    const feb: unknown = [
      "paid",
      "6000",
      [
        ["Seats", "1", "1000", "1000"],
        ["API calls", "5000", "1", "5000"],
      ],
      ["1935"],
      "4065",
    ];
    t.deepEqual(draft, ["draft", ...(feb as unknown[]).slice(1)]);
    t.deepEqual((await due(s)).slice(1), [
      feb,
      // Mar 15: 1000, no credit left (no usage in February's period)
      ["paid", "1000", [["Seats", "1", "1000", "1000"]], [], "1000"],
    ]);
  });

  test(`${store}: cancelled now after a decrease: the final invoice takes the credit`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 4 } })).subscription.id;
    await s.advance("2026-01-26T00:00:00Z");
    await patch(s, id, { fixed_rate_quantities: { seats: 2 } });
    await s.events([["2026-01-27T00:00:00Z", "3000"]]);
    await s.advance("2026-01-28T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/cancel`, {});
    t.deepEqual(await due(s), [
      ["paid", "4000", [["Seats", "4", "1000", "4000"]], [], "4000"],
      // (2 − 4) × 1000 × 20/31 = −1290.32… → 1290 credited; 3000 − 1290 = 1710 due
      ["paid", "3000", [["API calls", "3000", "1", "3000"]], ["1290"], "1710"],
    ]);
  });

  test(`${store}: a subscription that follows a timeline cannot be updated`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats()] });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
    const item = { period: { start: "2026-01-15T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } };
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item] });
    const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } });
    if (started.result.result_type === "requires_action") await s.payCheckout(started.result.action.checkout_url, CARD_OK);
    const sub = (await s.subscriptions())[0] as Json;
    const r = await s.raw("PATCH", `/subscriptions/${sub.id}`, { fixed_rate_quantities: { seats: 2 } });
    t.deepEqual([r.status, r.body.code], [400, "failed_precondition"]);
    t.regex(r.body.message, /follows subscription timeline/);
    t.deepEqual((await s.call("GET", `/subscriptions/${sub.id}`)).fixed_rate_quantities, { seats: "1" });
  });

  test(`${store}: a PATCH retried with the same Idempotency-Key is replayed: one proration invoice`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const id = await subscribed(s, [seats()], { seats: 3 });
    await s.advance("2026-01-31T00:00:00Z");
    const send = async () => {
      const res = await fetch(`${server.url}/subscriptions/${id}`, {
        method: "PATCH",
        headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": "seats-to-5" },
        body: JSON.stringify({ fixed_rate_quantities: { seats: 5 } }),
      });
      return { status: res.status, replayed: res.headers.get("idempotent-replayed"), text: await res.text() };
    };
    const first = await send();
    const again = await send();
    t.is(first.status, 200, first.text);
    t.deepEqual([again.status, again.replayed, again.text], [200, "true", first.text]);
    // The first cycle's invoice and one proration invoice: 2000 × 15/31 → 968.
    t.deepEqual(
      (await s.bills()).map(([status, total]) => [status, total]),
      [
        ["paid", "3000"],
        ["paid", "968"],
      ],
    );
  });

  test(`${store}: UpdateSubscription over Connect: the same proration as REST`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 3 } })).subscription.id;
    await s.advance("2026-01-31T00:00:00Z");
    const client = rpcClient(SubscriptionService, server.url, "connect", s.key);
    const r = await client.updateSubscription({ subscriptionId: id, fixedRateQuantities: { seats: "5" }, metadata: { team: "core" } });
    const inv = r.prorationInvoice;
    t.deepEqual([r.subscription?.fixedRateQuantities, r.subscription?.metadata], [{ seats: "5" }, { team: "core" }]);
    // 2000 × 15/31 = 967.74… → 968
    t.deepEqual([inv?.status, inv?.totalAmount?.value, inv?.lineItems.map((l) => [l.description, l.amount?.value])], ["paid", "968", [["Seats: 3 → 5 (remaining 15 of 31 days)", "968"]]]);
    t.regex(inv?.hostedUrl ?? "", /\/hosted\/invoices\/[A-Za-z0-9]{32}$/);
    const page = await fetch(inv?.hostedUrl ?? "");
    t.is(page.status, 200);
    const none = await client.updateSubscription({ subscriptionId: id, fixedRateQuantities: { seats: "6" }, prorationBehavior: "none" });
    t.is(none.prorationInvoice, undefined);
  });
}

mysqlOnly("mysql: a PATCH racing the close of the cycle it falls in has one outcome: the cycle closed once, the change prorated in the new cycle", async (t) => {
  const server = await startTestServer("mysql");
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats()] });
    const subs: string[] = [];
    for (let i = 0; i < 8; i++) {
      const subject = (await s.call("POST", "/subjects", { name: `c${i}`, test_clock_id: s.clockId })).id;
      await s.subscribe({ rate_card_id: card, subject_id: subject, fixed_rate_quantities: { seats: 1 } });
      subs.push((await s.call("GET", `/subscriptions?subject_id=${subject}`)).subscriptions[0].id);
    }
    // The clock reaches the cycle's end behind the API's back; a scheduler closes while the API changes seats.
    const runner = await createDatabase(server.db.url, { poolSize: 8 });
    await runner.dataSource.initialize();
    const to = new Date("2026-02-15T00:00:00Z");
    await runner.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-02-15 00:00:00.000", s.clockId]);
    const engine = buildServices(
      runner,
      () => "http://localhost",
      () => to,
    ).engine;
    const [, patched] = await Promise.all([engine.closeDue(to, s.clockId, 8), Promise.all(subs.map((id) => s.raw("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 2 } })))]);
    t.deepEqual(
      patched.map((r) => r.status),
      subs.map(() => 200),
    );
    const rows = (await runner.dataSource.query(
      "SELECT i.subscription_id AS sub, l.kind AS kind, l.description AS d, l.amount AS a FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id ORDER BY i.seq, l.position",
    )) as { sub: string; kind: string; d: string; a: string }[];
    for (const id of subs) {
      // The first cycle (1 seat), the one the close opened (1 seat), then the change in that new
      // cycle: (2 − 1) × 1000 × 28/28 = 1000 — whichever came first, the cycle is closed before the change.
      t.deepEqual(
        rows.filter((r) => r.sub === id).map((r) => [r.kind, r.d, Number(r.a)]),
        [
          ["fixed", "Seats", 1000],
          ["fixed", "Seats", 1000],
          ["proration", "Seats: 1 → 2 (remaining 28 of 28 days)", 1000],
        ],
        id,
      );
    }
    await runner.dataSource.destroy();
  } finally {
    await server.stop();
  }
});
