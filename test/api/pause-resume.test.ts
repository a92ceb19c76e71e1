/**
 * Pausing and resuming subscriptions (DESIGN §8, issue 20), golden cases through the public API on
 * test clocks, on MariaDB and SQLite: invoices line by line, periods, billing state and the rules;
 * and (MariaDB) a pause racing a cycle close. Amounts in cents (USD); a line is [description,
 * quantity, unit price, amount]; an invoice [status, total, lines].
 */
import test from "ava";
import { buildServices } from "../../src/wiring/services.js";
import { createDatabase } from "../../src/db/datasource.js";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { promo } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { startTestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** The subject's only subscription. */
async function only(s: Scenario): Promise<Json> {
  return (await s.subscriptions())[0] as Json;
}

const period = (sub: Json) => (sub.current_period ? [sub.current_period.start, sub.current_period.end] : null);

type Case = [string, (s: Scenario) => Promise<unknown>, unknown];

/** The case of a resume after dunning paused the subscription, its cycle's invoice marked uncollectible or left open: nothing credited. */
function dunningPausedThenResumed(markUncollectible: boolean): Case {
  return [
    `resume after dunning paused the subscription, the cycle's invoice ${markUncollectible ? "uncollectible" : "left open"}: nothing credited (never paid)`,
    async (s) => {
      const card = await s.card({ fixed_rates: [seats(10000)] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
      await s.call("PATCH", "/payment-settings", { retry_schedule_days: [1, 2], set_retry_schedule: true, after_last_attempt: "pause", mark_uncollectible: markUncollectible });
      await s.saveCardInPortal(CARD_FAILS_LATER);
      // Feb 15's renewal fails, then its retries on Feb 16 and 17; the last one pauses the subscription.
      await s.advance("2026-02-20T00:00:00Z");
      const paused = await only(s);
      await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
      return [paused.status, paused.paused_at, await s.bills()];
    },
    [
      "paused",
      // the policy runs with the last retry, at its time (as real time would): Feb 17
      "2026-02-17T00:00:00Z",
      [
        ["paid", "10000", [["Seats", "1", "10000", "10000"]]],
        [markUncollectible ? "uncollectible" : "open", "10000", [["Seats", "1", "10000", "10000"]]],
        // Not 10000 × 23/28 (Feb 20 → Mar 15) = 8214.28… → 8214 credited: the cycle was never paid for. The card still fails.
        ["open", "10000", [["Seats", "1", "10000", "10000"]]],
      ],
    ],
  ];
}

const cases: Case[] = [
  [
    "pause mid-cycle, then resume by call: the cycle's usage so far is invoiced, usage while paused is not, a new cycle starts at the resume",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd("0.5"))] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
      await s.events([["2026-01-20T00:00:00Z", "40"]]);
      await s.advance("2026-01-25T00:00:00Z");
      const paused = await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.events([["2026-02-01T00:00:00Z", "100"]]);
      await s.advance("2026-02-20T00:00:00Z");
      const during = await only(s);
      const resumed = await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
      await s.events([["2026-03-01T00:00:00Z", "10"]]);
      await s.advance("2026-03-20T00:00:00Z");
      return [
        [
          paused.subscription.status,
          paused.subscription.paused_at,
          paused.subscription.resumes_at,
          period(paused.subscription),
          paused.subscription.cycles_next_at,
          paused.cancel_at_end_of_cycle_cleared,
        ],
        [during.status, period(during)],
        [resumed.status, period(resumed), resumed.cycles_next_at, resumed.paused_at, resumed.effective_at],
        await s.bills(),
      ];
    },
    [
      ["paused", "2026-01-25T00:00:00Z", null, null, null, false],
      ["paused", null],
      ["active", ["2026-02-20T00:00:00Z", "2026-03-20T00:00:00Z"], "2026-03-20T00:00:00Z", null, "2026-01-15T00:00:00Z"],
      [
        ["paid", "1000", [["Seats", "1", "1000", "1000"]]],
        ["paid", "20", [["API calls", "40", "0.5", "20"]]],
        // The resume's new cycle in advance, less the unused part of the cycle the pause cut short:
        // Jan 25 → Feb 15 is 21 of its 31 days, 1000 × 21/31 = 677.419… → 677; 1000 − 677 = 323
        [
          "paid",
          "323",
          [
            ["Seats", "1", "1000", "1000"],
            ["Seats × 1: unused time of the cycle paused at 2026-01-25T00:00:00Z (remaining 21 of 31 days)", "1", "-677", "-677"],
          ],
        ],
        [
          "paid",
          "1005",
          [
            ["Seats", "1", "1000", "1000"],
            ["API calls", "10", "0.5", "5"],
          ],
        ],
      ],
    ],
  ],
  [
    "resume with proration_behavior none: the new cycle's fixed charges, nothing credited; a bad proration_behavior is a 400",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription;
      await s.advance("2026-01-25T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.advance("2026-02-20T00:00:00Z");
      const bad = await s.raw("POST", `/subscriptions/${sub.id}/resume`, { proration_behavior: "sometimes" });
      const stillPaused = (await only(s)).status;
      const resumed = await s.call("POST", `/subscriptions/${sub.id}/resume`, { proration_behavior: "none" });
      const field = bad.body.details?.find((d: Json) => d.debug?.field_violations)?.debug.field_violations[0].field;
      return [[bad.status, bad.body.code, field], stillPaused, resumed.status, await s.bills()];
    },
    [
      [400, "invalid_argument", "proration_behavior"],
      "paused",
      "active",
      [
        ["paid", "2000", [["Seats", "2", "1000", "2000"]]],
        ["paid", "2000", [["Seats", "2", "1000", "2000"]]],
      ],
    ],
  ],
  [
    "resume after a seat decrease: the unused time on the resume's invoice, the decrease's credit from the balance",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 4 } })).subscription;
      await s.advance("2026-01-26T00:00:00Z");
      await s.call("PATCH", `/subscriptions/${sub.id}`, { fixed_rate_quantities: { seats: 1 } });
      await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
      await s.advance("2026-03-01T00:00:00Z");
      const ledger = (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[];
      const invoices = (await s.invoices()).map((i) => [
        i.status,
        i.total_amount.value,
        i.line_items.map((l: Json) => [l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value]),
        (i.credits_applied as Json[]).map((c) => c.amount.value),
        i.amount_due.value,
      ]);
      return [invoices, ledger.map((e) => [e.entry_type, e.amount.value])];
    },
    [
      [
        ["paid", "4000", [["Seats", "4", "1000", "4000"]], [], "4000"],
        // The decrease on Jan 26: (1 − 4) × 1000 × 20/31 = −1935.48… → 1935 to the balance. Resume on Feb 1:
        // 1 seat in advance (1000) less the unused time 1 × 1000 × 20/31 (Jan 26 → Feb 15) = 645.16… → −645
        // as a line: 355, paid by the balance (1935 − 355 = 1580 left)
        [
          "paid",
          "355",
          [
            ["Seats", "1", "1000", "1000"],
            ["Seats × 1: unused time of the cycle paused at 2026-01-26T00:00:00Z (remaining 20 of 31 days)", "1", "-645", "-645"],
          ],
          ["355"],
          "0",
        ],
        // Mar 1: 1000, paid by the balance (1580 − 1000 = 580 left)
        ["paid", "1000", [["Seats", "1", "1000", "1000"]], ["1000"], "0"],
      ],
      [
        ["proration", "1935"],
        ["application", "-355"],
        ["application", "-1000"],
      ],
    ],
  ],
  [
    "resume after a cycle whose invoice was voided: nothing to credit (it was never owed)",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER)).subscription;
      const [first] = await s.invoices();
      await s.call("POST", `/invoices/${first.id}/void`, {});
      await s.advance("2026-01-25T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
      return await s.bills();
    },
    [
      ["void", "1000", [["Seats", "1", "1000", "1000"]]],
      // The card's charges fail: the resume's invoice stays open, with no credit line.
      ["open", "1000", [["Seats", "1", "1000", "1000"]]],
    ],
  ],
  [
    "a resume's fixed charges carry their rate's code: a coupon and a grant limited to that rate apply to them as to a cycle's",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats(10000)] });
      const coupon = (await s.call("POST", "/coupons", { name: "Seats 20%", percent_off: "20", duration: "forever", applies_to_rate_codes: ["seats"] })).id;
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, coupon_id: coupon })).subscription;
      await s.advance("2026-01-25T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.advance("2026-02-01T00:00:00Z");
      await promo(s, "seats-only", 3000, { applies_to_rate_codes: ["seats"] });
      await s.call("POST", `/subscriptions/${sub.id}/resume`, { proration_behavior: "none" });
      await s.advance("2026-03-01T00:00:00Z");
      return (await s.invoices()).map((i) => [i.created_at, i.total_amount.value, i.total_discount.value, (i.credits_applied as Json[]).map((c) => c.amount.value), i.amount_due.value]);
    },
    [
      // 10000 less 20% = 8000, on the first invoice, the resume's and the cycle after it alike
      ["2026-01-15T00:00:00Z", "8000", "2000", [], "8000"],
      // the grant limited to seats pays 3000 of the resume's 8000: 5000 due
      ["2026-02-01T00:00:00Z", "8000", "2000", ["3000"], "5000"],
      ["2026-03-01T00:00:00Z", "8000", "2000", [], "8000"],
    ],
  ],
  dunningPausedThenResumed(true),
  dunningPausedThenResumed(false),
  [
    "resume after a cycle paid nothing for (a 100% coupon): nothing credited, never more than was paid",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats(10000)] });
      const coupon = (await s.call("POST", "/coupons", { name: "Free month", percent_off: "100", duration: "once" })).id;
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, coupon_id: coupon })).subscription;
      await s.advance("2026-01-25T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.advance("2026-02-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
      return (await s.invoices()).map((i) => [i.status, i.total_amount.value, i.total_discount.value, i.line_items.map((l: Json) => l.amount.value)]);
    },
    [
      ["paid", "0", "10000", ["10000"]],
      // Not 10000 × 21/31 (Jan 25 → Feb 15) = 6774 credited: 0 was paid for that cycle
      ["paid", "10000", "0", ["10000"]],
    ],
  ],
  [
    "pause with resumes_at: a clock advance past it resumes at that instant, and closes the cycles since",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } })).subscription;
      await s.advance("2026-01-25T00:00:00Z");
      const paused = await s.call("POST", `/subscriptions/${sub.id}/pause`, { resumes_at: "2026-02-10T12:00:00Z" });
      await s.advance("2026-02-10T11:59:59Z");
      const still = (await only(s)).status;
      await s.advance("2026-04-01T00:00:00Z");
      const after = await only(s);
      return [paused.subscription.resumes_at, paused.subscription.cycles_next_at, still, after.status, period(after), (await s.invoices()).map((i) => i.created_at)];
    },
    ["2026-02-10T12:00:00Z", "2026-02-10T12:00:00Z", "paused", "active", ["2026-03-10T12:00:00Z", "2026-04-10T12:00:00Z"], ["2026-01-15T00:00:00Z", "2026-02-10T12:00:00Z", "2026-03-10T12:00:00Z"]],
  ],
  [
    "billing state shows a paused subscription apart, with no usage",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(1))] });
      const sub = (await s.subscribe({ rate_card_id: card })).subscription;
      await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.events([["2026-01-16T00:00:00Z", "5"]]);
      const state = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
      return [state.has_active_subscription, state.active_subscriptions, state.paused_subscriptions, state.usage_data];
    },
    // (filled in per run: the subscription and card IDs)
    "see below",
  ],
  [
    "cancel while paused: cancelled now, no invoice beyond the pause's; at the end of the cycle is refused",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [simple(m, usd(1))] });
      const sub = (await s.subscribe({ rate_card_id: card })).subscription;
      await s.events([["2026-01-16T00:00:00Z", "3"]]);
      await s.advance("2026-01-20T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.events([["2026-01-21T00:00:00Z", "50"]]);
      await s.advance("2026-01-22T00:00:00Z");
      const atEnd = await s.raw("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true });
      const cancelled = await s.call("POST", `/subscriptions/${sub.id}/cancel`, {});
      await s.advance("2026-04-01T00:00:00Z");
      return [atEnd.status, atEnd.body.code, cancelled.status, cancelled.paused_at, await s.bills()];
    },
    [400, "failed_precondition", "cancelled", null, [["open", "3", [["API calls", "3", "1", "3"]]]]],
  ],
  [
    "a yearly plan: paused in June, resumed in September, a new yearly cycle from then",
    async (s) => {
      const card = await s.card({ billing_interval: "yearly", fixed_rates: [seats(120000, "platform", "Platform")] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { platform: 1 } })).subscription;
      await s.advance("2026-06-01T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub.id}/pause`, { resumes_at: "2026-09-01T00:00:00Z" });
      await s.advance("2027-01-15T00:00:00Z");
      const after = await only(s);
      return [period(after), (await s.invoices()).map((i) => [i.created_at, i.total_amount.value])];
    },
    [
      ["2026-09-01T00:00:00Z", "2027-09-01T00:00:00Z"],
      [
        ["2026-01-15T00:00:00Z", "120000"],
        // Jun 1 → Jan 15 2027 is 228 of the cycle's 365 days unused: 120000 × 228/365 = 74958.90… → 74959 credited
        ["2026-09-01T00:00:00Z", "45041"],
      ],
    ],
  ],
  [
    "a pause clears a pending cancellation at the end of the cycle, and says so",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
      await s.call("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true });
      const paused = await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
      await s.advance("2026-03-01T00:00:00Z");
      return [paused.cancel_at_end_of_cycle_cleared, paused.subscription.cancels_at_end_of_cycle, (await only(s)).status];
    },
    [true, false, "paused"],
  ],
  [
    "the rules: pause only an active one, resume only a paused one, resumes_at in the future and in range",
    async (s) => {
      const card = await s.card({ fixed_rates: [seats()] });
      const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
      const pause = (body: Json) => s.raw("POST", `/subscriptions/${sub.id}/pause`, body);
      const resumeActive = await s.raw("POST", `/subscriptions/${sub.id}/resume`, {});
      const past = await pause({ resumes_at: "2026-01-14T00:00:00Z" });
      const now = await pause({ resumes_at: "2026-01-15T00:00:00Z" });
      const range = await pause({ resumes_at: "2200-01-01T00:00:00Z" });
      const bad = await pause({ resumes_at: "2026-02-30T00:00:00Z" });
      const first = await pause({});
      const again = await pause({});
      await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
      const resumeAgain = await s.raw("POST", `/subscriptions/${sub.id}/resume`, {});
      const unknown = await s.raw("POST", "/subscriptions/sub_nope/pause", {});
      const field = (r: Json) => [r.status, r.body.code, r.body.details?.find((d: Json) => d.debug?.field_violations)?.debug.field_violations[0].field ?? null];
      return [field(resumeActive), field(past), field(now), field(range), field(bad), first.status, field(again), field(resumeAgain), unknown.status];
    },
    [
      [400, "failed_precondition", null],
      [400, "invalid_argument", "resumes_at"],
      [400, "invalid_argument", "resumes_at"],
      [400, "invalid_argument", "resumes_at"],
      [400, "invalid_argument", "resumes_at"],
      200,
      [400, "failed_precondition", null],
      [400, "failed_precondition", null],
      404,
    ],
  ],
];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      const got = await run(s);
      if (expected === "see below") {
        const sub = await only(s);
        t.deepEqual(got, [false, [], [{ rate_card_id: sub.rate_card_id, subscription_id: sub.id }], []]);
      } else t.deepEqual(got, expected);
    });
  }

  test(`${store}: a subscription that follows a timeline cannot be paused`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats()] });
    const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
    const item = { period: { start: "2026-01-15T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } };
    await s.call("POST", `/subscription-timelines/${tl.id}/items`, { items: [item] });
    const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } });
    if (started.result.result_type === "requires_action") await s.payCheckout(started.result.action.checkout_url, CARD_OK);
    const sub = await only(s);
    const r = await s.raw("POST", `/subscriptions/${sub.id}/pause`, {});
    t.deepEqual([r.status, r.body.code], [400, "failed_precondition"]);
    t.regex(r.body.message, /follows subscription timeline/);
    t.is((await only(s)).status, "active");
  });
}

mysqlOnly("mysql: a pause racing the close of the cycle it falls in has one outcome: no usage billed twice, no cycle charged twice", async (t) => {
  const server = await startTestServer("mysql");
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const card = await s.card({ fixed_rates: [seats()], usage_based_rates: [simple(m, usd(1))] });
    const subs: string[] = [];
    const subjects: string[] = [];
    for (let i = 0; i < 8; i++) {
      const subject = (await s.call("POST", "/subjects", { name: `c${i}`, test_clock_id: s.clockId })).id;
      subjects.push(subject);
      await s.subscribe({ rate_card_id: card, subject_id: subject, fixed_rate_quantities: { seats: 1 } });
      subs.push((await s.call("GET", `/subscriptions?subject_id=${subject}`)).subscriptions[0].id);
    }
    await s.call("POST", "/usage-events/batch", {
      events: subjects.map((subject_id, i) => ({ idempotency_key: `u${i}`, subject_id, event_name: "usage", timestamp: "2026-02-01T00:00:00Z", data: { n: "7" } })),
    });
    // The clock reaches the cycle's end behind the API's back; a scheduler closes while the API pauses.
    const runner = await createDatabase(server.db.url, { poolSize: 8 });
    await runner.dataSource.initialize();
    const to = new Date("2026-02-15T00:00:00Z");
    await runner.dataSource.query("UPDATE test_clocks SET frozen_time = ? WHERE id = ?", ["2026-02-15 00:00:00.000", s.clockId]);
    const engine = buildServices(
      runner,
      () => "http://localhost",
      () => to,
    ).engine;
    const [, paused] = await Promise.all([engine.closeDue(to, s.clockId, 8), Promise.all(subs.map((id) => s.raw("POST", `/subscriptions/${id}/pause`, {})))]);
    t.true(
      paused.every((r) => r.status === 200),
      JSON.stringify(paused.map((r) => r.status)),
    );
    const rows = (await runner.dataSource.query(
      "SELECT i.subscription_id AS sub, l.kind AS kind, SUM(l.quantity) AS q FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id GROUP BY i.subscription_id, l.kind",
    )) as { sub: string; kind: string; q: string }[];
    for (const id of subs) {
      const of = (kind: string) => Number(rows.find((r) => r.sub === id && r.kind === kind)?.q ?? 0);
      t.is(of("usage"), 7, `${id}: the usage billed once`);
      t.is(of("fixed"), 2, `${id}: the first cycle and the one the close opened, once each`);
    }
    await runner.dataSource.destroy();
  } finally {
    await server.stop();
  }
});
