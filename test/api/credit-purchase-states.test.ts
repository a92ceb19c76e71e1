/**
 * A paid credit grant follows its invoice however the invoice ends (DESIGN §14), on MariaDB and
 * SQLite: a card saved in the customer portal is never tried on a purchase awaiting its checkout
 * (the customer's decision: dunning's retrySubject leaves it), whose completion then charges it
 * and activates the grant once, with its ledger entry and `credit_grant.activated`; voided or
 * marked uncollectible through the API, the grant fails and grants nothing;
 * a purchase waiting for its payment is voided, not credited (a credit note is refused).
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { reasonOf } from "../helpers/clients.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });

const ledgerOf = async (s: Scenario): Promise<[string, string][]> => ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);

/** A paid grant of 7.00 waiting for its checkout (no card on file): the grant and its open invoice. */
async function pendingPurchase(s: Scenario): Promise<Json> {
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
  if (r.credit_grant.status !== "pending_payment") throw new Error(`purchase: ${JSON.stringify(r)}`);
  return { ...r.credit_grant, checkoutUrl: r.checkout_url };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a card saved in the portal leaves a purchase awaiting its checkout; the checkout's completion activates its grant, once`, async (t) => {
    const s = await Scenario.start(server, AT);
    const grant = await pendingPurchase(s);
    await s.saveCardInPortal(CARD_OK);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "open", attempt_count: 0 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "pending_payment" });
    t.is((await s.payCheckout(grant.checkoutUrl, CARD_OK)).status, 303);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "paid", amount_due: usd("700") });
    // 7.00 bought = 7.00 granted, with its one ledger entry.
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "active", remaining_amount: usd("700") });
    t.deepEqual(await ledgerOf(s), [["grant", "700"]]);
    const activated = ((await s.call("GET", "/events?types=credit_grant.activated&limit=100")).events as Json[]).filter((e) => e.data.id === grant.id);
    t.is(activated.length, 1);
    const r = await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`);
    t.is((r.credit_grants as Json[]).length, 1);
  });

  test(`${store}: a purchase invoice voided through the API fails its grant: nothing granted`, async (t) => {
    const s = await Scenario.start(server, AT);
    const grant = await pendingPurchase(s);
    t.like(await s.call("POST", `/invoices/${grant.invoice_id}/void`, {}), { status: "void" });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
    t.deepEqual(await ledgerOf(s), []);
    // A card saved afterwards charges nothing: the invoice is void.
    await s.saveCardInPortal(CARD_OK);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void" });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed" });
  });

  test(`${store}: a purchase invoice marked uncollectible through the API fails its grant: nothing granted`, async (t) => {
    const s = await Scenario.start(server, AT);
    const grant = await pendingPurchase(s);
    t.like(await s.call("POST", `/invoices/${grant.invoice_id}/mark_uncollectible`, {}), { status: "uncollectible" });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
    t.deepEqual(await ledgerOf(s), []);
  });

  test(`${store}: a card declined on a purchase's checkout voids it as the purchase's own charge does: the grant fails, no retry planned`, async (t) => {
    const s = await Scenario.start(server, AT);
    // The default schedule (3, 5 and 7 days) is not a purchase's: it is charged once.
    const grant = await pendingPurchase(s);
    await s.saveCardInPortal("4000 0000 0000 9995"); // insufficient funds: a card saved in the portal is not tried on it (it awaits its checkout)
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "open", attempt_count: 0 });
    await s.payCheckout(grant.checkoutUrl, "4000 0000 0000 9995"); // the checkout's card, declined when charged
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 1, next_payment_attempt: null });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed", remaining_amount: usd("0") });
    t.deepEqual(await ledgerOf(s), []);
    const events = ((await s.call("GET", "/events?types=invoice.payment_failed&types=invoice.voided&limit=100")).events as Json[]).filter((e) => e.data.id === grant.invoice_id);
    t.deepEqual(events.map((e) => e.type).sort(), ["invoice.payment_failed", "invoice.voided"]);
  });

  test(`${store}: a purchase waiting for its payment is not credited: a credit note is refused, nothing written`, async (t) => {
    const s = await Scenario.start(server, AT);
    const grant = await pendingPurchase(s);
    const r = await s.raw("POST", "/credit-notes", { invoice_id: grant.invoice_id, reason: "other", outcome: "reduce_amount_due" });
    t.is(r.status, 400);
    t.is(reasonOf(r.body as Json), "INVOICE_NOT_CREDITABLE");
    t.deepEqual((await s.call("GET", `/credit-notes?invoice_id=${grant.invoice_id}`)).credit_notes, []);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "open", amount_due: usd("700") });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "pending_payment" });
  });
}
