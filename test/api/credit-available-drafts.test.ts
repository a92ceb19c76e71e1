/**
 * Billing state's available_credit (DESIGN §14) counts a previous period's invoice still a draft
 * in its grace period as a close that comes first: priced as its finalization will price it, it
 * takes, when it finalizes, what it will apply of the grants, before the current periods' closes.
 * Through the real server's API, on both stores and a test clock, one hour of grace.
 *
 * A card with one usage rate `api` at 10 per unit, period Jan 15 → Feb 15 (its draft finalizes at
 * 01:00), a low-balance threshold of 100.
 */
import test from "ava";
import { coupon, percentOff } from "../helpers/booking-bodies.js";
import { credited, creditState, eventTypes, promo, settings } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { flat, money, usageRate } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

const JAN = "2026-01-15T00:00:00Z";
const JAN_20 = "2026-01-20T00:00:00Z";
const JAN_21 = "2026-01-21T00:00:00Z";
const FEB_TEN_MINUTES = "2026-02-15T00:10:00Z";
const FEB_HALF_HOUR = "2026-02-15T00:30:00Z";
const FEB_16 = "2026-02-16T00:00:00Z";

const ALERTS = ["credit.balance_low", "credit.depleted"];

/** Alerts are also evaluated as the balance moves (a finalization): let those run. */
const settle = () => new Promise((r) => setTimeout(r, 500));

for (const store of STORES) {
  const server = useServer(store);

  async function start(grant: number, units: string): Promise<Scenario> {
    const s = await Scenario.start(server, JAN, { invoiceGraceSeconds: 3600 });
    const m = await s.metric();
    await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(m, flat(10))] }) });
    await promo(s, "grant", grant);
    await settings(s, { low_balance_threshold: money(100) });
    await s.events([[JAN_20, units]]);
    return s;
  }

  test.serial(`${store}: a draft in its grace period takes its credit first: the usage past the credit stays due, and the alerts fire once`, async (t) => {
    // A grant of 2,000, 250 units (2,500) on Jan 20: 500 past the credit.
    const s = await start(2000, "250");
    t.deepEqual(await creditState(s), ["2000", "-500"], "Jan 20");
    await s.advance(JAN_21);
    await settle();
    t.deepEqual(await eventTypes(s, ALERTS), ["credit.depleted", "credit.balance_low"]);
    await s.advance(FEB_HALF_HOUR);
    await settle();
    // The draft will apply 2,000 and leave 500 due: −500, not the balance of 2,000 (was 2,000, and both alerts re-armed).
    t.deepEqual(await credited(s), [["draft", "2500", [["grant", "2000"]], "500"]]);
    t.deepEqual(await creditState(s), ["2000", "-500"], "Feb 15 00:30, inside the grace");
    // New usage of the new period adds its cost: 10 units (100).
    await s.events([[FEB_TEN_MINUTES, "10"]]);
    t.deepEqual(await creditState(s), ["2000", "-600"], "Feb 15 00:30, with 100 of new usage");
    await s.advance(FEB_16);
    await settle();
    t.deepEqual(await credited(s), [["open", "2500", [["grant", "2000"]], "500"]]);
    t.deepEqual(await creditState(s), ["0", "-100"], "Feb 16: the new usage, no credit");
    // Once for the one depletion (was twice: re-armed inside the grace, fired again on Feb 16).
    t.deepEqual(await eventTypes(s, ALERTS), ["credit.depleted", "credit.balance_low"]);
  });

  test.serial(`${store}: a draft in its grace period takes what it will apply of the grant: what is left is available`, async (t) => {
    // A grant of 5,000, 200 units (2,000) on Jan 20: 3,000 left.
    const s = await start(5000, "200");
    t.deepEqual(await creditState(s), ["5000", "3000"], "Jan 20");
    await s.advance(FEB_HALF_HOUR);
    t.deepEqual(await credited(s), [["draft", "2000", [["grant", "2000"]], "0"]]);
    // Was 5,000: the draft's 2,000 counted nothing until it finalized.
    t.deepEqual(await creditState(s), ["5000", "3000"], "Feb 15 00:30, inside the grace");
    await s.advance(FEB_16);
    t.deepEqual(await credited(s), [["paid", "2000", [["grant", "2000"]], "0"]]);
    t.deepEqual(await creditState(s), ["3000", "3000"], "Feb 16");
  });

  test.serial(`${store}: two drafts and a subject-level "once" coupon: the coupon is counted once, the alert fires once`, async (t) => {
    // Two cards at 10 a unit, a grant of 5,000, 50% off once, 200 units on each (2,000 each): one close takes 1,000, the other 2,000.
    const s = await Scenario.start(server, JAN, { invoiceGraceSeconds: 3600 });
    const a = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "a");
    const b = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "b");
    await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(a, flat(10))] }) });
    await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(b, flat(10))] }) });
    await promo(s, "grant", 5000);
    await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: await coupon(s, "Once 50%", percentOff("50", "once")) });
    await settings(s, { low_balance_threshold: money(2500) });
    await s.events([[JAN_20, "200"]], "a");
    await s.events([[JAN_20, "200"]], "b");
    t.deepEqual(await creditState(s), ["5000", "2000"], "Jan 20");
    await s.advance(JAN_21);
    await settle();
    t.deepEqual(await eventTypes(s, ALERTS), ["credit.balance_low"]);
    await s.advance(FEB_HALF_HOUR);
    await settle();
    // Was 3,000: each draft was priced with the coupon (1,000 each).
    t.deepEqual(await creditState(s), ["5000", "2000"], "Feb 15 00:30, inside the grace");
    await s.advance(FEB_16);
    await settle();
    const totals = (await credited(s)).map((i) => i[1]).sort();
    t.deepEqual(totals, ["1000", "2000"]);
    t.deepEqual(await creditState(s), ["2000", "2000"], "Feb 16");
    // Once (was twice: re-armed inside the grace at 3,000, fired again on Feb 16).
    t.deepEqual(await eventTypes(s, ALERTS), ["credit.balance_low"]);
  });

  test.serial(`${store}: a cancelled subscription's draft in its grace counts beside an older active subscription`, async (t) => {
    // A (no usage) and B at 10 a unit from Jan 15, a grant of 5,000, 200 units on B (2,000): B cancelled on Jan 20.
    const s = await Scenario.start(server, JAN, { invoiceGraceSeconds: 3600 });
    const a = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "a");
    const b = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "b");
    await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(a, flat(10))] }) });
    const sb = (await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [usageRate(b, flat(10))] }) })).subscription.id;
    await promo(s, "grant", 5000);
    await s.events([["2026-01-16T00:00:00Z", "200"]], "b");
    await s.advance(JAN_20);
    t.deepEqual(await creditState(s), ["5000", "3000"], "Jan 20, before the cancel");
    await s.call("POST", `/subscriptions/${sb}/cancel`, {});
    await s.advance("2026-01-20T00:10:00Z");
    t.deepEqual(await credited(s), [["draft", "2000", [["grant", "2000"]], "0"]]);
    // Was 5,000: A's window began Jan 15, so the drafts were not read and B's was not counted.
    t.deepEqual(await creditState(s), ["5000", "3000"], "Jan 20 00:10, B's draft inside its grace");
  });
}
