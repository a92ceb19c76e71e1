/**
 * A credit purchase's checkout that the customer does not complete is never charged (DESIGN §14),
 * and the cancel form of a checkout cancels only an open one (hosted-checkout.ts cancelCheckout),
 * on both stores, the real server driven with plain HTTP:
 * - cancelled on its page: the purchase ends as a declined one does, in the cancel's transaction
 *   (its invoice void, the grant failed, nothing charged), so a card saved later in the portal
 *   charges nothing. Before, the invoice stayed open and the portal's card paid it (dunning's
 *   retrySubject): credit the customer declined, charged;
 * - expired (24 h on the subject's clock): found so when the checkout is read, it ends the same;
 *   a card saved in the portal before that read does not charge it either;
 * - still open: a card saved in the portal leaves it to its checkout (the customer's decision),
 *   which can still be completed and then charges it once;
 * - the cancel form sent after the checkout was paid in another tab lands where a completed
 *   checkout lands (its success URL), the subscription active; sent again after a cancel, or on an
 *   expired checkout, it shows the gone page (410). Before, it sent the customer to the cancelled
 *   URL however the checkout stood.
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { form, location303 } from "../helpers/payment-flows.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });

const ledgerOf = async (s: Scenario): Promise<[string, string][]> => ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);

/** A paid grant of 7.00 waiting for its checkout (no card on file): the grant and its checkout's path. */
async function pendingPurchase(s: Scenario): Promise<{ grant: Json; path: string }> {
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
  if (r.credit_grant.status !== "pending_payment") throw new Error(`purchase: ${JSON.stringify(r)}`);
  return { grant: r.credit_grant, path: new URL(String(r.checkout_url)).pathname };
}

/** The invoice's and grant's events of the purchase, by type. */
async function eventsOf(s: Scenario, grant: Json): Promise<string[]> {
  const types = ["invoice.paid", "invoice.payment_failed", "invoice.voided", "credit_grant.activated"].map((x) => `types=${x}`).join("&");
  const events = (await s.call("GET", `/events?${types}&limit=100`)).events as Json[];
  return events.filter((e) => e.data.id === grant.invoice_id || e.data.id === grant.id).map((e) => e.type as string);
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a credit purchase's checkout cancelled on its page ends the purchase (void, failed); a card saved later charges nothing`, async (t) => {
    const s = await Scenario.start(server, AT);
    const { grant, path } = await pendingPurchase(s);
    const confirm = await fetch(`${server.url}${path}/cancel`);
    t.is(confirm.status, 200);
    t.regex(await confirm.text(), /nothing has been charged/);
    t.is(await location303(await form(`${server.url}${path}/cancel`), "cancel"), CALLBACKS.cancelled_url);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 0, next_payment_attempt: null });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
    // As a declined purchase ends: announced failed and voided, nothing granted.
    t.deepEqual((await eventsOf(s, grant)).sort(), ["invoice.payment_failed", "invoice.voided"]);
    await s.saveCardInPortal(CARD_OK);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 0 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed" });
    t.deepEqual(await ledgerOf(s), []);
    // Its page is gone; the cancel form sent again too.
    t.is((await fetch(`${server.url}${path}`)).status, 410);
    const again = await form(`${server.url}${path}/cancel`);
    t.is(again.status, 410);
    await again.body?.cancel();
  });

  test(`${store}: a credit purchase's checkout found expired ends the purchase; a card saved before that read does not charge it`, async (t) => {
    const s = await Scenario.start(server, AT);
    const { grant, path } = await pendingPurchase(s);
    await s.advance("2026-01-16T01:00:00Z"); // 25 h on the subject's clock: the checkout (24 h) expired
    // Saved before anything read the checkout: the purchase still awaits it, and is not charged.
    await s.saveCardInPortal(CARD_OK);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "open", attempt_count: 0 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "pending_payment" });
    const page = await fetch(`${server.url}${path}`);
    t.is(page.status, 410);
    await page.body?.cancel();
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 0 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
    const cancel = await form(`${server.url}${path}/cancel`);
    t.is(cancel.status, 410, "an expired checkout's cancel form: gone");
    await cancel.body?.cancel();
    await s.saveCardInPortal(CARD_OK);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 0 });
    t.deepEqual(await ledgerOf(s), []);
  });

  test(`${store}: a card saved in the portal leaves a purchase awaiting its open checkout to it; completed, it is charged once`, async (t) => {
    const s = await Scenario.start(server, AT);
    const { grant, path } = await pendingPurchase(s);
    await s.saveCardInPortal(CARD_OK);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "open", attempt_count: 0, amount_due: usd("700") });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "pending_payment" });
    t.deepEqual(await eventsOf(s, grant), []);
    const paid = await s.payCheckout(`${server.url}${path}`, CARD_OK);
    t.is(paid.status, 303);
    t.is(paid.location, CALLBACKS.success_url);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "paid", attempt_count: 1 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "active", remaining_amount: usd("700") });
    t.deepEqual(await ledgerOf(s), [["grant", "700"]]);
  });

  test(`${store}: the cancel form of a checkout paid in another tab lands on its success URL; the subscription stays active`, async (t) => {
    const s = await Scenario.start(server, AT);
    const plan = await s.card({ name: "Pro", fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: usd("3100") } }] });
    const r = await s.subscribe({ rate_card_id: plan, fixed_rate_quantities: { seats: 1 } }, null);
    const path = new URL(String(r.action.checkout_url)).pathname;
    const paid = await s.payCheckout(`${server.url}${path}`, CARD_OK);
    t.is(paid.location, CALLBACKS.success_url);
    // The other tab's cancel form, sent after.
    t.is(await location303(await form(`${server.url}${path}/cancel`), "cancel after paying"), CALLBACKS.success_url);
    const [sub] = await s.subscriptions();
    t.like(sub, { status: "active" });
    t.deepEqual(
      (await s.invoices()).map((i) => i.status),
      ["paid"],
    );
    // A credit purchase paid in one tab: its cancel form lands on the success URL too, the credit stays granted.
    const { grant, path: creditPath } = await pendingPurchase(await withoutCard(s));
    t.is((await s.payCheckout(`${server.url}${creditPath}`, CARD_OK)).location, CALLBACKS.success_url);
    t.is(await location303(await form(`${server.url}${creditPath}/cancel`), "cancel after buying"), CALLBACKS.success_url);
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "active" });
  });
}

/** A new subject without a card on the same environment and clock (a purchase then opens a checkout). */
async function withoutCard(s: Scenario): Promise<Scenario> {
  const other = new Scenario(s.server);
  other.key = s.key;
  other.clockId = s.clockId;
  other.subjectId = (await s.call("POST", "/subjects", { name: "Other", test_clock_id: s.clockId })).id;
  return other;
}
