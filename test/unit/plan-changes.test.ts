/**
 * Changing a subscription's rate card and cancelling it, through the real use cases over
 * in-memory fakes of their ports: what is invoiced, what the subscription becomes, and what a
 * change without a card on file asks for. No database, no server.
 */
import test from "ava";
import { fixedRate, usageRate, world } from "../fakes/world.js";

const JAN = new Date("2026-01-01T00:00:00Z");
/** Halfway through January's 31 days. */
const MID_JAN = new Date("2026-01-16T12:00:00Z");

function plans(w: ReturnType<typeof world>) {
  w.metric("api");
  w.card("small", [fixedRate("seats", "10")], [usageRate("calls", "api", "1")]);
  w.card("large", [fixedRate("seats", "30")], [usageRate("calls", "api", "1")]);
  w.card("yearly", [fixedRate("seats", "30")]).billingInterval = "yearly";
  w.card("free", []);
}

/** A world with the plans above where `subjectId` (with a saved card that pays) is subscribed to `card` at `seats`. */
async function subscribed(subjectId: string, card = "small", seats = "1", saved: "succeeds" | null = "succeeds") {
  const w = world(JAN);
  plans(w);
  w.subject(subjectId, saved ?? undefined);
  const sub = await w.subscribe(subjectId, card, card === "free" ? {} : { seats });
  return { w, sub };
}

test("an upgrade mid-cycle invoices the old card's usage so far and the prorated difference, then runs on the new card", async (t) => {
  const { w, sub } = await subscribed("subj_a", "small", "2");
  w.usage.record("api", "subj_a", new Date("2026-01-10T00:00:00Z"), "7");
  w.moveTo(MID_JAN);

  const r = await w.changes.changeRateCard(w.caller, sub.id, { rateCardId: "large", behavior: "prorate" });
  t.is(r.kind, "success");
  const change = w.invoicesOf(sub.id).find((i) => i.periodKey.startsWith("change:"));
  t.deepEqual(
    change?.lines.map((l) => [l.description, l.quantity, l.amount]),
    [
      ["calls", "7", "7"],
      // small's 2 × 10 credited and large's 2 × 30 charged, each for half the period left: −10 + 30 = 20.
      ["Unused time on small (prorated: 50% of the period left)", "1", "-10"],
      ["Remaining time on large (prorated: 50% of the period left)", "1", "30"],
    ],
  );
  t.is(change?.status, "paid");
  const after = w.subscription(sub.id);
  t.deepEqual([after.rateCardId, after.usageSince, after.fixedRateQuantities], ["large", MID_JAN, { seats: "2" }], "the quantities of shared codes carry over");

  // The cycle close bills the new card's fixed charges and only the usage since the change.
  w.usage.record("api", "subj_a", new Date("2026-01-20T00:00:00Z"), "3");
  const FEB = new Date("2026-02-01T00:00:00Z");
  w.moveTo(FEB);
  t.is(await w.scheduler.runDue(FEB, null), 1);
  const closing = w.invoicesOf(sub.id).find((i) => i.periodKey === "cycle:1");
  t.deepEqual(
    closing?.lines.map((l) => [l.description, l.quantity, l.amount]),
    [
      ["seats", "2", "60"],
      ["calls", "3", "3"],
    ],
  );
});

test("rate_difference charges the whole difference; a downgrade charges none", async (t) => {
  const { w, sub: up } = await subscribed("subj_b", "small", "1");
  w.moveTo(MID_JAN);
  await w.changes.changeRateCard(w.caller, up.id, { rateCardId: "large", behavior: "rate_difference" });
  t.deepEqual(
    w
      .invoicesOf(up.id)
      .find((i) => i.periodKey.startsWith("change:"))
      ?.lines.map((l) => [l.description, l.amount]),
    [
      ["Rate difference: credit for small", "-10"],
      ["Rate difference: charge for large", "30"],
    ],
  );

  await w.changes.changeRateCard(w.caller, up.id, { rateCardId: "small", behavior: "" });
  const changes = w.invoicesOf(up.id).filter((i) => i.periodKey.startsWith("change:"));
  t.is(changes.length, 1, "a downgrade with no usage since the last change invoices nothing");
  t.is(w.subscription(up.id).rateCardId, "small");
});

test("an upgrade without a card on file asks for a checkout and changes nothing yet", async (t) => {
  const { w, sub } = await subscribed("subj_c", "free", "", null);
  w.moveTo(MID_JAN);
  const r = await w.changes.changeRateCard(w.caller, sub.id, { rateCardId: "large", behavior: "prorate", callbacks: { successUrl: "https://example.com/ok", cancelledUrl: "https://example.com/no" } });
  t.is(r.kind, "requires_action");
  t.regex(r.kind === "requires_action" ? r.checkoutUrl : "", /^http:\/\/billing\.test\/hosted\/checkout\/[0-9A-Za-z]{40}$/);
  t.is(w.subscription(sub.id).rateCardId, "free");
  const [session] = [...w.stores.state.checkouts.values()];
  t.deepEqual([session?.kind, session?.status, session?.amountDue], ["change", "open", "15"], "a prorated upgrade of 30 with half the period left");
});

test("a change to a card of another interval or to the same card is refused", async (t) => {
  const { w, sub } = await subscribed("subj_d", "small", "1");
  await t.throwsAsync(w.changes.changeRateCard(w.caller, sub.id, { rateCardId: "yearly", behavior: "" }), { message: "the new rate card is yearly; the subscription is monthly" });
  await t.throwsAsync(w.changes.changeRateCard(w.caller, sub.id, { rateCardId: "small", behavior: "" }), { message: "the subscription is already on this rate card" });
  t.is(w.invoicesOf(sub.id).length, 1, "nothing invoiced");
});

test("cancelling now bills the usage since the last invoice, and no fixed charges", async (t) => {
  const { w, sub } = await subscribed("subj_e", "small", "1");
  w.usage.record("api", "subj_e", new Date("2026-01-05T00:00:00Z"), "4");
  w.moveTo(MID_JAN);
  const cancelled = await w.changes.cancel(w.caller, sub.id, { reason: "moving on" });
  t.deepEqual([cancelled.status, cancelled.cancelledAt, cancelled.cancelReason], ["cancelled", MID_JAN, "moving on"]);
  const final = w.invoicesOf(sub.id).find((i) => i.periodKey === "final");
  t.deepEqual(
    final?.lines.map((l) => [l.description, l.amount]),
    [["calls", "4"]],
  );
  t.deepEqual([final?.periodStart, final?.periodEnd], [JAN, MID_JAN]);
  const FEB = new Date("2026-02-01T00:00:00Z");
  w.moveTo(FEB);
  t.is(await w.scheduler.runDue(FEB, null), 0, "a cancelled subscription has no cycle to close");
});

test("cancelling at the end of the cycle bills that cycle's usage and no next fixed charges", async (t) => {
  const { w, sub } = await subscribed("subj_f", "small", "1");
  w.usage.record("api", "subj_f", new Date("2026-01-20T00:00:00Z"), "2");
  w.moveTo(MID_JAN);
  const flagged = await w.changes.cancel(w.caller, sub.id, { atEndOfCycle: true, reason: "" });
  t.deepEqual([flagged.status, flagged.cancelsAtEndOfCycle], ["active", true]);
  const FEB = new Date("2026-02-01T00:00:00Z");
  w.moveTo(FEB);
  t.is(await w.scheduler.runDue(FEB, null), 1);
  t.deepEqual(
    w
      .invoicesOf(sub.id)
      .find((i) => i.periodKey === "cycle:1")
      ?.lines.map((l) => [l.description, l.amount]),
    [["calls", "2"]],
  );
  t.deepEqual([w.subscription(sub.id).status, w.subscription(sub.id).cancelledAt], ["cancelled", FEB]);
});

test("the preview of a change shows what the change then invoices, and writes nothing", async (t) => {
  const { w, sub } = await subscribed("subj_p", "small", "2");
  w.usage.record("api", "subj_p", new Date("2026-01-10T00:00:00Z"), "7");
  w.moveTo(MID_JAN);
  const before = [w.invoicesOf(sub.id).length, w.subscription(sub.id)];
  const p = await w.changes.previewChange(w.caller, sub.id, { rateCardId: "large", behavior: "prorate" });
  t.deepEqual(
    p.lines.map((l) => [l.description, l.quantity, l.amount]),
    [
      ["calls", "7", "7"],
      ["Unused time on small (prorated: 50% of the period left)", "1", "-10"],
      ["Remaining time on large (prorated: 50% of the period left)", "1", "30"],
    ],
  );
  t.deepEqual([p.total, p.upgrade, p.needsCheckout, p.from.id, p.to.id], ["27", "20", false, "small", "large"]);
  t.deepEqual([w.invoicesOf(sub.id).length, w.subscription(sub.id)], before, "nothing written");
  t.is((await w.changes.previewChange(w.caller, sub.id, { rateCardId: "large", behavior: "rate_difference" })).upgrade, "40");
  t.is((await w.changes.previewChange(w.caller, sub.id, { rateCardId: "free", behavior: "" })).upgrade, "0", "a downgrade charges nothing");

  await w.changes.changeRateCard(w.caller, sub.id, { rateCardId: "large", behavior: "prorate" });
  const change = w.invoicesOf(sub.id).find((i) => i.periodKey.startsWith("change:"));
  t.deepEqual(
    change?.lines.map((l) => [l.description, l.quantity, l.amount]),
    p.lines.map((l) => [l.description, l.quantity, l.amount]),
  );
});

test("the preview refuses what the change refuses, and does not close a due cycle itself", async (t) => {
  const { w, sub } = await subscribed("subj_q", "small", "1");
  await t.throwsAsync(() => w.changes.previewChange(w.caller, sub.id, { rateCardId: "yearly", behavior: "prorate" }), { message: /the new rate card is yearly/ });
  await t.throwsAsync(() => w.changes.previewChange(w.caller, sub.id, { rateCardId: "small", behavior: "prorate" }), { message: /already on this rate card/ });
  // The cycle ended, and no scheduler has closed it yet.
  w.moveTo(new Date("2026-02-02T00:00:00Z"));
  const invoices = w.invoicesOf(sub.id).length;
  const err = await t.throwsAsync(() => w.changes.previewChange(w.caller, sub.id, { rateCardId: "large", behavior: "prorate" }));
  t.is((err as { reason?: string }).reason, "CYCLE_CLOSE_DUE");
  t.is(w.invoicesOf(sub.id).length, invoices, "no cycle closed by the preview");
  t.is(w.subscription(sub.id).cycleIndex, 0);
});
