/**
 * The billing engine over in-memory fakes of its ports: a cycle close bills usage in arrears and
 * the next cycle's fixed charges in advance, once; a close that fails sets that subscription
 * aside and bills the others. No database, no server.
 */
import test from "ava";
import { fixedRate, usageRate, world } from "../fakes/world.js";

const JAN = new Date("2026-01-15T00:00:00Z");
const FEB = new Date("2026-02-15T00:00:00Z");

test("a cycle close bills the usage of the period that ended and the fixed charges of the next, once", async (t) => {
  const w = world(JAN);
  w.metric("api");
  w.card("team", [fixedRate("seats", "10")], [usageRate("calls", "api", "0.5", "10")]);
  w.subject("subj_a", "succeeds");
  const sub = await w.subscribe("subj_a", "team", { seats: "2" });
  t.deepEqual(
    w.invoicesOf(sub.id).map((i) => [i.periodKey, i.total, i.status]),
    [["cycle:0", "20", "paid"]],
    "the first cycle's fixed charges in advance, charged to the saved card",
  );

  w.usage.record("api", "subj_a", new Date("2026-01-20T00:00:00Z"), "12.5");
  w.usage.record("api", "subj_a", new Date("2026-02-10T00:00:00Z"), "10");
  w.usage.record("api", "subj_a", FEB, "1000"); // the next cycle's: not billed by this close
  w.moveTo(FEB);
  t.is(await w.scheduler.runDue(FEB, null), 1);
  const closing = w.invoicesOf(sub.id).find((i) => i.periodKey === "cycle:1");
  t.truthy(closing);
  t.deepEqual(
    closing?.lines.map((l) => [l.description, l.quantity, l.unitAmount, l.amount]),
    [
      ["seats", "2", "10", "20"],
      // 22.5 used − 10 included at 0.5: 6.25, rounded once per line to the smallest unit.
      ["calls", "12.5", "0.5", "6"],
    ],
  );
  t.is(closing?.status, "paid");
  t.deepEqual([closing?.periodStart, closing?.periodEnd], [FEB, new Date("2026-03-15T00:00:00Z")]);
  const after = w.subscription(sub.id);
  t.deepEqual([after.cycleIndex, after.periodStart, after.periodEnd, after.usageSince], [1, FEB, new Date("2026-03-15T00:00:00Z"), FEB]);

  t.is(await w.scheduler.runDue(FEB, null), 0, "a second run finds nothing due");
  t.is(w.invoicesOf(sub.id).length, 2, "and bills nothing twice");
});

test("a time jump closes every cycle it passes, one invoice each", async (t) => {
  const w = world(JAN);
  w.card("basic", [fixedRate("base", "5")]);
  w.subject("subj_b", "succeeds");
  const sub = await w.subscribe("subj_b", "basic", { base: "1" });
  const may = new Date("2026-05-15T00:00:00Z");
  w.moveTo(may);
  t.is(await w.scheduler.runDue(may, null), 4);
  t.deepEqual(
    w.invoicesOf(sub.id).map((i) => i.periodKey),
    ["cycle:0", "cycle:1", "cycle:2", "cycle:3", "cycle:4"],
  );
  t.is(w.subscription(sub.id).cycleIndex, 4);
});

test("a close that fails sets that subscription aside, bills the others, and retries only after its backoff", async (t) => {
  const w = world(JAN);
  w.card("basic", [fixedRate("base", "5")]);
  w.subject("subj_ok", "succeeds");
  w.subject("subj_bad", "succeeds");
  const ok = await w.subscribe("subj_ok", "basic", { base: "1" });
  const bad = await w.subscribe("subj_bad", "basic", { base: "1" });
  // The database refuses what is written for one subscription (as a refused value would).
  w.stores.fault = (write, arg) => {
    if (write === "insertInvoices" && (arg as { subscriptionId: string }[]).some((i) => i.subscriptionId === bad.id)) throw new Error("refused by the database");
  };
  w.moveTo(FEB);
  t.is(await w.scheduler.runDue(FEB, null), 1, "the healthy subscription's cycle closes");
  t.is(w.subscription(ok.id).cycleIndex, 1);

  const aside = w.subscription(bad.id);
  t.is(aside.cycleIndex, 0, "the failing one stays in its cycle");
  t.is(aside.status, "active");
  t.is(aside.billingFailure?.attempts, 1);
  t.regex(aside.billingFailure?.message ?? "", /^internal error at 2026-02-15T00:00:00.000Z; the server log has the cause$/);
  t.true((aside.billingFailure?.retryAt.getTime() ?? 0) > FEB.getTime(), "retried after a backoff");
  t.deepEqual(
    w.setAside.map((x) => x.subscription.id),
    [bad.id],
    "and it is reported",
  );
  t.deepEqual(
    w.invoicesOf(bad.id).map((i) => i.periodKey),
    ["cycle:0"],
    "nothing of the failed close is written",
  );

  w.stores.fault = () => {};
  t.is(await w.scheduler.runDue(FEB, null), 0, "not due again before its retry time");
  w.moveTo(new Date((aside.billingFailure?.retryAt.getTime() ?? 0) + 1));
  t.is(await w.scheduler.runDue(FEB, null), 1, "closed once its retry time has passed");
  t.is(w.subscription(bad.id).cycleIndex, 1);
  t.is(w.subscription(bad.id).billingFailure, null, "and no longer set aside");
});

test("an invoice whose charge fails stays open; the cycle still closes", async (t) => {
  const w = world(JAN);
  w.card("basic", [fixedRate("base", "5")]);
  w.subject("subj_c", "charge_fails");
  const sub = await w.subscribe("subj_c", "basic", { base: "1" });
  w.moveTo(FEB);
  t.is(await w.scheduler.runDue(FEB, null), 1);
  t.deepEqual(
    w.invoicesOf(sub.id).map((i) => [i.periodKey, i.status]),
    [
      ["cycle:0", "open"],
      ["cycle:1", "open"],
    ],
  );
});
