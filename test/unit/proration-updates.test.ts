/**
 * UpdateSubscription through the real use cases over in-memory fakes of their ports: the event it
 * emits, a request that changes nothing, a row that moved under the change (the fence), and a live
 * environment without a payment provider. No database, no server. Amounts in cents.
 */
import test from "ava";
import { BillingError } from "../../src/billing/errors.js";
import { systemCaller } from "../../src/billing/tenancy.js";
import { ENV, fixedRate, world } from "../fakes/world.js";

const JAN = new Date("2026-01-01T00:00:00Z");
/** Jan 17 → Feb 1 is 15 of January's 31 days. */
const JAN_17 = new Date("2026-01-17T00:00:00Z");

async function subscribed(seats = "2") {
  const w = world(JAN);
  w.card("card_a", [fixedRate("seats", "1000")]);
  w.subject("subj_a", "succeeds");
  const sub = await w.subscribe("subj_a", "card_a", { seats });
  w.moveTo(JAN_17);
  return { w, sub };
}

const input = (seats: string, extra: Partial<{ metadata: Record<string, string>; prorationBehavior: string }> = {}) => ({
  fixedRateQuantities: { seats },
  rateMultipliers: {},
  metadata: {},
  prorationBehavior: "",
  ...extra,
});

const eventTypes = (w: ReturnType<typeof world>) => [...w.stores.state.events.values()].map((e) => e.type);

test("an update emits subscription.updated with the new terms, in the transaction that writes them", async (t) => {
  const { w, sub } = await subscribed();
  const before = w.stores.state.events.size;
  const r = await w.changes.update(w.caller, sub.id, input("3", { metadata: { team: "core" } }));
  const events = [...w.stores.state.events.values()].slice(before);
  t.deepEqual(
    events.map((e) => e.type),
    ["invoice.created", "invoice.finalized", "subscription.updated", "invoice.paid"],
  );
  t.deepEqual(w.subscription(sub.id).fixedRateQuantities, { seats: "3" });
  t.deepEqual(w.subscription(sub.id).metadata, { team: "core" });
  // 1000 × 15/31 = 483.87… → 484
  t.deepEqual([r.prorationInvoice?.status, r.prorationInvoice?.total], ["paid", "484"]);
});

test("a request that changes nothing writes nothing and emits nothing", async (t) => {
  const { w, sub } = await subscribed();
  const events = eventTypes(w);
  const writes: string[] = [];
  w.stores.fault = (name) => void writes.push(name);
  const r = await w.changes.update(w.caller, sub.id, input("2.000", { metadata: { absent: "" } }));
  t.deepEqual([r.prorationInvoice, writes, eventTypes(w)], [undefined, [], events]);
});

test("a row changed under the update (another change committed first) makes it start over from the fresh row", async (t) => {
  const { w, sub } = await subscribed("2");
  // Another change commits between this update's read and its lock: 2 → 4 seats.
  const original = w.stores.transaction.bind(w.stores);
  let first = true;
  w.stores.transaction = (fn) => {
    if (first) {
      first = false;
      const row = w.stores.state.subscriptions.get(sub.id);
      if (row) row.fixedRateQuantities = { seats: "4" };
    }
    return original(fn);
  };
  const r = await w.changes.update(w.caller, sub.id, input("3"));
  // Retried from the fresh row: 4 → 3 is a decrease, (3 − 4) × 1000 × 15/31 = −483.87… → −484, carried; no invoice.
  t.is(r.prorationInvoice, undefined);
  t.deepEqual(w.subscription(sub.id).prorationCredits, [{ description: "seats: 4 → 3 (remaining 15 of 31 days)", amount: "-484" }]);
});

test("a live environment without a payment provider: an increase is refused, a decrease is carried", async (t) => {
  const { w, sub } = await subscribed("2");
  const live = systemCaller(ENV, "live");
  const up = await t.throwsAsync(w.changes.update(live, sub.id, input("3")));
  t.true(up instanceof BillingError);
  t.regex(up?.message ?? "", /no payment provider/);
  t.deepEqual(w.subscription(sub.id).fixedRateQuantities, { seats: "2" });
  const down = await w.changes.update(live, sub.id, input("1"));
  t.is(down.prorationInvoice, undefined);
  // −1000 × 15/31 → −484
  t.deepEqual(w.subscription(sub.id).prorationCredits, [{ description: "seats: 2 → 1 (remaining 15 of 31 days)", amount: "-484" }]);
});

test("proration_behavior none changes the terms only; the next cycle's invoice charges them", async (t) => {
  const { w, sub } = await subscribed("2");
  const r = await w.changes.update(w.caller, sub.id, input("5", { prorationBehavior: "none" }));
  t.is(r.prorationInvoice, undefined);
  w.moveTo(new Date("2026-02-01T00:00:00Z"));
  await w.engine.closeDue(w.now(), null);
  t.deepEqual(
    w.invoicesOf(sub.id).map((i) => i.total),
    ["2000", "5000"],
  );
});
