/**
 * DESIGN §16: the last dunning attempt of a renewal whose charge needs the customer's
 * authentication, through the real server on both stores (test provider):
 * - its policy (cancel) left pending while the payment waits (the process died, or the cancel
 *   threw, after the attempt committed: the row as recordDecisions writes it, open, due, the
 *   policy pending, the payment waiting): the next run applies the policy (the subscription
 *   cancelled, the invoice uncollectible, the waiting payment cancelled); it used to skip the
 *   invoice on every run because its payment waited;
 * - the customer pays on the pay link meanwhile: the invoice paid, the policy dropped, the
 *   subscription left active (it used to be cancelled right after the payment);
 * - under cancel + mark_uncollectible, the last attempt announces no pay link
 *   (invoice.payment_action_required) for an invoice it makes uncollectible;
 * - a first charge that is also the last attempt (no retries, leave_active, uncollectible) has its
 *   waiting payment cancelled at once, not left payable until the sweep.
 */
import test from "ava";
import { dbTime } from "../../src/db/raw.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import { paymentState } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const CARD_AUTH = "4000 0025 0000 3155";
const usd = (value: string) => ({ currency_code: "USD", value });
const RATES = { fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] };

async function setDunning(s: Scenario, days: number[], afterLast: string, markUncollectible: boolean): Promise<void> {
  const r = await s.call("PATCH", "/payment-settings", { retry_schedule_days: days, set_retry_schedule: true, after_last_attempt: afterLast, mark_uncollectible: markUncollectible });
  if (r.after_last_attempt !== afterLast || r.mark_uncollectible !== markUncollectible) throw new Error(`PATCH /payment-settings: ${JSON.stringify(r)}`);
}

const renewalOf = async (s: Scenario) => (await s.invoices()).find((i) => i.period_start === "2026-02-15T00:00:00Z") as Json;
const eventsOf = async (s: Scenario, type: string, id: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => e.data.id === id);

/** A subscription whose renewal's charges need authentication, its cards on the test provider. */
async function subscribed(server: TestServer, days: number[], afterLast: string, markUncollectible: boolean): Promise<{ s: Scenario; sub: Json }> {
  const s = await Scenario.start(server, AT);
  await setDunning(s, days, afterLast, markUncollectible);
  const { subscription } = await s.subscribe({ rate_card_id: await s.card(RATES), fixed_rate_quantities: { platform: 1 }, create_checkout_session: "always" }, CARD_OK);
  await s.saveCardInPortal(CARD_AUTH);
  return { s, sub: subscription };
}

/**
 * The renewal's last attempt (day 1) waits for the customer with its cancel policy pending, as
 * recordDecisions commits it before finishLast: the policy never applied (afterLast threw, or the
 * process died). Made with leave_active (no policy runs), then the row given the pending policy.
 */
async function pendingWhileWaiting(server: TestServer): Promise<{ s: Scenario; sub: Json; inv: Json }> {
  const { s, sub } = await subscribed(server, [1], "leave_active", false);
  await s.advance("2026-02-15T00:00:00Z");
  const inv = await renewalOf(s);
  await s.advance("2026-02-16T00:00:00Z");
  must(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 2 });
  await setDunning(s, [1], "cancel", true);
  await withDatabase(server.db.url, async (db) => {
    const [row] = await db.dataSource.query("SELECT payment_state AS p FROM invoices WHERE id = ?", [inv.id]);
    const payment = { ...JSON.parse(String(row.p)), pendingPolicy: { policy: "cancel", markUncollectible: true } };
    if (!payment.actionRequired) throw new Error(`the last attempt does not wait: ${row.p}`);
    await db.dataSource.query("UPDATE invoices SET payment_state = ?, next_payment_attempt = ? WHERE id = ?", [JSON.stringify(payment), dbTime(new Date("2026-02-16T00:00:00Z")), inv.id]);
  });
  return { s, sub, inv };
}

function must(actual: Json, expected: Json): void {
  for (const [k, v] of Object.entries(expected)) if (actual[k] !== v) throw new Error(`${k}: ${JSON.stringify(actual[k])}, expected ${JSON.stringify(v)}`);
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a last attempt's policy left pending while its payment waits is applied by the next run`, async (t) => {
    const { s, sub, inv } = await pendingWhileWaiting(server);
    await s.advance("2026-02-17T00:00:00Z");
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "cancelled");
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "uncollectible", attempt_count: 2, next_payment_attempt: null, payment_url: null });
    const state = await paymentState(server.db.url, inv.id);
    t.like(state, { pendingPolicy: null, cancel: null, actionRequired: false, next: null });
    t.is(state.cancelled, state.reference, "the waiting payment cancelled at the provider");
  });

  test(`${store}: paying on the pay link after the last attempt, its policy pending, leaves the subscription active`, async (t) => {
    const { s, sub, inv } = await pendingWhileWaiting(server);
    const res = await fetch(`${server.url}${new URL(inv.hosted_url).pathname}/pay`, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "" });
    await res.body?.cancel();
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid" });
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "active");
    t.falsy((await paymentState(server.db.url, inv.id)).pendingPolicy, "no policy left for a paid invoice");
    await s.advance("2026-02-17T00:00:00Z");
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "active");
    t.is((await eventsOf(s, "subscription.cancelled", sub.id)).length, 0);
  });

  test(`${store}: the last attempt needing authentication under cancel + uncollectible announces no pay link`, async (t) => {
    const { s, sub } = await subscribed(server, [1], "cancel", true);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewalOf(s);
    await s.advance("2026-02-16T00:00:00Z");
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "uncollectible", attempt_count: 2 });
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "cancelled");
    t.deepEqual(
      (await eventsOf(s, "invoice.payment_action_required", inv.id)).map((e) => e.data.attempt_count),
      [1],
      "only the first attempt's pay link",
    );
  });

  test(`${store}: a first charge that is the last attempt (no retries, leave_active, uncollectible) has its waiting payment cancelled at once`, async (t) => {
    const { s, sub } = await subscribed(server, [], "leave_active", true);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = await renewalOf(s);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "uncollectible", attempt_count: 1, payment_url: null });
    t.is((await s.call("GET", `/subscriptions/${sub.id}`)).status, "active");
    const state = await paymentState(server.db.url, inv.id);
    t.truthy(state.reference);
    t.like(state, { cancel: null, actionRequired: false, next: null });
    t.is(state.cancelled, state.reference, "cancelled after the commit, not left for the sweep");
  });
}
