/**
 * DESIGN §8, §16: a test-clock advance past a retry of an invoice whose PaymentIntent waits for
 * the customer, while Stripe refuses every cancel (401: the key revoked). The refused cancel moves
 * the retry 5 minutes ahead (payments/waiting.ts); the advance does not step to it again (it used
 * to step every 5 minutes up to its new time: thousands of steps and cancels for a month). Through
 * the real server on both stores, the fake Stripe behind a proxy refusing the cancels.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { useStripeServer } from "../helpers/payment-flows.js";
import { cancelFront, intentsOf, waitingRenewal } from "../helpers/stripe-waiting.js";

const SECRETS_KEY = randomBytes(32).toString("base64");

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY }, cancelFront);

  test.serial(`${store}: an advance past a retry whose cancel Stripe keeps refusing asks Stripe a bounded number of times and ends`, async (t) => {
    const { fake, front: proxy } = ctx;
    const { s, inv, a } = await waitingRenewal(t, ctx);
    t.like(inv, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });
    proxy.cancelRefused = true;
    proxy.refused = 0;
    t.teardown(() => {
      proxy.cancelRefused = false;
    });
    // 2 hours past the retry of day 3: 24 steps of 5 minutes on the old code.
    await s.advance("2026-02-18T02:00:00Z");
    await fake.settle();
    t.is((await s.call("GET", `/test-clocks/${s.clockId}`)).status, "ready");
    t.true(proxy.refused >= 1, "the retry asked for the cancel");
    t.true(proxy.refused <= 2, `the cancel asked ${proxy.refused} times`);
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1 });
    t.deepEqual(
      intentsOf(fake, inv.id).map((pi) => pi.id),
      [a.id],
      "nothing charged",
    );
  });
}
