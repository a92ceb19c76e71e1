/**
 * A subscription timeline's transition at the end of a cycle comes before that cycle's close
 * (Scheduler.runDue): a timeline whose last item ends on Feb 1 cancels its subscription then, and
 * February is never billed on the card it leaves. Two ways the close used to come first, each on
 * both stores, with a timeline of one item: Pro (10000 cents a month) from Jan 1 to Feb 1.
 * - A call on the subscription just after Feb 1, before the scheduler made the move (its
 *   catch-up, SubscriptionChanges.caughtUp): now 503 TIMELINE_TRANSITION_DUE, nothing billed; the
 *   scheduler then ends the subscription on Feb 1.
 * - The transition failing in a scheduler run (a trigger refuses its write here): the run's later
 *   close of everything due passes that subscription by, until its transition is made; a test
 *   clock's advance tries the move again for a while, then leaves the clock `advancing`.
 */
import test, { type ExecutionContext } from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };

/** A subscription following a one-item timeline (Pro, Jan 1 → Feb 1), paid; the scenario and its ID. */
async function onTimeline(server: TestServer): Promise<{ s: Scenario; id: string }> {
  const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
  const pro = await s.card({ name: "Pro", fixed_rates: [{ code: "seats", name: "Pro seats", price: { amount: { currency_code: "USD", value: 10000 } } }] });
  const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: pro });
  await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
    items: [{ period: { start: "2026-01-01T00:00:00Z", end: "2026-02-01T00:00:00Z" }, subscription_input: { rate_card_id: pro, fixed_rate_quantities: { seats: 1 } } }],
  });
  const started = await s.call("POST", `/subscription-timelines/${tl.id}/start`, callbacks);
  if (started.result.result_type === "requires_action") await s.payCheckout(started.result.action.checkout_url, CARD_OK);
  const id = (await s.call("GET", `/subscription-timelines/${tl.id}`)).subscription_id as string;
  return { s, id };
}

const totals = async (s: Scenario) => (await s.invoices()).map((i: Json) => [i.created_at, i.total_amount.value]);

/** Advances the clock to `at`, then checks the timeline cancelled the subscription and nothing but January was billed. */
async function advanceToCancelled(t: ExecutionContext, s: Scenario, id: string, at: string): Promise<void> {
  await s.advance(at);
  t.like(await s.call("GET", `/subscriptions/${id}`), { status: "cancelled" });
  t.deepEqual(
    (await totals(s)).filter(([, total]) => total !== "0"),
    [["2026-01-01T00:00:00Z", "10000"]],
    "nothing billed for February",
  );
}

const refuseCancel = (store: string) =>
  store === "mysql"
    ? "CREATE TRIGGER refuse_cancel BEFORE UPDATE ON subscriptions FOR EACH ROW BEGIN IF NEW.status = 'cancelled' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; END IF; END"
    : "CREATE TRIGGER refuse_cancel BEFORE UPDATE ON subscriptions WHEN NEW.status = 'cancelled' BEGIN SELECT RAISE(ABORT, 'refused'); END";

for (const store of STORES) {
  test(`${store}: a call just after a timeline's end, before the scheduler moved it on, bills nothing on the card it leaves`, async (t) => {
    const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
    try {
      const { s, id } = await onTimeline(server);
      t.deepEqual(await totals(s), [["2026-01-01T00:00:00Z", "10000"]]);
      // Feb 1 has passed on the clock; nothing ran yet (the scheduler's next tick).
      await withDatabase(server.db.url, (db) => db.dataSource.query("UPDATE test_clocks SET frozen_time = ?, status = 'advancing' WHERE id = ?", ["2026-02-01 00:00:02.000", s.clockId]));
      const patched = await s.raw("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 2 } });
      t.is(patched.status, 503, JSON.stringify(patched.body));
      t.is(patched.body.details?.[0]?.debug?.reason, "TIMELINE_TRANSITION_DUE");
      const cancelled = await s.raw("POST", `/subscriptions/${id}/cancel`, {});
      t.is(cancelled.status, 503, JSON.stringify(cancelled.body));
      t.deepEqual(await totals(s), [["2026-01-01T00:00:00Z", "10000"]], "February not billed on Pro");
      // The scheduler's run (an advance to the clock's own time): the timeline ends the subscription on Feb 1.
      await advanceToCancelled(t, s, id, "2026-02-01T00:00:02Z");
    } finally {
      await server.stop();
    }
  });

  test(`${store}: a timeline's transition that fails in a run holds its subscription's cycle close back until it is made`, async (t) => {
    const server = await startTestServer(store, { SCHEDULER_INTERVAL_MS: "0" });
    try {
      const { s, id } = await onTimeline(server);
      await withDatabase(server.db.url, (db) => db.dataSource.query(refuseCancel(store)));
      try {
        await s.advance("2026-02-10T00:00:00Z");
      } finally {
        await withDatabase(server.db.url, (db) => db.dataSource.query("DROP TRIGGER refuse_cancel"));
      }
      t.like(await s.call("GET", `/subscriptions/${id}`), { status: "active", current_period: { start: "2026-01-01T00:00:00Z" } }, "its cycle not closed on Pro");
      t.like(await s.call("GET", `/test-clocks/${s.clockId}`), { status: "advancing" }, "not everything due ran: the advance is not over");
      t.deepEqual(await totals(s), [["2026-01-01T00:00:00Z", "10000"]]);
      await advanceToCancelled(t, s, id, "2026-02-10T00:00:00Z");
    } finally {
      await server.stop();
    }
  });
}
