/**
 * What a cancelled subscription shows in `cancels_at_end_of_cycle`: false once it was cancelled
 * immediately (also when it had been flagged to cancel at the end of its cycle first); true when
 * it ended at the end of its cycle as asked (it records how it ended). Cancelling again is a 400
 * failed_precondition, not a lost race.
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

for (const store of STORES) {
  const server = useServer(store, { SCHEDULER_INTERVAL_MS: "0" });

  const freePlan = async (s: Scenario) => {
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] });
    return (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription;
  };

  test(`${store}: flagged to cancel at the end of the cycle, then cancelled now: cancels_at_end_of_cycle is false`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const sub = await freePlan(s);
    const flagged = await s.call("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true, reason: "too expensive" });
    t.like(flagged, { status: "active", cancels_at_end_of_cycle: true });
    await s.advance("2026-01-20T00:00:00Z");
    const now = await s.call("POST", `/subscriptions/${sub.id}/cancel`);
    t.like(now, { status: "cancelled", cancels_at_end_of_cycle: false });
    t.like(await s.call("GET", `/subscriptions/${sub.id}`), { status: "cancelled", cancels_at_end_of_cycle: false });
    const again = await s.raw("POST", `/subscriptions/${sub.id}/cancel`);
    t.is(again.status, 400);
    t.is(again.body.code, "failed_precondition");
  });

  test(`${store}: cancelled now without a flag: cancels_at_end_of_cycle is false`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const sub = await freePlan(s);
    t.like(await s.call("POST", `/subscriptions/${sub.id}/cancel`), { status: "cancelled", cancels_at_end_of_cycle: false });
  });

  test(`${store}: cancelled at the end of its cycle as asked: cancels_at_end_of_cycle stays true`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const sub = await freePlan(s);
    await s.call("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true });
    await s.advance("2026-02-15T00:00:00Z");
    t.like(await s.call("GET", `/subscriptions/${sub.id}`), { status: "cancelled", cancels_at_end_of_cycle: true });
    const again = await s.raw("POST", `/subscriptions/${sub.id}/cancel`, { cancel_at_end_of_cycle: true });
    t.is(again.status, 400);
    t.is(again.body.code, "failed_precondition");
  });
}
