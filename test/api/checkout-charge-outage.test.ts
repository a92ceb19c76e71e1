/**
 * A checkout completed while its provider cannot be reached for the charge (DESIGN §16), both
 * stores, the real server on a port, the official `stripe` library against the fake Stripe
 * behind a proxy that fails only the charges (POST /v1/payment_intents: the connection dropped,
 * or a 503). The card is saved and what the checkout was for stands (the subscription, the change
 * of rate card, the timeline's start, the credit purchase pending): the customer's return from
 * Stripe Checkout ends on our checkout page saying so (200, never a 5xx), with the invoice's
 * hosted page; a reload shows the same and charges nothing. The first charge stays planned:
 * the provider back and the clock past the plan, dunning charges it once with the key of attempt
 * 1 and the invoice is paid. A card Stripe declines still ends as a decline. Stripe refusing the
 * charge for good (401: the secret key revoked) is no outage: the checkout's page is an error
 * (402, never "processing"), the attempt counted as failed; a subscription's invoice then follows
 * dunning's schedule to its end, each retry one counted attempt, and a credit purchase ends.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { STORES } from "../helpers/db.js";
import { form, location303, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import type { TestServer } from "../helpers/server.js";
import { type Outage, outageProxy } from "../helpers/stripe-outage.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });

/** What a page says, its markup and styles taken out. */
const textOf = (html: string) =>
  html
    .replace(/<style>.*<\/style>/s, "")
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .trim();

/** The server's own address for a URL it made (its public base URL is not the test's). */
const local = (server: TestServer, url: string) => `${server.url}${new URL(url).pathname}${new URL(url).search}`;

/**
 * Our checkout page → Stripe Checkout, the card picked there → the customer's return, answered
 * (its redirect not followed). `webhookFirst`: Stripe's webhooks arrive before the return (they
 * complete the checkout); otherwise they are held, and the return completes it.
 */
async function payThroughStripe(server: TestServer, fake: FakeStripe, checkoutUrl: string, card: string, webhookFirst: boolean): Promise<{ back: string; res: Response }> {
  const stripeUrl = await location303(await form(local(server, checkoutUrl)), "our checkout page");
  if (!webhookFirst) fake.webhookOptions({ outOfOrder: true });
  const back = await location303(await form(stripeUrl, { card }), "Stripe Checkout");
  if (webhookFirst) await fake.settle();
  const res = await fetch(local(server, back), { redirect: "manual" });
  return { back, res };
}

/** What a checkout is for, opened on a fresh scenario: its checkout URL, and what stands once it is completed. */
interface Kind {
  name: string;
  open(s: Scenario): Promise<{ checkoutUrl: string; stands: (t: ExecutionContext) => Promise<unknown> }>;
}

const flat = (amount: string) => ({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd(amount) } }] });

const KINDS: Kind[] = [
  {
    name: "subscribe",
    async open(s) {
      const card = await s.card(flat("4900"));
      const r = await s.call("POST", "/subscriptions", {
        subject_id: s.subjectId,
        rate_card_id: card,
        fixed_rate_quantities: { seats: 1 },
        create_checkout_session: "always",
        checkout_callback_urls: CALLBACKS,
      });
      return {
        checkoutUrl: r.result.action.checkout_url,
        stands: async (t) =>
          t.deepEqual(
            (await s.subscriptions()).map((x) => [x.rate_card_id, x.status]),
            [[card, "active"]],
          ),
      };
    },
  },
  {
    name: "change of rate card",
    async open(s) {
      const free = await s.card({ name: "Free", ...flat("0") });
      const pro = await s.card({ name: "Pro", ...flat("3100") });
      const sub = (await s.subscribe({ rate_card_id: free, fixed_rate_quantities: { seats: 1 } }, null)).subscription as Json;
      const r = await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate", checkout_callback_urls: CALLBACKS });
      return {
        checkoutUrl: r.result.action.checkout_url,
        stands: async (t) => t.is((await s.call("GET", `/subscriptions/${sub.id}`)).rate_card_id, pro),
      };
    },
  },
  {
    name: "timeline",
    async open(s) {
      const card = await s.card(flat("4900"));
      const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
      await s.call("POST", `/subscription-timelines/${tl.id}/items`, {
        items: [{ period: { start: "2026-01-15T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 }, rate_price_multipliers: {} } }],
      });
      const r = await s.call("POST", `/subscription-timelines/${tl.id}/start`, { checkout_callback_urls: CALLBACKS });
      return {
        checkoutUrl: r.result.action.checkout_url,
        stands: async (t) => {
          const active = await s.call("GET", `/subscription-timelines/${tl.id}`);
          t.is(active.status, "active");
          t.deepEqual(
            (await s.subscriptions()).map((x) => x.id),
            [active.subscription_id],
          );
        },
      };
    },
  },
  {
    name: "credit purchase",
    async open(s) {
      const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
      return {
        checkoutUrl: r.checkout_url,
        stands: async (t) => t.like(await s.call("GET", `/credit-grants/${r.credit_grant.id}`), { status: "pending_payment" }),
      };
    },
  },
];

const intentsOf = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);

/** The subject's invoice with something due, open or paid (the one the checkout charges). */
async function chargedInvoice(s: Scenario): Promise<Json> {
  const due = ((await s.call("GET", `/invoices?subject_id=${s.subjectId}&limit=100`)).invoices as Json[]).filter((i) => i.amount_due.value !== "0");
  if (due.length !== 1) throw new Error(`expected one invoice with something due: ${JSON.stringify(due.map((i) => [i.id, i.status, i.amount_due]))}`);
  return due[0] as Json;
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY }, outageProxy);

  const cases: [Kind, Outage, boolean][] = [
    [KINDS[0] as Kind, "unreachable", false],
    [KINDS[1] as Kind, "503", false],
    [KINDS[2] as Kind, "unreachable", false],
    [KINDS[3] as Kind, "503", false],
    [KINDS[3] as Kind, "unreachable", true],
    [KINDS[0] as Kind, "503", true],
  ];
  for (const [kind, outage, webhookFirst] of cases)
    test.serial(
      `${store}: a ${kind.name} checkout whose charge finds Stripe ${outage} (${webhookFirst ? "webhook first" : "the return completes it"}): a page says the card is saved and the payment will be retried; dunning charges it once`,
      async (t) => {
        t.timeout(120_000);
        const { server, fake, front: proxy } = ctx;
        const s = await stripeDriver(server, fake).start(server);
        const { checkoutUrl, stands } = await kind.open(s);
        const token = new URL(checkoutUrl).pathname.split("/").pop() as string;
        proxy.outage = outage;
        let invoice: Json;
        try {
          const { back, res } = await payThroughStripe(server, fake, checkoutUrl, "pm_card_visa", webhookFirst);
          t.true(proxy.failed > 0, "the charge was tried and failed");
          // Sent to the checkout's page (not a 5xx, not the success URL as if paid).
          t.is(res.status, 303, await res.text());
          t.is(new URL(res.headers.get("location") ?? "").pathname, `/hosted/checkout/${token}`);
          const page = await fetch(local(server, res.headers.get("location") ?? ""));
          const html = await page.text();
          t.is(page.status, 200);
          const text = textOf(html);
          t.regex(text, /card ending 4242 is saved/);
          t.regex(text, /payment is being processed/i);
          t.regex(text, /retried automatically/);
          invoice = await chargedInvoice(s);
          t.true(html.includes(`href="/hosted/invoices/`), "links the invoice's hosted page");
          t.true(html.includes(new URL(invoice.hosted_url).pathname), "the hosted page of the invoice charged");
          // What the checkout was for stands; the card is on the subject; the first charge is planned.
          await stands(t);
          t.like(invoice, { status: "open", attempt_count: 0, next_payment_attempt: "2026-01-15T00:01:00Z" });
          t.deepEqual(intentsOf(fake, invoice.id), [], "nothing charged");
          // A reload (of the return and of the page) shows the same and charges nothing.
          const again = await fetch(local(server, back), { redirect: "manual" });
          await again.body?.cancel();
          t.is(again.status, 303);
          t.is(new URL(again.headers.get("location") ?? "").pathname, `/hosted/checkout/${token}`);
          const reload = await fetch(`${server.url}/hosted/checkout/${token}`);
          t.is(reload.status, 200);
          t.is(textOf(await reload.text()), text);
          // The page's form sent again (a browser's resubmit): the same page, not a second completion.
          const resent = await form(`${server.url}/hosted/checkout/${token}`);
          t.is(resent.status, 200);
          t.is(textOf(await resent.text()), text);
          t.like(await s.call("GET", `/invoices/${invoice.id}`), { status: "open", attempt_count: 0 });
        } finally {
          proxy.outage = undefined;
          fake.webhookOptions({});
        }
        // Stripe back, the clock past the plan: dunning makes the planned charge, once, with attempt 1's key.
        await s.advance("2026-01-15T00:02:00Z");
        t.like(await s.call("GET", `/invoices/${invoice.id}`), { status: "paid", attempt_count: 1 });
        await fake.releaseHeld();
        await fake.settle();
        const intents = intentsOf(fake, invoice.id);
        t.deepEqual(
          intents.map((pi) => [pi.idempotency_key, pi.status]),
          [[`${invoice.id}:attempt-1`, "succeeded"]],
          "charged once",
        );
        t.like(await s.call("GET", `/invoices/${invoice.id}`), { status: "paid", attempt_count: 1 });
        if (kind.name === "credit purchase") t.like(((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[])[0], { status: "active", remaining_amount: usd("700") });
        // Paid: the checkout's page no longer says it is processing.
        const after = await fetch(`${server.url}/hosted/checkout/${token}`);
        t.is(after.status, 410);
        await after.body?.cancel();
      },
    );

  for (const kind of [KINDS[0], KINDS[3]] as Kind[])
    test.serial(`${store}: a ${kind.name} checkout whose charge Stripe refuses for good (401, the key revoked): an error page, never "processing"; the attempt counted, dunning ends`, async (t) => {
      t.timeout(120_000);
      const { server, fake, front: proxy } = ctx;
      const s = await stripeDriver(server, fake).start(server);
      const { checkoutUrl } = await kind.open(s);
      const token = new URL(checkoutUrl).pathname.split("/").pop() as string;
      proxy.outage = "401";
      proxy.failed = 0;
      try {
        const { res } = await payThroughStripe(server, fake, checkoutUrl, "pm_card_visa", false);
        await res.body?.cancel();
        t.is(res.status, 303);
        t.is(new URL(res.headers.get("location") ?? "").pathname, `/hosted/checkout/${token}`);
        const page = await fetch(`${server.url}/hosted/checkout/${token}`);
        const text = textOf(await page.text());
        t.is(page.status, 402, text);
        t.regex(text, /Payment not completed/);
        t.regex(text, /refused this payment/);
        t.notRegex(text, /processing|retried automatically/i);
        const invoice = await chargedInvoice(s);
        t.deepEqual(intentsOf(fake, invoice.id), [], "nothing charged");
        if (kind.name === "credit purchase") {
          t.like(invoice, { status: "void", attempt_count: 1, next_payment_attempt: null });
          t.deepEqual(
            ((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[]).map((g) => g.status),
            ["failed"],
          );
        } else {
          // A failed attempt on dunning's schedule (3, 5, 7 days): each retry refused is counted, then the schedule ends.
          t.like(invoice, { status: "open", attempt_count: 1, next_payment_attempt: "2026-01-18T00:00:00Z" });
          await s.advance("2026-01-25T00:00:00Z");
          t.like(await s.call("GET", `/invoices/${invoice.id}`), { status: "open", attempt_count: 4, next_payment_attempt: null });
        }
        t.is(proxy.failed, kind.name === "credit purchase" ? 1 : 4, "one charge per attempt");
        await s.advance("2026-02-05T00:00:00Z");
        t.is(proxy.failed, kind.name === "credit purchase" ? 1 : 4, "never retried past the schedule");
        // A reload shows the same error.
        const reload = await fetch(`${server.url}/hosted/checkout/${token}`);
        t.is(reload.status, 402);
        t.is(textOf(await reload.text()), text);
      } finally {
        proxy.outage = undefined;
        fake.webhookOptions({});
      }
    });

  test.serial(`${store}: a card Stripe declines at the charge still ends as a decline (credit purchase: the cancelled URL), never the processing page`, async (t) => {
    const { server, fake } = ctx;
    const s = await stripeDriver(server, fake).start(server);
    const { checkoutUrl } = await (KINDS[3] as Kind).open(s);
    const { res } = await payThroughStripe(server, fake, checkoutUrl, "pm_card_chargeCustomerFail", false);
    fake.webhookOptions({});
    await fake.releaseHeld();
    await fake.settle();
    await res.body?.cancel();
    t.is(res.status, 303);
    t.is(res.headers.get("location"), CALLBACKS.cancelled_url);
    const [grant] = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
    t.like(grant, { status: "failed" });
    t.like(await s.call("GET", `/invoices/${grant?.invoice_id}`), { status: "void", attempt_count: 1 });
  });

  test.serial(`${store}: a subscribe checkout whose saved card Stripe declines at the charge goes to the success URL as before (dunning retries on its schedule)`, async (t) => {
    const { server, fake } = ctx;
    const s = await stripeDriver(server, fake).start(server);
    const { checkoutUrl } = await (KINDS[0] as Kind).open(s);
    const { res } = await payThroughStripe(server, fake, checkoutUrl, "pm_card_chargeCustomerFail", false);
    fake.webhookOptions({});
    await fake.releaseHeld();
    await fake.settle();
    await res.body?.cancel();
    t.is(res.status, 303);
    t.is(res.headers.get("location"), CALLBACKS.success_url);
    t.like(await chargedInvoice(s), { status: "open", attempt_count: 1 });
  });
}
