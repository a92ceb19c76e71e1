/**
 * A new card saved in the portal after a dunning charge whose answer was lost (DESIGN §12, §16;
 * payments/plan-ahead.ts, providers/stripe/provider.ts), through the real server on both stores
 * against the fake Stripe. A 49.00 USD monthly subscription on a declining card: its renewal on
 * 02-15 is declined (attempt 1, the next attempt 02-18). On 02-18 dunning charges attempt 2
 * (`<invoice>:attempt-2`) with that card, declined again, and the server dies (SIGKILL) before its
 * commit: the invoice still says attempt_count 1, its plan 02-18 overdue. The customer then saves a
 * Visa in the portal, which charges the open invoice at once: the PaymentIntent made under the key
 * with the old card failed, so it is no answer for the Visa, which is charged once (4900) under a
 * key of its own (`<invoice>:attempt-2:card-<its PaymentMethod>`) and pays the invoice; not the old
 * decline adopted, the Visa never charged. That Visa's charge lost in turn (the server killed after
 * it), dunning's retry after Stripe forgot the keys finds the Visa's PaymentIntent and adopts it.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES } from "../helpers/db.js";
import { STRIPE_WEBHOOK_SECRET, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import { type ChildServer, type TestServer, childServer } from "../helpers/server.js";
import { intentsOf } from "../helpers/stripe-waiting.js";
import type { Json } from "../helpers/subjects-api.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

/** The scenario's calls sent to another server (a child on the same database). */
function onServer(s: Scenario, url: string): Scenario {
  const moved = Object.create(s) as Scenario;
  Object.defineProperty(moved, "server", { value: { ...(s as unknown as { server: TestServer }).server, url } });
  return moved;
}

/** How a child server ended, or "running" after `ms` (then killed). */
async function endOf(child: ChildServer, ms = 30_000): Promise<NodeJS.Signals | number | null | "running"> {
  const timer = new Promise<"running">((r) => setTimeout(() => r("running"), ms).unref());
  const how = await Promise.race([child.exited, timer]);
  if (how === "running") child.proc.kill("SIGKILL");
  return how;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY });
  const child = (env: Record<string, string> = {}) => childServer(ctx.server, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, STRIPE_API_BASE: ctx.fake.url, ...env });

  /**
   * The renewal declined on 02-15 (attempt 1), then dunning's attempt 2 on 02-18 declined on a
   * server that dies right after its PaymentIntent: the scenario, the invoice, the environment.
   */
  async function lostAttempt2(t: ExecutionContext): Promise<{ s: Scenario; inv: Json; env: string }> {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    const env = String((await s.call("GET", "/payment-settings")).stripe_webhook_url)
      .split("/")
      .pop() as string;
    const rateCard = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("4900") } }] });
    await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { seats: 1 } }, "visa");
    await d.replaceCard(s, "insufficient_funds");
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    const inv = await s.call("GET", `/invoices/${((await s.invoices()).at(-1) as Json).id}`);
    t.like(inv, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });

    const dying = await child({ BILLING_TEST_DIE_AFTER_CHARGE: "1" });
    fake.setWebhook(`${dying.url}/providers/stripe/webhooks/${env}`, STRIPE_WEBHOOK_SECRET);
    await onServer(s, dying.url)
      .advance("2026-02-18T00:00:00Z")
      .catch(() => undefined);
    t.is(await endOf(dying), "SIGKILL");
    await fake.settle();
    t.deepEqual(
      intentsOf(fake, inv.id).map((pi) => [pi.status, pi.amount, pi.idempotency_key]),
      [
        ["requires_payment_method", 4900, `${inv.id}:attempt-1`],
        ["requires_payment_method", 4900, `${inv.id}:attempt-2`],
      ],
      "attempt 2 declined at Stripe",
    );
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1 }, "attempt 2 never committed");
    return { s, inv, env };
  }

  /** Runs `body` on a child server taking the webhooks, then stops it and gives the webhooks back to the test server. */
  async function onChild(env: string, extra: Record<string, string>, body: (c: ChildServer) => Promise<void>): Promise<void> {
    const c = await child(extra);
    try {
      ctx.fake.setWebhook(`${c.url}/providers/stripe/webhooks/${env}`, STRIPE_WEBHOOK_SECRET);
      await body(c);
    } finally {
      if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill("SIGTERM");
      await c.exited;
      ctx.fake.setWebhook(`${ctx.server.url}/providers/stripe/webhooks/${env}`, STRIPE_WEBHOOK_SECRET);
    }
  }

  /** The Visa's PaymentIntents of the invoice: [status, amount, key]. */
  const visaIntents = (inv: Json) => intentsOf(ctx.fake, inv.id).filter((pi) => String(pi.idempotency_key).startsWith(`${inv.id}:attempt-2:card-`));

  test.serial(
    `${store}: a Visa saved in the portal after dunning's attempt 2 was declined and its answer lost: the Visa is charged 4900 once and pays the invoice, the old decline not adopted`,
    async (t) => {
      const { server, fake } = ctx;
      t.timeout(240_000);
      const { s, inv, env } = await lostAttempt2(t);
      await onChild(env, {}, async (c) => {
        // The customer saves a Visa in the portal: the open invoice is charged with it at once.
        await stripeDriver({ ...server, url: c.url } as TestServer, fake).replaceCard(s, "visa");
        await fake.settle();
        const [visa] = visaIntents(inv);
        t.deepEqual(
          intentsOf(fake, inv.id).map((pi) => [pi.status, pi.amount]),
          [
            ["requires_payment_method", 4900],
            ["requires_payment_method", 4900],
            ["succeeded", 4900],
          ],
          "the Visa charged once: 4900",
        );
        t.is(visa?.idempotency_key, `${inv.id}:attempt-2:card-${visa?.payment_method}`, "under a key of its own");
        t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 2, amount_due: usd("4900") });
        // Nothing more when the clock goes on.
        await onServer(s, c.url).advance("2026-02-20T00:00:00Z");
        await fake.settle();
        t.is(intentsOf(fake, inv.id).length, 3);
        t.is(fake.requests().filter((r) => r.operation === "POST /v1/refunds").length, 0);
      });
    },
  );

  test.serial(`${store}: that Visa's charge lost too (the server killed after it), retried after Stripe forgot the keys: the Visa's PaymentIntent adopted, 4900 taken once`, async (t) => {
    const { server, fake } = ctx;
    t.timeout(240_000);
    const { s, inv, env } = await lostAttempt2(t);
    await onChild(env, { BILLING_TEST_DIE_AFTER_CHARGE: "1" }, async (c) => {
      await stripeDriver({ ...server, url: c.url } as TestServer, fake)
        .replaceCard(s, "visa")
        .catch(() => undefined);
      t.is(await endOf(c), "SIGKILL");
    });
    await fake.settle();
    t.deepEqual(
      visaIntents(inv).map((pi) => [pi.status, pi.amount]),
      [["succeeded", 4900]],
    );
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "open", attempt_count: 1 }, "never committed");
    fake.forgetIdempotencyKeys();
    await onChild(env, {}, async (c) => {
      // Dunning's retry of attempt 2 (the plan overdue), the Visa now the card.
      await onServer(s, c.url).advance("2026-02-18T00:05:00Z");
      await fake.settle();
    });
    t.like(await s.call("GET", `/invoices/${inv.id}`), { status: "paid", attempt_count: 2 });
    t.deepEqual(
      intentsOf(fake, inv.id)
        .filter((pi) => pi.status === "succeeded")
        .map((pi) => pi.amount),
      [4900],
      "4900 taken once, not 4900 + 4900 = 9800",
    );
    t.is(intentsOf(fake, inv.id).length, 3);
  });
}
