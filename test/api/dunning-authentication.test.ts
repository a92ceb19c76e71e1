/**
 * Dunning through the real server, on MariaDB and SQLite (DESIGN §8, §16): a charge that needs
 * the customer's authentication is a failed attempt on the schedule like a decline (retried, each
 * retry cancelling the waiting payment first, the policy after the last), and a test-clock
 * advance past several retries and a cycle end runs each retry at its own time before that cycle
 * closes, the policy acting then.
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const CARD_AUTH = "4000 0025 0000 3155";
const CARD_FAILS = "4000 0000 0000 0341";

/** A subject paying 49.00 a month plus 1.00 a unit of usage, with a good card on file. */
async function subscribed(server: TestServer): Promise<{ s: Scenario; sub: Json }> {
  const s = await Scenario.start(server, AT);
  const m = await s.metric();
  const card = await s.card({ fixed_rates: [seats(4900)], usage_based_rates: [simple(m, usd("100"))] });
  const { subscription } = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);
  return { s, sub: subscription };
}

const invoice = (s: Scenario, id: string) => s.call("GET", `/invoices/${id}`);
const eventsOf = async (s: Scenario, type: string, id?: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => id === undefined || e.data.id === id);
const renewalOf = async (s: Scenario, start: string) => (await s.invoices()).find((i) => i.period_start === start) as Json;

async function setDunning(s: Scenario, days: number[], afterLast: string, markUncollectible: boolean): Promise<void> {
  await s.call("PATCH", "/payment-settings", { retry_schedule_days: days, set_retry_schedule: true, after_last_attempt: afterLast, mark_uncollectible: markUncollectible });
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a renewal whose every charge needs authentication, never completed, is retried on the schedule and cancelled after the last attempt`, async (t) => {
    const { s, sub } = await subscribed(server);
    await setDunning(s, [1, 2], "cancel", true);
    await s.saveCardInPortal(CARD_AUTH);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewalOf(s, "2026-02-15T00:00:00Z");
    // Attempt 1 failed for want of the customer: the next planned, the pay link usable meanwhile.
    t.like(inv, { status: "open", attempt_count: "1", next_payment_attempt: "2026-02-16T00:00:00Z", payment_url: `${inv.hosted_url}#pay` });
    const waiting = await eventsOf(s, "invoice.payment_action_required", inv.id);
    t.deepEqual(
      waiting.map((e) => [e.data.attempt_count, e.data.next_payment_attempt, e.data.payment_url]),
      [[1, "2026-02-16T00:00:00Z", `${inv.hosted_url}#pay`]],
    );
    await s.advance("2026-02-20T00:00:00Z");
    t.like(await invoice(s, inv.id), { status: "uncollectible", attempt_count: 3, next_payment_attempt: null, payment_url: null });
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt, e.data.status]),
      [
        [1, "2026-02-16T00:00:00Z", "open"],
        [2, "2026-02-17T00:00:00Z", "open"],
        [3, null, "uncollectible"],
      ],
    );
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "cancelled");
    t.is((await eventsOf(s, "subscription.cancelled")).filter((e) => e.data.id === sub.id).length, 1);
    // Exhausted: nothing more, and no renewal after the cancel.
    await s.advance("2026-03-20T00:00:00Z");
    t.is((await invoice(s, inv.id)).attempt_count, 3);
    t.is(await renewalOf(s, "2026-03-15T00:00:00Z"), undefined);
  });

  test(`${store}: one advance past the retries and the next cycle's end cancels on the last retry's day, the next cycle never billed`, async (t) => {
    const { s, sub } = await subscribed(server);
    await setDunning(s, [3, 5, 7], "cancel", false);
    await s.saveCardInPortal(CARD_FAILS);
    // Day 0: the renewal is declined (attempt 1, next on day 3); usage on the new period follows.
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewalOf(s, "2026-02-15T00:00:00Z");
    t.like(inv, { status: "open", attempt_count: "1", next_payment_attempt: "2026-02-18T00:00:00Z" });
    await s.events([["2026-02-15T00:00:00Z", "2"]]);
    // Day 40 in one call: the retries of days 3, 5 and 7 run before the cycle of day 28 closes.
    await s.advance("2026-03-27T00:00:00Z");
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [
        [1, "2026-02-18T00:00:00Z"],
        [2, "2026-02-20T00:00:00Z"],
        [3, "2026-02-22T00:00:00Z"],
        [4, null],
      ],
    );
    const after = await s.call("GET", `/subscriptions/${sub.id}`);
    t.is(after.status, "cancelled");
    // Cancelled on day 7: its final invoice bills the usage up to then, and no cycle after it.
    const invoices = await s.invoices();
    t.deepEqual(
      invoices.map((i) => [i.period_start, i.period_end]),
      [
        [AT, "2026-02-15T00:00:00Z"],
        ["2026-02-15T00:00:00Z", "2026-03-15T00:00:00Z"],
        ["2026-02-15T00:00:00Z", "2026-02-22T00:00:00Z"],
      ],
    );
    t.deepEqual(
      (invoices.at(-1) as Json).line_items.map((l: Json) => [l.kind, l.quantity]),
      [["usage", "2"]],
    );
    t.is(await renewalOf(s, "2026-03-15T00:00:00Z"), undefined);
  });

  test(`${store}: one advance through the renewal's declined first charge, its retries and the next cycle's end cancels on the last retry's day`, async (t) => {
    const { s, sub } = await subscribed(server);
    await setDunning(s, [3, 5, 7], "cancel", false);
    await s.saveCardInPortal(CARD_FAILS);
    // From Jan 15 to day 40 in one call: the renewal of Feb 15 is declined in it (attempt 1), its retries of
    // days 3, 5 and 7 run before the cycle of Mar 15 closes. The old code closed Mar 15 before any retry was
    // planned: a renewal of 4,900 more billed and charged, and the cancel made on Mar 27.
    await s.advance("2026-03-27T00:00:00Z");
    const inv = await renewalOf(s, "2026-02-15T00:00:00Z");
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [
        [1, "2026-02-18T00:00:00Z"],
        [2, "2026-02-20T00:00:00Z"],
        [3, "2026-02-22T00:00:00Z"],
        [4, null],
      ],
    );
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "cancelled");
    t.deepEqual(
      (await s.invoices()).map((i) => [i.period_start, i.period_end]),
      [
        [AT, "2026-02-15T00:00:00Z"],
        ["2026-02-15T00:00:00Z", "2026-03-15T00:00:00Z"],
        ["2026-02-15T00:00:00Z", "2026-02-22T00:00:00Z"],
      ],
    );
    t.is(await renewalOf(s, "2026-03-15T00:00:00Z"), undefined);
  });

  test(`${store}: a paused subscription's retries due before its resume run first: cancelled on the last retry's day, never resumed`, async (t) => {
    const { s, sub } = await subscribed(server);
    await setDunning(s, [3, 5, 7], "cancel", false);
    await s.saveCardInPortal(CARD_FAILS);
    // Feb 15: the renewal is declined (attempt 1, next Feb 18); paused on Feb 16 until Mar 1.
    await s.advance("2026-02-16T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/pause`, { resumes_at: "2026-03-01T00:00:00Z" });
    // To Mar 10 in one call: the retries of Feb 18, 20 and 22 run before the resume of Mar 1, and the last one's
    // policy cancels the subscription on Feb 22. The old code resumed it on Mar 1 first (a new period from Mar 1).
    await s.advance("2026-03-10T00:00:00Z");
    const inv = await renewalOf(s, "2026-02-15T00:00:00Z");
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_failed", inv.id)).map((e) => [e.data.attempt_count, e.data.next_payment_attempt]),
      [
        [1, "2026-02-18T00:00:00Z"],
        [2, "2026-02-20T00:00:00Z"],
        [3, "2026-02-22T00:00:00Z"],
        [4, null],
      ],
    );
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "cancelled");
    t.is((await eventsOf(s, "subscription.resumed")).filter((e) => e.data.id === sub.id).length, 0);
    t.deepEqual(
      (await s.invoices()).filter((i) => i.period_start >= "2026-03-01T00:00:00Z").map((i) => i.period_start),
      [],
    );
  });
}
