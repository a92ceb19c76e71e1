/**
 * The customer portal's use case and POST /checkout's, in memory (the real use cases over the
 * fakes of their ports, test/fakes): a session's lifetime to the millisecond, a portal acts only on
 * its own subject, cancelling goes through the API's rules, a declined card changes nothing, and
 * a standalone checkout subscribes at quantity 1 per fixed rate once completed.
 */
import test from "ava";
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../../src/billing/errors.js";
import { type OpenPortal, PORTAL_SESSION_TTL_MS } from "../../src/billing/subscriptions/portal.js";
import { TEST_CARDS } from "../../src/billing/subscriptions/test-provider.js";
import { fixedRate, usageRate, world } from "../fakes/world.js";

const T0 = new Date("2026-03-10T12:00:00Z");

async function opened(w: ReturnType<typeof world>, subjectId: string): Promise<{ token: string; portal: OpenPortal }> {
  const { session } = await w.portal.createSession(w.caller, { subjectId, returnUrl: "https://app.example/account" });
  const access = await w.portal.access(session.token);
  if (access?.state !== "open") throw new Error("the portal should be open");
  return { token: session.token, portal: access.portal };
}

test("a portal session works for exactly one hour of the engine's time, then is expired", async (t) => {
  const w = world(T0);
  w.subject("subj_a");
  const { session, url } = await w.portal.createSession(w.caller, { subjectId: "subj_a", returnUrl: "https://app.example/a?x=1" });
  t.is(url, `http://billing.test/hosted/portal/${session.token}`);
  t.regex(session.token, /^[0-9A-Za-z]{40}$/);
  t.is(session.expiresAt.getTime() - T0.getTime(), PORTAL_SESSION_TTL_MS);
  t.is(session.returnUrl, "https://app.example/a?x=1");
  w.moveTo(new Date(T0.getTime() + PORTAL_SESSION_TTL_MS - 1));
  t.is((await w.portal.access(session.token))?.state, "open");
  w.moveTo(new Date(T0.getTime() + PORTAL_SESSION_TTL_MS));
  t.is((await w.portal.access(session.token))?.state, "expired");
  t.is(await w.portal.access("x".repeat(40)), undefined);
});

test("opening a session checks every field first, then the subject; nothing is stored on a refusal", async (t) => {
  const w = world(T0);
  const bad = await t.throwsAsync(w.portal.createSession(w.caller, { subjectId: "", returnUrl: "mailto:a@b.c" }), { instanceOf: InvalidArgumentError });
  t.deepEqual((bad as InvalidArgumentError).violations.map((v) => v.field).sort(), ["return_url", "subject_id"]);
  await t.throwsAsync(w.portal.createSession(w.caller, { subjectId: "subj_nobody", returnUrl: "https://app.example" }), { instanceOf: NotFoundError });
  t.is(w.stores.state.portals.size, 0);
});

test("a portal cancels its own subject's subscription at the end of the cycle, once; another subject's is not found", async (t) => {
  const w = world(T0);
  w.card("team", [fixedRate("seats", "1000")]);
  w.subject("subj_a", "succeeds");
  w.subject("subj_b", "succeeds");
  const mine = await w.subscribe("subj_a", "team", { seats: "1" });
  const theirs = await w.subscribe("subj_b", "team", { seats: "1" });
  const { portal } = await opened(w, "subj_a");
  await t.throwsAsync(w.portal.cancelAtEndOfCycle(portal, theirs.id), { instanceOf: NotFoundError });
  t.false(w.subscription(theirs.id).cancelsAtEndOfCycle);
  const s = await w.portal.cancelAtEndOfCycle(portal, mine.id);
  t.deepEqual([s.status, s.cancelsAtEndOfCycle, s.cancelReason], ["active", true, "customer_portal"]);
  await t.throwsAsync(w.portal.cancelAtEndOfCycle(portal, mine.id), { instanceOf: FailedPreconditionError });
  const view = await w.portal.view(portal);
  t.deepEqual(
    view.subscriptions.map((p) => [p.subscription.id, p.canCancel]),
    [[mine.id, false]],
  );
});

test("the portal's usage is billing state's; invoices newest first; a declined card changes nothing", async (t) => {
  const w = world(T0);
  w.metric("api");
  w.card("team", [fixedRate("seats", "1000")], [usageRate("calls", "api", "2", "10")]);
  w.subject("subj_a", "succeeds");
  const sub = await w.subscribe("subj_a", "team", { seats: "1" });
  w.usage.record("api", "subj_a", new Date(T0.getTime() + 1000), "12.5");
  w.moveTo(new Date("2026-04-10T12:00:00Z"));
  await w.scheduler.runDue(w.now(), null);
  w.usage.record("api", "subj_a", new Date("2026-04-11T00:00:00Z"), "11");
  const { portal } = await opened(w, "subj_a");
  const view = await w.portal.view(portal);
  const state = await w.billingStates.billingState(w.caller, "subj_a");
  t.deepEqual(
    view.subscriptions[0]?.usage.map((u) => [u.rateName, u.usedUnits, u.includedUnits]),
    state.usage.map((u) => [u.rateName, u.usedUnits, u.includedUnits]),
  );
  t.deepEqual(
    view.invoices.map((i) => i.id),
    w
      .invoicesOf(sub.id)
      .map((i) => i.id)
      .reverse(),
  );
  t.is(view.invoices.length, 2);
  t.deepEqual(view.subscriptions[0]?.usage, [{ rateName: "calls", usedUnits: "11", includedUnits: "10", over: true }]);
  t.deepEqual(view.paymentMethod, { brand: "visa", last4: "4242" });

  const before = w.stores.state.subjects.get("subj_a")?.paymentMethodId;
  t.deepEqual(await w.portal.replaceCard(portal, TEST_CARDS.declined), { ok: false, message: "Your card was declined. Try another card." });
  t.is(w.stores.state.subjects.get("subj_a")?.paymentMethodId, before);
  t.deepEqual(await w.portal.replaceCard(portal, TEST_CARDS.chargeFails), { ok: true, brand: "visa", last4: "0341" });
  const after = w.stores.state.subjects.get("subj_a")?.paymentMethodId as string;
  t.not(after, before);
  t.is(w.stores.state.paymentMethods.get(after)?.subjectId, "subj_a");
});

test("POST /checkout's use case: always a checkout, quantity 1 per fixed rate; completing it subscribes", async (t) => {
  const w = world(T0);
  w.card("team", [fixedRate("seats", "1000"), fixedRate("support", "250.5")]);
  w.subject("subj_a", "succeeds");
  const callbacks = { successUrl: "https://app.example/ok", cancelledUrl: "https://app.example/no" };
  const { session, url } = await w.subscriptions.checkout(w.caller, { rateCardId: "team", subjectId: "subj_a", callbacks });
  t.is(url, `http://billing.test/hosted/checkout/${session.token}`);
  t.deepEqual([session.amountDue, session.currency, session.kind], ["1251", "USD", "subscribe"]);
  t.is(w.stores.state.subscriptions.size, 0, "a card on file does not skip the checkout");
  const done = await w.hostedCheckout.completeCheckout(session.token, TEST_CARDS.succeeds);
  t.deepEqual(done, { ok: true, redirect: "https://app.example/ok" });
  const [sub] = [...w.stores.state.subscriptions.values()];
  t.deepEqual([sub?.rateCardId, sub?.fixedRateQuantities, sub?.rateMultipliers], ["team", { seats: "1", support: "1" }, {}]);

  const bad = await t.throwsAsync(w.subscriptions.checkout(w.caller, { rateCardId: "", subjectId: "", callbacks: undefined }), { instanceOf: InvalidArgumentError });
  t.deepEqual((bad as InvalidArgumentError).violations.map((v) => v.field).sort(), ["checkout_callback_urls", "rate_card_id", "subject_id"]);
});
