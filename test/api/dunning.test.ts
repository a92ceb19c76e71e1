/**
 * Dunning and payments that need the customer (DESIGN §16) against the real server, on MariaDB
 * and SQLite, with the test provider's cards: a declined renewal is attempt 1 (next +3 days, the
 * event carrying both), a test-clock advance retries it (attempt 2, next +5), a new card from the
 * portal pays it at once (attempt 3); a schedule exhausted applies the environment's policy
 * (cancel, pause, leave_active) and marks the invoice uncollectible if so configured; a charge
 * that needs authentication is a failed attempt with a pay link, retried on the schedule, and the
 * hosted page's form completes it; a voided invoice is never retried. The environment's dunning is set through
 * PATCH /payment-settings.
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const CARD_FAILS = "4000 0000 0000 0341";
const CARD_NO_FUNDS = "4000 0000 0000 9995";
const CARD_AUTH = "4000 0025 0000 3155";
const usd = (value: string) => ({ currency_code: "USD", value });

const post = (server: TestServer, path: string, form: Record<string, string> = {}) =>
  fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(form).toString(), redirect: "manual" });

/** A subject paying 49.00 a month with a good card on file. */
async function subscribed(server: TestServer): Promise<{ s: Scenario; sub: Json }> {
  const s = await Scenario.start(server, AT);
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
  const { subscription } = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);
  return { s, sub: subscription };
}

const invoice = async (s: Scenario, id: string) => s.call("GET", `/invoices/${id}`);
const eventsOf = async (s: Scenario, type: string, id?: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => id === undefined || e.data.id === id);
const renewal = async (s: Scenario) => invoice(s, ((await s.invoices()).at(-1) as Json).id);

/** The environment's dunning, through PATCH /payment-settings. */
async function setDunning(s: Scenario, days: number[], afterLast: string, markUncollectible: boolean): Promise<void> {
  const r = await s.call("PATCH", "/payment-settings", { retry_schedule_days: days, set_retry_schedule: true, after_last_attempt: afterLast, mark_uncollectible: markUncollectible });
  if (r.after_last_attempt !== afterLast || r.mark_uncollectible !== markUncollectible) throw new Error(`PATCH /payment-settings: ${JSON.stringify(r)}`);
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a declined renewal is retried on the schedule by clock advances, then paid at once by a new card`, async (t) => {
    const { s } = await subscribed(server);
    await s.saveCardInPortal(CARD_FAILS);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewal(s);
    t.like(inv, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z", payment_url: null });
    const failed1 = await eventsOf(s, "invoice.payment_failed", inv.id);
    t.deepEqual(
      failed1.map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [[1, "2026-02-18T00:00:00Z"]],
    );
    // Not due yet: an advance short of it charges nothing.
    await s.advance("2026-02-17T23:59:59Z");
    t.is((await invoice(s, inv.id)).attempt_count, 1);
    await s.advance("2026-02-18T00:00:00Z");
    t.like(await invoice(s, inv.id), { status: "open", attempt_count: 2, next_payment_attempt: "2026-02-20T00:00:00Z" });
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [
        [1, "2026-02-18T00:00:00Z"],
        [2, "2026-02-20T00:00:00Z"],
      ],
    );
    await s.saveCardInPortal("5555 5555 5555 4444");
    t.like(await invoice(s, inv.id), { status: "paid", attempt_count: 3, next_payment_attempt: null });
    const paid = await eventsOf(s, "invoice.paid", inv.id);
    t.deepEqual(
      paid.map((e) => [e.data.status, e.data.attempt_count, e.data.next_payment_attempt]),
      [["paid", 3, null]],
    );
    // Paid: a later advance past the planned retry charges nothing more.
    await s.advance("2026-02-21T00:00:00Z");
    t.like(await invoice(s, inv.id), { status: "paid", attempt_count: 3 });
  });

  for (const [policy, markUncollectible, subscriptionStatus, event] of [
    ["cancel", true, "cancelled", "subscription.cancelled"],
    ["pause", false, "paused", "subscription.paused"],
    ["leave_active", true, "active", null],
  ] as const) {
    test(`${store}: after the last attempt: ${policy}${markUncollectible ? ", the invoice uncollectible" : ", the invoice left open"}`, async (t) => {
      const { s, sub } = await subscribed(server);
      await setDunning(s, [1, 2], policy, markUncollectible);
      await s.saveCardInPortal(CARD_NO_FUNDS);
      await s.advance("2026-02-15T00:00:00Z");
      const inv = await renewal(s);
      t.like(inv, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-16T00:00:00Z" });
      t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "active");
      // One advance past both retries runs them in order, each at its planned time.
      await s.advance("2026-02-20T00:00:00Z");
      const after = await invoice(s, inv.id);
      t.like(after, { status: markUncollectible ? "uncollectible" : "open", attempt_count: 3, next_payment_attempt: null });
      t.deepEqual(
        (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt, e.data.status]),
        [
          [1, "2026-02-16T00:00:00Z", "open"],
          [2, "2026-02-17T00:00:00Z", "open"],
          [3, null, markUncollectible ? "uncollectible" : "open"],
        ],
      );
      t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, subscriptionStatus);
      if (event) t.is((await eventsOf(s, event)).filter((e) => e.data.id === sub.id).length, 1);
      // Exhausted: nothing is retried any more.
      await s.advance("2026-02-25T00:00:00Z");
      t.is((await invoice(s, inv.id)).attempt_count, 3);
    });
  }

  test(`${store}: a charge needing authentication is a failed attempt with a pay link, retried on the schedule; the hosted page's form completes it`, async (t) => {
    const { s } = await subscribed(server);
    await s.saveCardInPortal(CARD_AUTH);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewal(s);
    t.like(inv, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z", payment_url: `${inv.hosted_url}#pay` });
    const waiting = await eventsOf(s, "invoice.payment_action_required", inv.id);
    t.is(waiting.length, 1);
    t.is(waiting[0]?.data.payment_url, `${inv.hosted_url}#pay`);
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [[1, "2026-02-18T00:00:00Z"]],
    );
    // Dunning retries it (each retry cancels the waiting payment first, and waits again): the last
    // attempt leaves it open (leave_active), its pay link still usable.
    await s.advance("2026-02-25T00:00:00Z");
    t.like(await invoice(s, inv.id), { status: "open", attempt_count: 4, next_payment_attempt: null, payment_url: `${inv.hosted_url}#pay` });
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [
        [1, "2026-02-18T00:00:00Z"],
        [2, "2026-02-20T00:00:00Z"],
        [3, "2026-02-22T00:00:00Z"],
        [4, null],
      ],
    );
    t.is((await eventsOf(s, "invoice.payment_action_required", inv.id)).length, 4);
    const path = new URL(inv.hosted_url).pathname;
    const page = await (await fetch(`${server.url}${path}`)).text();
    t.regex(page, /<section id="pay"/);
    t.true(page.includes(`<form method="post" action="${path}/pay"><button type="submit">Complete payment</button></form>`));
    const done = await post(server, `${path}/pay`);
    await done.body?.cancel();
    t.is(done.status, 303);
    t.is(done.headers.get("location"), path);
    t.like(await invoice(s, inv.id), { status: "paid", attempt_count: 4, payment_url: null });
    t.is((await eventsOf(s, "invoice.paid", inv.id)).length, 1);
    // The form again (a double submit): nothing more happens.
    const again = await post(server, `${path}/pay`);
    await again.body?.cancel();
    t.is(again.status, 303);
    t.is((await eventsOf(s, "invoice.paid", inv.id)).length, 1);
    t.notRegex(await (await fetch(`${server.url}${path}`)).text(), /Complete payment/);
  });

  test(`${store}: a voided invoice is never retried`, async (t) => {
    const { s } = await subscribed(server);
    await s.saveCardInPortal(CARD_FAILS);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewal(s);
    t.is(inv.attempt_count, 1);
    await s.call("POST", `/invoices/${inv.id}/void`, {});
    await s.advance("2026-02-25T00:00:00Z");
    t.like(await invoice(s, inv.id), { status: "void", attempt_count: 1 });
    t.is((await eventsOf(s, "invoice.payment_failed", inv.id)).length, 1);
    // Nor charged by a new card.
    await s.saveCardInPortal(CARD_OK);
    t.like(await invoice(s, inv.id), { status: "void", attempt_count: 1 });
  });
}
