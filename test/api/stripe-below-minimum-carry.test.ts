/**
 * DESIGN §16, through the real server on a port against the fake Stripe, both stores: an amount
 * due below Stripe's minimum charge (400 amount_too_small, USD 0.50 at least) is settled as Stripe
 * Billing settles it (https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts): the
 * invoice is paid, its amount due carried to the subject's next invoice, which charges it once.
 * A 4,900 renewal with 4,870 of credit applied leaves 30 due on Feb 15; Stripe refuses it once;
 * the invoice is paid (invoice.paid), never charged again; Mar 15's renewal takes it as Stripe's
 * starting_balance: total 4,900 (the 30 is in Feb's total already, not Mar's), amount_carried_in
 * 30, amount due 4,900 + 30 = 4,930, and Stripe is charged 4,930; Apr 15's 4,900 again (the 30
 * taken once). The finance export counts the 30 once: in Feb's invoice_total (4,900).
 * A free plan's invoices (total 0) take it too: each is due 30, below the minimum again, carried
 * on; their totals stay 0, so the export's paid totals are 4,900 + 4,900 = 9,800, not 9,920.
 * The carry is keyed by the invoice (the table's primary key): a second write of it is refused by
 * the database. Cancelling the subscription leaves it owed: the subject's billing state shows it,
 * and the subject's next invoice in USD (another subscription's) takes it.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { run as runCli } from "../../src/cli/billing.js";
import { reasonOf } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";
import { dbTime } from "../../src/db/raw.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });
const eventsOf = async (s: Scenario, type: string, id: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).filter((e) => e.data.id === id);
/** Stripe's answers to the PaymentIntents made for invoice `id` (the status of each request). */
const chargesOf = (fake: FakeStripe, id: string) => fake.requests().filter((r) => r.operation === "POST /v1/payment_intents" && String(r.idempotencyKey).startsWith(`${id}:`));
const amountsOf = (fake: FakeStripe, id: string) =>
  fake
    .paymentIntents()
    .filter((pi) => (pi.metadata as Json)?.invoice_id === id)
    .map((pi) => [pi.status, pi.amount]);
/** The carried debits of invoice `id` as stored: [amount, the invoice that took it]. */
async function carriedOf(url: string, id: string): Promise<[string, string | null][]> {
  const rows = await withDatabase(url, (db) => db.dataSource.query("SELECT amount, applied_invoice_id AS a FROM carried_debits WHERE source_invoice_id = ?", [id]));
  return rows.map((r: Json) => [String(Number(r.amount)), r.a ?? null]);
}

/** The finance export of `url` (all time), as objects by column. */
async function exported(url: string): Promise<Record<string, string>[]> {
  let out = "";
  await runCli(["invoices", "export", "--from", "2000-01-01T00:00:00Z", "--to", "2100-01-01T00:00:00Z"], { out: (l) => (out += `${l}\n`), err: () => {} }, { DATABASE_URL: url });
  const [head = "", ...records] = out.split("\r\n").filter((l) => l.trim() !== "");
  const names = head.split(",");
  // No cell read here holds a comma or a quote.
  return records.map((r) =>
    Object.fromEntries(
      r
        .replace(/^\n/, "")
        .split(",")
        .map((v, i) => [names[i], v]),
    ),
  );
}

/** The dashboard's page at `path`, signed in with API key `key`. */
async function dashboardPage(base: string, key: string, path: string): Promise<string> {
  const jar: string[] = [];
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) jar.push(c.split(";")[0] as string);
    return res;
  };
  const csrf = /name="csrf" value="([^"]+)"/.exec(await keep(await fetch(`${base}/dashboard/sign-in`, { redirect: "manual" })).text())?.[1] ?? "";
  const body = new URLSearchParams({ csrf, api_key: key }).toString();
  keep(await fetch(`${base}/dashboard/sign-in`, { method: "POST", headers: { cookie: jar.join("; "), "content-type": "application/x-www-form-urlencoded" }, body, redirect: "manual" }));
  return (await fetch(`${base}${path}`, { headers: { cookie: jar.join("; ") }, redirect: "manual" })).text();
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY, SCHEDULER_INTERVAL_MS: "100" });

  /** A subject subscribed on Jan 15 at 4,900 a month with a Visa (dunning: one retry after 3 days, then cancel), 4,870 of credit granted, advanced to Feb 15. */
  async function carried(): Promise<{ s: Scenario; sub: string; feb: Json }> {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    await s.call("PATCH", "/payment-settings", { retry_schedule_days: [3], set_retry_schedule: true, after_last_attempt: "cancel", mark_uncollectible: true });
    const rateCard = await s.card({ fixed_rates: [{ code: "platform", name: "Platform", price: { price_type: "flat", amount: usd("4900") } }] });
    await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { platform: 1 } }, "visa");
    await fake.settle();
    const subs = (await s.call("GET", `/subscriptions?subject_id=${s.subjectId}`)) as Json;
    const sub = (subs.subscriptions ?? subs.items ?? subs.data)[0].id;
    await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("4870"), category: "promotional" });
    await s.advance("2026-02-15T00:00:00Z");
    await fake.settle();
    return { s, sub, feb: (await s.invoices()).at(-1) as Json };
  }

  test.serial(`${store}: 30 cents due (below Stripe's 0.50) is paid by carrying it: the next renewal, total 4,900, is due and charged 4,900 + 30 = 4,930, once`, async (t) => {
    t.timeout(180_000);
    const { server, fake } = ctx;
    const { s, sub, feb } = await carried();
    // 4,900 − 4,870 of credit = 30 due: Stripe refuses it (amount_too_small), the invoice is paid by the carry.
    t.like(await s.call("GET", `/invoices/${feb.id}`), { status: "paid", total_amount: usd("4900"), amount_due: usd("30"), amount_carried: usd("30"), next_payment_attempt: null });
    t.deepEqual(
      chargesOf(fake, feb.id).map((r) => r.status),
      [400],
      "Stripe refused it once (amount_too_small)",
    );
    t.is((await eventsOf(s, "invoice.paid", feb.id)).length, 1);
    t.regex(
      await dashboardPage(server.url, s.key, `/dashboard/invoices/${feb.id}`),
      /<dt>Payment<\/dt><dd>Carried to the subject's next invoice: USD 0\.30\. Not charged: the amount due is below Stripe&#39;s minimum charge/,
      "the operator sees why",
    );
    t.deepEqual(await eventsOf(s, "invoice.payment_failed", feb.id), []);
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", null]], "carried once, not taken yet");
    // Nothing was charged: no refund of it.
    const refund = await s.raw("POST", "/credit-notes", { invoice_id: feb.id, reason: "order_change", outcome: "refund", amount: "30" });
    t.deepEqual([refund.status, reasonOf(refund.body)], [400, "INVOICE_NOT_REFUNDABLE"], JSON.stringify(refund.body));
    // The carry is keyed by the invoice: the database refuses a second one.
    const again = withDatabase(server.db.url, (db) =>
      db.dataSource.query("INSERT INTO carried_debits (source_invoice_id, environment_id, subject_id, currency, amount, created_at) VALUES (?, ?, ?, 'USD', '30', ?)", [
        feb.id,
        "env_x",
        s.subjectId,
        dbTime(new Date()),
      ]),
    );
    await t.throwsAsync(again);
    t.like((await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)) as Json, { carried_balance: [usd("30")] });

    // Past the schedule: never charged again, no policy.
    await s.advance("2026-02-25T00:00:00Z");
    await fake.settle();
    t.is(chargesOf(fake, feb.id).length, 1);
    t.is((await s.call("GET", `/subscriptions/${sub}`)).status, "active");

    // Mar 15: total 4,900; amount due 4,900 + the 30 carried in = 4,930 (the credit is spent: 4,870 of 4,870), charged 4,930.
    await s.advance("2026-03-15T00:00:00Z");
    await fake.settle();
    const mar = (await s.invoices()).at(-1) as Json;
    t.not(mar.id, feb.id);
    t.like(await s.call("GET", `/invoices/${mar.id}`), {
      status: "paid",
      subtotal: usd("4900"),
      total_amount: usd("4900"),
      amount_carried_in: usd("30"),
      amount_due: usd("4930"),
      amount_carried: usd("0"),
    });
    t.deepEqual(
      mar.line_items.map((l: Json) => [l.kind, l.amount.value]),
      [["fixed", "4900"]],
      "no revenue line for the 30: Feb's total booked it",
    );
    const hosted = await (await fetch(`${server.url}${new URL(mar.hosted_url).pathname}`)).text();
    t.regex(hosted, new RegExp(`Balance carried from ${feb.number} \\(below the minimum charge\\)</td><td class="n">USD 0\\.30`));
    t.regex(
      await dashboardPage(server.url, s.key, `/dashboard/invoices/${mar.id}`),
      new RegExp(`<dt>Carried in</dt><dd><div>Balance carried from ${feb.number} \\(below the minimum charge\\) USD 0\\.30</div></dd>`),
      "the operator sees the 30 carried in",
    );
    t.deepEqual(amountsOf(fake, mar.id), [["succeeded", 4930]]);
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", mar.id]]);
    t.deepEqual(((await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)) as Json).carried_balance, []);

    // Apr 15: 4,900 alone, the 30 was taken once.
    await s.advance("2026-04-15T00:00:00Z");
    await fake.settle();
    const apr = (await s.invoices()).at(-1) as Json;
    t.like(await s.call("GET", `/invoices/${apr.id}`), { status: "paid", total_amount: usd("4900"), amount_due: usd("4900"), amount_carried_in: usd("0") });
    t.deepEqual(amountsOf(fake, apr.id), [["succeeded", 4900]]);

    // The finance export: Feb's invoice total 4,900 (30 of it carried, nothing collected); Mar's
    // total 4,900, the 30 in its own column and its amount due 4,930 (counted once: in Feb's total).
    const rows = await exported(server.db.url);
    t.like(
      rows.find((r) => r.invoice_id === feb.id),
      { status: "paid", invoice_total: "4900", amount_due: "30", amount_carried: "30", amount_carried_in: "0" },
    );
    t.deepEqual(
      rows.filter((r) => r.invoice_id === mar.id).map((r) => [r.line_kind, r.line_amount, r.invoice_subtotal, r.invoice_total, r.amount_carried_in, r.amount_due]),
      [["fixed", "4900", "4900", "4900", "30", "4930"]],
    );
  });

  test.serial(`${store}: cancelling the subscription leaves the 30 carried owed: the billing state shows it, and the subject's next USD invoice takes it`, async (t) => {
    t.timeout(180_000);
    const { server, fake } = ctx;
    const { s, sub, feb } = await carried();
    t.like(await s.call("GET", `/invoices/${feb.id}`), { status: "paid", amount_carried: usd("30") });
    await s.call("POST", `/subscriptions/${sub}/cancel`, {});
    t.is((await s.call("GET", `/subscriptions/${sub}`)).status, "cancelled");
    t.like((await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)) as Json, { carried_balance: [usd("30")] });
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", null]], "still owed");
    // The subject subscribes again (the card on file) to a 1,000 card: its first invoice's total is 1,000, due 1,000 + the 30 carried in = 1,030, charged 1,030.
    const rateCard = await s.card({ fixed_rates: [{ code: "basic", name: "Basic", price: { price_type: "flat", amount: usd("1000") } }] });
    t.is((await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: rateCard, fixed_rate_quantities: { basic: 1 } })).status, 200);
    await fake.settle();
    const next = (await s.invoices()).at(-1) as Json;
    t.like(next, { status: "paid", total_amount: usd("1000"), amount_carried_in: usd("30"), amount_due: usd("1030") });
    t.deepEqual(
      next.line_items.map((l: Json) => [l.kind, l.amount.value]),
      [["fixed", "1000"]],
    );
    t.deepEqual(amountsOf(fake, next.id), [["succeeded", 1030]]);
    t.deepEqual(await carriedOf(server.db.url, feb.id), [["30", next.id]]);
    t.deepEqual(((await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)) as Json).carried_balance, []);
  });
  test.serial(`${store}: a free plan's invoices take the 30 and carry it on: their totals stay 0, the export's paid totals are 4,900 + 4,900 = 9,800`, async (t) => {
    t.timeout(180_000);
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const { s, sub, feb } = await carried();
    await s.call("POST", `/subscriptions/${sub}/cancel`, {});
    const rateCard = await s.card({ fixed_rates: [{ code: "free", name: "Free", price: { price_type: "flat", amount: usd("0") } }] });
    await d.subscribe(s, { rate_card_id: rateCard, fixed_rate_quantities: { free: 1 } }, "visa");
    await fake.settle();
    for (const at of ["2026-03-15T00:00:00Z", "2026-04-15T00:00:00Z", "2026-05-15T00:00:00Z"]) {
      await s.advance(at);
      await fake.settle();
    }
    const all = (await s.invoices()) as Json[];
    const free = all.filter((i) => i.id !== feb.id && i.line_items.some((l: Json) => l.kind === "fixed" && l.amount.value === "0"));
    t.is(free.length, 4, "the free plan's first invoice and three renewals");
    // Each: total 0, 30 carried in, due 0 + 30 = 30 (below the minimum), paid by carrying the 30 on.
    for (const i of free) t.like(await s.call("GET", `/invoices/${i.id}`), { status: "paid", total_amount: usd("0"), amount_carried_in: usd("30"), amount_due: usd("30"), amount_carried: usd("30") });
    t.deepEqual(
      fake
        .paymentIntents()
        .filter((pi) => pi.status === "succeeded" && all.some((i) => i.id === (pi.metadata as Json)?.invoice_id))
        .map((pi) => pi.amount),
      [4900],
      "only Jan's 4,900 was collected (Feb's 4,900 was paid by 4,870 of credit and the 30 carried)",
    );
    t.like((await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)) as Json, { carried_balance: [usd("30")] });
    // The finance export: the 30 is in one invoice's total (Feb's); the chain moves it without counting it again:
    // paid totals 4,900 (Jan) + 4,900 (Feb) + 4 × 0 = 9,800 (the old model: 9,800 + 4 × 30 = 9,920);
    // carried out 5 × 30 = 150 less carried in 4 × 30 = 120: 30 still owed.
    const rows = new Map((await exported(server.db.url)).filter((r) => all.some((i) => i.id === r.invoice_id)).map((r) => [r.invoice_id, r]));
    const paid = [...rows.values()].filter((r) => r.status === "paid");
    const sum = (k: string) => paid.reduce((a, r) => a + Number(r[k]), 0);
    t.is(sum("invoice_total"), 9800);
    t.is(sum("amount_carried") - sum("amount_carried_in"), 30);
  });
}
