/**
 * The fake Stripe (test/stripe/fake-stripe.ts) driven by the official `stripe` library, as the
 * Stripe provider will drive it: customers, Checkout in setup mode completed as the customer would,
 * off-session PaymentIntents for each test card with the errors the library surfaces, idempotent
 * replays, refunds, signed webhooks (verified by the library), and the schema guard both ways.
 */
import test, { type ExecutionContext } from "ava";
import Stripe from "stripe";
import { startReceiver } from "../helpers/receiver.js";
import { type FakeStripe, startFakeStripe } from "../stripe/fake-stripe.js";
import { loadChecker, subsetInfo } from "../stripe/schema-check.js";

const SECRET = "whsec_test_secret";

/** A fake Stripe stopped when the test ends (a test that checks stop() stops it itself: a second stop() does nothing). */
async function startFake(t: ExecutionContext, options?: Parameters<typeof startFakeStripe>[0]): Promise<FakeStripe> {
  const fake = await startFakeStripe(options);
  // stop() throws if an answer or an event drifted from Stripe's schema: the test fails with it.
  t.teardown(() => fake.stop());
  return fake;
}

function client(fake: FakeStripe, key = "sk_test_fake123") {
  return new Stripe(key, { host: fake.host, port: fake.port, protocol: "http", maxNetworkRetries: 0 });
}

/** A customer with a card saved through Checkout (setup mode), completed over the control API. */
async function customerWithCard(fake: FakeStripe, stripe: Stripe, card: string) {
  const customer = await stripe.customers.create({ email: "ada@example.com", name: "Ada", metadata: { subject_id: "sub_1" } });
  const session = await stripe.checkout.sessions.create({
    mode: "setup",
    customer: customer.id,
    currency: "usd",
    success_url: "http://127.0.0.1:1/done?session={CHECKOUT_SESSION_ID}",
    cancel_url: "http://127.0.0.1:1/cancel",
  });
  const res = await fetch(`${fake.url}/__test/checkout/sessions/${session.id}/complete`, { method: "POST", body: JSON.stringify({ card }) });
  if (res.status !== 200) throw new Error(`complete: ${res.status} ${await res.text()}`);
  const pms = await stripe.customers.listPaymentMethods(customer.id, { type: "card" });
  return { customer, session, pm: pms.data[0] as Stripe.PaymentMethod };
}

async function catchError(p: Promise<unknown>): Promise<Stripe.errors.StripeError> {
  try {
    await p;
  } catch (e) {
    return e as Stripe.errors.StripeError;
  }
  throw new Error("expected the call to fail");
}

test("customers, a setup Checkout completed by the customer, its SetupIntent and the saved card", async (t) => {
  const fake = await startFake(t);
  const hooks = await startReceiver();
  t.teardown(() => hooks.close());
  fake.setWebhook(hooks.url, SECRET);
  const stripe = client(fake);
  const customer = await stripe.customers.create({ email: "ada@example.com", name: "Ada", metadata: { subject_id: "sub_1" } });
  t.regex(customer.id, /^cus_/);
  t.like(customer, { object: "customer", email: "ada@example.com", name: "Ada", metadata: { subject_id: "sub_1" }, livemode: false });
  const updated = await stripe.customers.update(customer.id, { name: "Ada L.", address: { line1: "1 Main St", country: "US" }, metadata: { subject_id: "" } });
  t.is(updated.name, "Ada L.");
  t.deepEqual(updated.metadata, {});
  t.is((await stripe.customers.retrieve(customer.id)).id, customer.id);
  t.deepEqual(
    (await stripe.customers.list({ email: "ada@example.com", limit: 5 })).data.map((c) => c.id),
    [customer.id],
  );

  const session = await stripe.checkout.sessions.create({
    mode: "setup",
    customer: customer.id,
    currency: "usd",
    success_url: "http://127.0.0.1:1/done?session={CHECKOUT_SESSION_ID}",
    cancel_url: "http://127.0.0.1:1/cancel",
  });
  t.is(session.status, "open");
  t.true(session.url?.startsWith(`${fake.url}/checkout/`));
  const page = await fetch(session.url as string);
  t.regex(await page.text(), /4242 4242 4242 4242/);
  // The customer picks a card on the page: redirected to success_url with the session id.
  const paid = await fetch(session.url as string, { method: "POST", body: "card=pm_card_visa", headers: { "content-type": "application/x-www-form-urlencoded" }, redirect: "manual" });
  t.is(paid.status, 303);
  t.is(paid.headers.get("location"), `http://127.0.0.1:1/done?session=${session.id}`);

  const done = await stripe.checkout.sessions.retrieve(session.id, { expand: ["setup_intent"] });
  t.is(done.status, "complete");
  const seti = done.setup_intent as Stripe.SetupIntent;
  t.like(seti, { object: "setup_intent", status: "succeeded", customer: customer.id, usage: "off_session" });
  t.is((await stripe.setupIntents.retrieve(seti.id)).payment_method, seti.payment_method);
  const pm = await stripe.paymentMethods.retrieve(seti.payment_method as string);
  t.like(pm, { customer: customer.id, type: "card", card: { brand: "visa", last4: "4242" } });
  t.deepEqual(
    (await stripe.customers.listPaymentMethods(customer.id, { type: "card" })).data.map((p) => p.id),
    [pm.id],
  );

  await stripe.customers.update(customer.id, { invoice_settings: { default_payment_method: pm.id } });
  const other = await stripe.paymentMethods.attach("pm_card_mastercard", { customer: customer.id });
  t.like(other, { customer: customer.id, card: { last4: "4444" } });
  await fake.settle();
  const completed = hooks.received.map((r) => stripe.webhooks.constructEvent(r.body, r.headers["stripe-signature"] as string, SECRET));
  t.deepEqual(
    completed.map((e) => e.type),
    ["payment_method.attached", "setup_intent.succeeded", "checkout.session.completed", "payment_method.attached"],
  );
  const event = completed[2] as Stripe.CheckoutSessionCompletedEvent;
  t.like(event.data.object, { id: session.id, status: "complete", setup_intent: seti.id, customer: customer.id });
  await fake.stop();
});

test("off-session PaymentIntents answer by the test card, as the library surfaces Stripe's errors", async (t) => {
  const fake = await startFake(t);
  const stripe = client(fake);
  const charge = (customer: string, pm: string) =>
    stripe.paymentIntents.create({ amount: 2500, currency: "usd", customer, payment_method: pm, off_session: true, confirm: true, description: "INV-1", metadata: { invoice_id: "inv_1" } });

  for (const card of ["4242 4242 4242 4242", "5555 5555 5555 4444"]) {
    const { customer, pm } = await customerWithCard(fake, stripe, card);
    const pi = await charge(customer.id, pm.id);
    t.like(pi, { status: "succeeded", amount: 2500, amount_received: 2500, currency: "usd", customer: customer.id, payment_method: pm.id, metadata: { invoice_id: "inv_1" } });
    t.regex(pi.latest_charge as string, /^ch_/);
  }

  const auth = await customerWithCard(fake, stripe, "4000 0025 0000 3155");
  const needsAuth = await catchError(charge(auth.customer.id, auth.pm.id));
  t.true(needsAuth instanceof Stripe.errors.StripeCardError);
  t.is(needsAuth.statusCode, 402);
  t.is(needsAuth.code, "authentication_required");
  t.is(needsAuth.decline_code, "authentication_required");
  const waiting = needsAuth.payment_intent as Stripe.PaymentIntent;
  t.is(waiting.status, "requires_payment_method");
  t.is(waiting.last_payment_error?.code, "authentication_required");
  t.is((await stripe.paymentIntents.retrieve(waiting.id)).status, "requires_payment_method");
  const authenticated = await fake.completeAuthentication(waiting.id);
  t.is(authenticated.status, "succeeded");
  t.is((await stripe.paymentIntents.retrieve(waiting.id)).status, "succeeded");

  const poor = await customerWithCard(fake, stripe, "4000 0000 0000 9995");
  const declined = await catchError(charge(poor.customer.id, poor.pm.id));
  t.true(declined instanceof Stripe.errors.StripeCardError);
  t.like(declined, { code: "card_declined", decline_code: "insufficient_funds", statusCode: 402 });
  t.is((declined.payment_intent as Stripe.PaymentIntent).status, "requires_payment_method");

  // 0341 attaches fine (Checkout saves it), then every charge fails.
  const fails = await customerWithCard(fake, stripe, "4000 0000 0000 0341");
  t.like(fails.pm, { customer: fails.customer.id, card: { last4: "0341" } });
  const failed = await catchError(charge(fails.customer.id, fails.pm.id));
  t.like(failed, { type: "StripeCardError", code: "card_declined", decline_code: "generic_decline" });
  // The library's auto-pagination over one customer's PaymentIntents (2 per page).
  const listed: string[] = [];
  for await (const pi of stripe.paymentIntents.list({ customer: auth.customer.id, limit: 2 })) listed.push(`${pi.id} ${pi.status}`);
  t.deepEqual(listed, [`${waiting.id} succeeded`]);
  const all: string[] = [];
  for await (const pi of stripe.paymentIntents.list({ limit: 2 })) all.push(pi.id);
  t.is(all.length, 5);
  t.deepEqual(fake.drift(), []);
  await fake.stop();
});

test("Idempotency-Key: the same request replays the same answer and makes one PaymentIntent; other parameters are refused", async (t) => {
  const fake = await startFake(t);
  const stripe = client(fake);
  const { customer, pm } = await customerWithCard(fake, stripe, "4242424242424242");
  const params = { amount: 1200, currency: "usd", customer: customer.id, payment_method: pm.id, off_session: true, confirm: true };
  const first = await stripe.paymentIntents.create(params, { idempotencyKey: "inv_1-attempt-1" });
  const again = await stripe.paymentIntents.create(params, { idempotencyKey: "inv_1-attempt-1" });
  t.is(again.id, first.id);
  t.is(again.lastResponse.headers["idempotent-replayed"], "true");
  t.deepEqual(
    fake
      .paymentIntents()
      .filter((p) => p.idempotency_key === "inv_1-attempt-1")
      .map((p) => p.id),
    [first.id],
  );
  const conflict = await catchError(stripe.paymentIntents.create({ ...params, amount: 1300 }, { idempotencyKey: "inv_1-attempt-1" }));
  t.true(conflict instanceof Stripe.errors.StripeIdempotencyError);
  t.is(conflict.statusCode, 400);
  // A declined charge is replayed as the same decline (the same PaymentIntent), as Stripe does.
  const poor = await stripe.paymentIntents.create({ ...params, payment_method: "pm_card_chargeDeclinedInsufficientFunds" }, { idempotencyKey: "k2" }).catch((e) => e);
  const poorAgain = await stripe.paymentIntents.create({ ...params, payment_method: "pm_card_chargeDeclinedInsufficientFunds" }, { idempotencyKey: "k2" }).catch((e) => e);
  t.is(poor.payment_intent.id, poorAgain.payment_intent.id);
  t.is(fake.paymentIntents().length, 2);
  await fake.stop();
});

test("refunds: partial, the rest, and never beyond the charge", async (t) => {
  const fake = await startFake(t);
  const stripe = client(fake);
  const { customer, pm } = await customerWithCard(fake, stripe, "pm_card_visa");
  const pi = await stripe.paymentIntents.create({ amount: 1000, currency: "eur", customer: customer.id, payment_method: pm.id, off_session: true, confirm: true });
  const part = await stripe.refunds.create({ payment_intent: pi.id, amount: 300 });
  t.like(part, { object: "refund", amount: 300, currency: "eur", payment_intent: pi.id, status: "succeeded" });
  const over = await catchError(stripe.refunds.create({ payment_intent: pi.id, amount: 701 }));
  t.true(over instanceof Stripe.errors.StripeInvalidRequestError);
  t.like(over, { statusCode: 400, code: "amount_too_large", param: "amount" });
  const rest = await stripe.refunds.create({ payment_intent: pi.id });
  t.is(rest.amount, 700);
  const again = await catchError(stripe.refunds.create({ payment_intent: pi.id, amount: 1 }));
  t.is(again.code, "charge_already_refunded");
  await fake.stop();
});

test("webhooks: verified by the library; delivered twice, out of order, or with a bad signature on request", async (t) => {
  const fake = await startFake(t);
  const hooks = await startReceiver();
  t.teardown(() => hooks.close());
  const stripe = client(fake);
  await fetch(`${fake.url}/__test/webhook`, { method: "POST", body: JSON.stringify({ url: hooks.url, secret: SECRET, twice: true }) });
  const { customer, pm } = await customerWithCard(fake, stripe, "4242424242424242");
  const verified = hooks.received.map((r) => stripe.webhooks.constructEvent(r.body, r.headers["stripe-signature"] as string, SECRET));
  t.deepEqual(
    verified.map((e) => e.type),
    ["payment_method.attached", "payment_method.attached", "setup_intent.succeeded", "setup_intent.succeeded", "checkout.session.completed", "checkout.session.completed"],
  );
  t.is(verified[0]?.id, verified[1]?.id);

  hooks.received.length = 0;
  fake.webhookOptions({ outOfOrder: true });
  await stripe.paymentIntents.create({ amount: 500, currency: "usd", customer: customer.id, payment_method: pm.id, off_session: true, confirm: true });
  await fake.settle();
  t.is(hooks.received.length, 0);
  await fake.releaseHeld();
  t.deepEqual(
    hooks.received.map((r) => r.json.type),
    ["payment_intent.succeeded", "payment_intent.created"],
  );

  hooks.received.length = 0;
  fake.webhookOptions({ badSignature: true });
  await fake.redeliver(fake.events()[0]?.id as string, { badSignature: true });
  const bad = hooks.received[0];
  t.truthy(bad);
  t.throws(() => stripe.webhooks.constructEvent(bad?.body as string, bad?.headers["stripe-signature"] as string, SECRET), { instanceOf: Stripe.errors.StripeSignatureVerificationError });
  t.deepEqual(fake.deliveries().at(-1), { eventId: fake.events()[0]?.id, type: "payment_method.attached", status: 200, badSignature: true, body: bad?.body });
  await fake.stop();
});

test("requests: a secret key is required (401), and what Stripe's schema refuses is refused (400, naming the parameter)", async (t) => {
  const fake = await startFake(t, { invalidRequestsExpected: true });
  const noKey = await catchError(client(fake, "pk_test_publishable").customers.list());
  t.true(noKey instanceof Stripe.errors.StripeAuthenticationError);
  t.is(noKey.statusCode, 401);
  const stripe = client(fake);
  const unknown = await catchError(stripe.customers.create({ name: "A", nonsense: "1" } as Stripe.CustomerCreateParams));
  t.true(unknown instanceof Stripe.errors.StripeInvalidRequestError);
  t.is(unknown.param, "nonsense");
  t.regex(unknown.message, /Received unknown parameter: nonsense/);
  const badType = await catchError(stripe.paymentIntents.create({ amount: "lots" as unknown as number, currency: "usd" }));
  t.is(badType.param, "amount");
  const badEnum = await catchError(stripe.checkout.sessions.create({ mode: "telepathy" as "setup", currency: "usd", success_url: "http://x/" }));
  t.is(badEnum.param, "mode");
  const badNested = await catchError(stripe.customers.create({ address: { line1: "1 Main St", planet: "Mars" } as Stripe.AddressParam }));
  t.is(badNested.param, "address[planet]");
  t.deepEqual(fake.paymentIntents(), []);
  t.is(fake.invalidRequests().length, 4);
  await fake.stop();
});

test("a request Stripe's schema refuses makes stop() throw, even if the caller swallowed the 400", async (t) => {
  const fake = await startFakeStripe();
  await client(fake)
    .customers.update("cus_x", { nickname: "A" } as Stripe.CustomerUpdateParams)
    .catch(() => undefined);
  t.deepEqual(fake.invalidRequests(), ["POST /v1/customers/{customer}: Received unknown parameter: nickname"]);
  await t.throwsAsync(fake.stop(), { message: /requests Stripe's schema refuses \(answered 400\):\nPOST \/v1\/customers\/\{customer\}: Received unknown parameter: nickname/ });
});

test("an answer that drifts from Stripe's schema fails loudly: a 500 naming the path, and stop() throws", async (t) => {
  const fake = await startFake(t, { tamper: (op, body) => (op === "POST /v1/customers" ? { ...body, balance: "0", livemode: "no" } : body) });
  const stripe = client(fake);
  const e = await catchError(stripe.customers.create({ name: "A" }));
  t.is(e.statusCode, 500);
  t.regex(e.message, /drifted from Stripe's schema \(POST \/v1\/customers 200\).*\/balance must be integer/);
  t.true(fake.drift().some((d) => d.includes("/livemode must be boolean")));
  await t.throwsAsync(fake.stop(), { message: /answers drifted from Stripe's schema/ });
});

test("the schema checker: a broken customer, a broken error and an unknown operation", (t) => {
  const checker = loadChecker();
  t.regex(String(subsetInfo().source), /^stripe\/openapi@[0-9a-f]{40} /);
  const ok = { id: "cus_1", object: "customer", created: 1, livemode: false };
  t.deepEqual(checker.response("GET /v1/customers/{customer}", 200, ok), []);
  // Retrieve answers a customer or a deleted one (anyOf): each branch says why not.
  t.true(checker.response("GET /v1/customers/{customer}", 200, { ...ok, created: "yesterday" }).includes('/created must be integer {"type":"integer"}'));
  t.deepEqual(checker.response("POST /v1/customers", 200, { ...ok, created: "yesterday" }), ['/created must be integer {"type":"integer"}']);
  t.true(checker.response("GET /v1/customers/{customer}", 200, { ...ok, object: "client" }).some((p) => p.startsWith("/object must be equal to one of the allowed values")));
  t.true(checker.response("POST /v1/payment_intents", 402, { error: { type: "card_failure" } }).some((p) => p.startsWith("/error/type")));
  t.deepEqual(checker.request("POST /v1/refunds", { payment_intent: "pi_1", amount: "300" }).value, { payment_intent: "pi_1", amount: 300 });
  t.throws(() => checker.request("DELETE /v1/customers/{customer}", {}), { message: /not in test\/stripe\/openapi-subset.json/ });
  // Webhook events and the objects they carry are checked too (a drifted one is never sent).
  t.deepEqual(checker.object("setup_intent", { id: "seti_1", object: "setup_intent", created: 1, livemode: false, payment_method_types: ["card"], status: "succeeded", usage: "off_session" }), []);
  t.true(
    checker
      .object("setup_intent", { id: "seti_1", object: "setup_intent", created: 1, livemode: false, payment_method_types: ["card"], status: "done", usage: "off_session" })
      .some((p) => p.startsWith("/status must be equal to one of the allowed values")),
  );
  t.deepEqual(checker.object("event", { id: "evt_1", object: "event", created: 1, data: { object: {} }, livemode: false, pending_webhooks: "1", type: "x" }), [
    '/pending_webhooks must be integer {"type":"integer"}',
  ]);
});
