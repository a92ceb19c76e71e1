/**
 * The hosted checkout's "Due today" is what its completion charges (DESIGN §15: line amounts →
 * discounts → subtotal → tax → total → credits → amount_due), worked out when the page is shown,
 * and POST /checkout's `amount` is the same as of opening. Through the real server, on MariaDB and
 * SQLite, on test clocks; amounts in cents, the arithmetic beside each case. The charge is read
 * from the invoice the completion wrote and paid (its amount_due is what the card was charged).
 */
import test from "ava";
import { coupon, percentOff, taxRate } from "../helpers/booking-bodies.js";
import { CALLBACKS, promo } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { fixedRate, flat } from "../helpers/price-bodies.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN_1 = "2026-01-01T00:00:00Z";

/** "Due today" as the checkout page shows it, and its summary rows as [label, amount]. */
async function shown(url: string): Promise<{ due: string; rows: [string, string][] }> {
  const page = await (await fetch(url)).text();
  const due = /Due today: <strong>([^<]*)<\/strong>/.exec(page)?.[1] ?? "";
  const rows = [...page.matchAll(/<tr class="[a-z-]+"><td>(.*?)<\/td><td class="n">(.*?)<\/td><\/tr>/g)].map((m) => [m[1], (m[2] as string).replace(/<[^>]*>/g, "")] as [string, string]);
  return { due, rows };
}

/** The subject's invoices with something on them, as [status, amount_due, credits applied]. */
async function charged(s: Scenario): Promise<[string, string, string[]][]> {
  const r = await s.call("GET", `/invoices?subject_id=${s.subjectId}&limit=100`);
  return (r.invoices as Json[]).filter((i) => i.total_amount.value !== "0").map((i) => [i.status, i.amount_due.value, ((i.credits_applied ?? []) as Json[]).map((c) => c.amount.value)]);
}

/** A plan of one fixed price of 5,000 (USD 50.00) with a 20% exclusive default tax. */
async function taxedPlan(s: Scenario): Promise<string> {
  return s.card({ name: "Pro", fixed_rates: [fixedRate(flat(5000), "base", "Base")], default_tax_rate_ids: [await taxRate(s, "VAT", "20")] });
}

/** POST /subscriptions for the subject without a card: the checkout URL. */
async function subscribeUrl(s: Scenario, body: Json): Promise<string> {
  const r = await s.subscribe(body, null);
  if (r.result_type !== "requires_action") throw new Error(`expected a checkout: ${JSON.stringify(r)}`);
  return r.action.checkout_url;
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: 50.00 + 20% tax: the page shows 60.00 due today and 60.00 is charged`, async (t) => {
    const s = await Scenario.start(server, JAN_1);
    const url = await subscribeUrl(s, { rate_card_id: await taxedPlan(s), fixed_rate_quantities: { base: 1 } });
    // 5,000; tax 20% of 5,000 = 1,000; total 6,000; no credit: 6,000 due.
    t.deepEqual(await shown(url), {
      due: "USD 60.00",
      rows: [
        ["Base", "USD 50.00"],
        ["Subtotal", "USD 50.00"],
        ["VAT 20%", "USD 10.00"],
        ["Total", "USD 60.00"],
      ],
    });
    t.is((await s.payCheckout(url, CARD_OK)).status, 303);
    t.deepEqual(await charged(s), [["paid", "6000", []]]);
  });

  test(`${store}: with a 10% coupon: 50.00 − 5.00 = 45.00, + 20% = 54.00 shown and charged`, async (t) => {
    const s = await Scenario.start(server, JAN_1);
    const off = await coupon(s, "Launch 10%", percentOff("10", "once"));
    const url = await subscribeUrl(s, { rate_card_id: await taxedPlan(s), fixed_rate_quantities: { base: 1 }, coupon_id: off });
    // 5,000 − 10% (500) = 4,500 subtotal; tax 20% of 4,500 = 900; total 5,400 due.
    t.deepEqual(await shown(url), {
      due: "USD 54.00",
      rows: [
        ["Base", "USD 50.00"],
        ["Discount: Launch 10%", "USD -5.00"],
        ["Subtotal", "USD 45.00"],
        ["VAT 20%", "USD 9.00"],
        ["Total", "USD 54.00"],
      ],
    });
    t.is((await s.payCheckout(url, CARD_OK)).status, 303);
    t.deepEqual(await charged(s), [["paid", "5400", []]]);
    // Shown before it was redeemed, used by the completion: the once coupon discounted one invoice.
    const [sub] = await s.subscriptions();
    t.like(((await s.call("GET", `/discounts?subscription_id=${sub?.id}`)).discounts as Json[])[0], { status: "ended", invoices_discounted: 1 });
  });

  test(`${store}: with 10.00 of credit balance: credit after tax (DESIGN §15): 60.00 − 10.00 = 50.00 shown and charged`, async (t) => {
    const s = await Scenario.start(server, JAN_1);
    await promo(s, "Welcome", 1000);
    const url = await subscribeUrl(s, { rate_card_id: await taxedPlan(s), fixed_rate_quantities: { base: 1 } });
    // 5,000 + 20% (1,000) = 6,000 total; credit 1,000 applied after tax; 5,000 due.
    t.deepEqual(await shown(url), {
      due: "USD 50.00",
      rows: [
        ["Base", "USD 50.00"],
        ["Subtotal", "USD 50.00"],
        ["VAT 20%", "USD 10.00"],
        ["Total", "USD 60.00"],
        ["Credit applied", "USD -10.00"],
      ],
    });
    t.is((await s.payCheckout(url, CARD_OK)).status, 303);
    t.deepEqual(await charged(s), [["paid", "5000", ["1000"]]]);
  });

  test(`${store}: POST /checkout's amount is what the checkout charges as of opening: 50.00 + 20% = 60.00`, async (t) => {
    const s = await Scenario.start(server, JAN_1);
    const r = await s.call("POST", "/checkout", { subject_id: s.subjectId, rate_card_id: await taxedPlan(s), checkout_callback_urls: CALLBACKS });
    // 5,000 + 20% (1,000) = 6,000.
    t.deepEqual(r.amount, { currency_code: "USD", value: "6000" });
    t.is((await shown(r.url)).due, "USD 60.00");
    t.is((await s.payCheckout(r.url, CARD_OK)).status, 303);
    t.deepEqual(await charged(s), [["paid", "6000", []]]);
  });

  test(`${store}: a change checkout with prorate shows the proration as of the page, which is what is charged`, async (t) => {
    const s = await Scenario.start(server, JAN_1);
    // Both cards taxed alike: the change's invoice is booked while the subscription is still on the old one.
    const vat = await taxRate(s, "VAT", "20");
    const free = await s.card({ name: "Free", fixed_rates: [fixedRate(flat(0), "base", "Base")], default_tax_rate_ids: [vat] });
    const pro = await s.card({ name: "Pro", fixed_rates: [fixedRate(flat(3100), "base", "Base")], default_tax_rate_ids: [vat] });
    const sub = (await s.subscribe({ rate_card_id: free, fixed_rate_quantities: { base: 1 } })).subscription.id;
    await s.advance("2026-01-11T00:00:00Z");
    const change = await s.call("POST", `/subscriptions/${sub}/change-rate-card`, { rate_card_id: pro, upgrade_behavior: "prorate", checkout_callback_urls: CALLBACKS });
    const url = change.result.action.checkout_url as string;
    // Jan 11, 21 of 31 days left: 3,100 × 21/31 = 2,100; + 20% (420) = 2,520.
    t.is((await shown(url)).due, "USD 25.20");
    // Half a day later (the checkout is open for 24 hours), 20.5 of 31 days left: 3,100 × 20.5/31 = 2,050; + 20% (410) = 2,460: shown, then charged.
    await s.advance("2026-01-11T12:00:00Z");
    t.is((await shown(url)).due, "USD 24.60");
    t.is((await s.payCheckout(url, CARD_OK)).status, 303);
    t.deepEqual(await charged(s), [["paid", "2460", []]]);
  });
}
