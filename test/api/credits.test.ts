/**
 * Credit grants, the ledger and credit settings through the REST API (DESIGN §14), on MariaDB and
 * SQLite: promotional and paid grants (card on file, no card → hosted checkout, declined card),
 * get and list with filters, void, the ledger, settings, bad input (400 naming each field),
 * other environments' grants (404) and an Idempotency-Key replay of a create. Amounts in cents.
 */
import test from "ava";
import type { ConnectError } from "@connectrpc/connect";
import { CreditService } from "../../src/gen/billing/v1/credit_service_pb.js";
import { PROTOCOLS, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const CALLBACKS = { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" };
const usd = (value: string) => ({ currency_code: "USD", value });

/** A card on file: a subscription to a paid plan through a checkout paid with `card` saves it. */
async function cardOnFile(s: Scenario, card = CARD_OK): Promise<void> {
  const rc = await s.card({ fixed_rates: [{ code: "base", name: "Base", price: { price_type: "flat", amount: usd("100") } }] });
  await s.subscribe({ rate_card_id: rc, fixed_rate_quantities: { base: 1 }, create_checkout_session: "always" }, card);
}

const ledgerOf = async (s: Scenario): Promise<[string, string][]> => ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a promotional grant is active at once, with its grant entry; defaults filled in`, async (t) => {
    const s = await Scenario.start(server, AT);
    const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: { currency_code: "usd", value: 5000 }, metadata: { k: "v" } });
    const g = r.credit_grant;
    t.is(r.checkout_url, null);
    t.like(g, {
      subject_id: s.subjectId,
      amount: usd("5000"),
      remaining_amount: usd("5000"),
      category: "promotional",
      priority: 50,
      effective_at: AT,
      expires_at: null,
      applies_to_rate_codes: [],
      metadata: { k: "v" },
      status: "active",
      invoice_id: null,
      created_at: AT,
      voided_at: null,
      expired_at: null,
    });
    t.regex(g.id, /^cg_[0-9A-Za-z]{22}$/);
    t.deepEqual(await s.call("GET", `/credit-grants/${g.id}`), g);
    t.deepEqual(await ledgerOf(s), [["grant", "5000"]]);
  });

  test(`${store}: list by subject and status, in creation order, paginated; void takes the rest off`, async (t) => {
    const s = await Scenario.start(server, AT);
    const other = (await s.call("POST", "/subjects", { name: "Other" })).id;
    const ids: string[] = [];
    for (const v of ["100", "200", "300"]) ids.push((await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd(v) })).credit_grant.id);
    await s.call("POST", "/credit-grants", { subject_id: other, amount: usd("1") });
    const page1 = await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&limit=2`);
    t.deepEqual(
      page1.credit_grants.map((g: Json) => g.id),
      ids.slice(0, 2),
    );
    t.true(page1.has_more);
    const page2 = await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&limit=2&offset=2`);
    t.deepEqual(
      page2.credit_grants.map((g: Json) => g.id),
      ids.slice(2),
    );
    t.false(page2.has_more);
    t.is((await s.call("GET", "/credit-grants?limit=100")).credit_grants.length, 4);
    const voided = await s.call("POST", `/credit-grants/${ids[1]}/void`, {});
    t.like(voided, { status: "voided", remaining_amount: usd("0"), voided_at: AT });
    t.deepEqual(
      (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&status=voided`)).credit_grants.map((g: Json) => g.id),
      [ids[1]],
    );
    t.deepEqual(await ledgerOf(s), [
      ["grant", "100"],
      ["grant", "200"],
      ["grant", "300"],
      ["void", "-200"],
    ]);
    const again = await s.raw("POST", `/credit-grants/${ids[1]}/void`, {});
    t.is(again.status, 400);
    t.is((again.body as Json).code, "failed_precondition");
    const usdOnly = await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?currency_code=EUR`);
    t.deepEqual(usdOnly, { has_more: false, entries: [] });
  });

  test(`${store}: a paid grant with a card on file is invoiced, charged and active`, async (t) => {
    const s = await Scenario.start(server, AT);
    await cardOnFile(s);
    const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("2500"), category: "paid", priority: 10 });
    t.is(r.checkout_url, null);
    t.like(r.credit_grant, { category: "paid", status: "active", priority: 10, remaining_amount: usd("2500") });
    const invoice = await s.call("GET", `/invoices/${r.credit_grant.invoice_id}`);
    t.like(invoice, { status: "paid", subject_id: s.subjectId });
    t.deepEqual(
      invoice.line_items.map((l: Json) => [l.kind, l.amount.value]),
      [["credit_purchase", "2500"]],
    );
    t.deepEqual(await ledgerOf(s), [["grant", "2500"]]);
  });

  test(`${store}: a paid grant without a card waits for its checkout; paying it activates the grant`, async (t) => {
    const s = await Scenario.start(server, AT);
    const missing = await s.raw("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid" });
    t.is(missing.status, 400);
    t.deepEqual(violatedFields(missing.body as Json), ["checkout_callback_urls"]);
    t.deepEqual((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants, [], "nothing written");
    const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("700"), category: "paid", checkout_callback_urls: CALLBACKS });
    t.like(r.credit_grant, { status: "pending_payment" });
    t.truthy(r.checkout_url);
    t.deepEqual(await ledgerOf(s), []);
    const paid = await s.payCheckout(r.checkout_url, CARD_OK);
    t.is(paid.status, 303);
    t.like(await s.call("GET", `/credit-grants/${r.credit_grant.id}`), { status: "active", remaining_amount: usd("700") });
    t.like(await s.call("GET", `/invoices/${r.credit_grant.invoice_id}`), { status: "paid" });
    t.deepEqual(await ledgerOf(s), [["grant", "700"]]);
    t.not((await s.payCheckout(r.checkout_url, CARD_OK)).status, 303, "a completed checkout cannot be used again");
  });

  test(`${store}: a paid grant whose charge is declined fails and grants nothing`, async (t) => {
    const s = await Scenario.start(server, AT);
    await cardOnFile(s, CARD_FAILS_LATER);
    const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("900"), category: "paid" });
    t.like(r.credit_grant, { status: "failed", remaining_amount: usd("0") });
    t.like(await s.call("GET", `/invoices/${r.credit_grant.invoice_id}`), { status: "void" });
    t.deepEqual(await ledgerOf(s), []);
    const v = await s.raw("POST", `/credit-grants/${r.credit_grant.id}/void`, {});
    t.is(v.status, 400);
  });

  test(`${store}: settings default to off, are set and read back per currency`, async (t) => {
    const s = await Scenario.start(server, AT);
    const path = `/subjects/${s.subjectId}/credit-settings`;
    t.deepEqual(await s.call("GET", `${path}?currency_code=USD`), { subject_id: s.subjectId, currency_code: "USD", low_balance_threshold: null, auto_top_up: null });
    const body = { currency_code: "USD", low_balance_threshold: usd("500"), auto_top_up: { threshold: usd("100"), amount: usd("2000") } };
    const set = await s.call("PUT", path, body);
    t.deepEqual(set, {
      subject_id: s.subjectId,
      currency_code: "USD",
      low_balance_threshold: usd("500"),
      auto_top_up: { threshold: usd("100"), amount: usd("2000"), priority: 50 },
    });
    t.deepEqual(await s.call("GET", `${path}?currency_code=USD`), set);
    t.like(await s.call("GET", `${path}?currency_code=EUR`), { low_balance_threshold: null });
    t.deepEqual(await s.call("PUT", path, { currency_code: "USD" }), { subject_id: s.subjectId, currency_code: "USD", low_balance_threshold: null, auto_top_up: null });
    const bad = await s.raw("PUT", path, { currency_code: "USD", low_balance_threshold: usd("-1"), auto_top_up: { threshold: usd("1"), amount: usd("0"), priority: 101 } });
    t.is(bad.status, 400);
    t.deepEqual(violatedFields(bad.body as Json), ["low_balance_threshold.value", "auto_top_up.amount.value", "auto_top_up.priority"]);
    const noCurrency = await s.raw("GET", `${path}?currency_code=XYZ`);
    t.deepEqual(violatedFields(noCurrency.body as Json), ["currency_code"]);
  });

  test(`${store}: bad input is a 400 naming every field, nothing written`, async (t) => {
    const s = await Scenario.start(server, AT);
    const bad = await s.raw("POST", "/credit-grants", {
      subject_id: s.subjectId,
      amount: { currency_code: "XYZ", value: "0" },
      category: "gift",
      priority: 0,
      applies_to_rate_codes: ["a", "", "a"],
    });
    t.is(bad.status, 400);
    t.deepEqual(violatedFields(bad.body as Json), ["amount.currency_code", "amount.value", "category", "priority", "applies_to_rate_codes[1]", "applies_to_rate_codes[2]"]);
    const fraction = await s.raw("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("1.5") });
    t.deepEqual(violatedFields(fraction.body as Json), ["amount.value"]);
    const order = await s.raw("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("1"), effective_at: "2026-02-01T00:00:00Z", expires_at: "2026-02-01T00:00:00Z" });
    t.deepEqual(violatedFields(order.body as Json), ["expires_at"]);
    const noAmount = await s.raw("POST", "/credit-grants", { subject_id: s.subjectId });
    t.deepEqual(violatedFields(noAmount.body as Json), ["amount"]);
    t.is((await s.raw("POST", "/credit-grants", { subject_id: "nobody", amount: usd("1") })).status, 404);
    t.is((await s.raw("GET", "/credit-grants?status=spent")).status, 400);
    t.is((await s.raw("GET", "/credit-grants?limit=0")).status, 400);
    t.deepEqual(await ledgerOf(s), []);
  });

  test(`${store}: another environment's grants and ledgers are not found`, async (t) => {
    const s = await Scenario.start(server, AT);
    const id = (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("10") })).credit_grant.id;
    const otherKey = await server.freshKey("test");
    t.is((await rest(server.url, "GET", `/credit-grants/${id}`, otherKey)).status, 404);
    t.is((await rest(server.url, "POST", `/credit-grants/${id}/void`, otherKey, {})).status, 404);
    t.is((await rest(server.url, "GET", `/subjects/${s.subjectId}/credit-ledger`, otherKey)).status, 404);
    t.deepEqual((await rest(server.url, "GET", "/credit-grants", otherKey)).body, { has_more: false, credit_grants: [] });
  });

  test(`${store}: a grant expires when its clock passes expires_at; each change is an event with the grant`, async (t) => {
    const s = await Scenario.start(server, AT);
    const id = (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("800"), expires_at: "2026-01-20T12:00:00Z" })).credit_grant.id;
    const kept = (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd("50") })).credit_grant.id;
    await s.advance("2026-01-20T11:59:59Z");
    t.like(await s.call("GET", `/credit-grants/${id}`), { status: "active" });
    await s.advance("2026-01-21T00:00:00Z");
    t.like(await s.call("GET", `/credit-grants/${id}`), { status: "expired", remaining_amount: usd("0"), expired_at: "2026-01-20T12:00:00Z" });
    await s.call("POST", `/credit-grants/${kept}/void`, {});
    t.deepEqual(await ledgerOf(s), [
      ["grant", "800"],
      ["grant", "50"],
      ["expiry", "-800"],
      ["void", "-50"],
    ]);
    const events = ((await s.call("GET", "/events?limit=100")).events as Json[]).filter((e) => e.type.startsWith("credit_grant."));
    t.deepEqual(
      events.map((e) => [e.type, e.data.id, e.data.status]),
      [
        ["credit_grant.created", id, "active"],
        ["credit_grant.created", kept, "active"],
        ["credit_grant.expired", id, "expired"],
        ["credit_grant.voided", kept, "voided"],
      ],
    );
  });

  test(`${store}: Connect, gRPC and gRPC-Web serve the same grants and errors`, async (t) => {
    const s = await Scenario.start(server, AT);
    for (const protocol of PROTOCOLS) {
      const client = rpcClient(CreditService, server.url, protocol, s.key);
      const made = await client.createCreditGrant({ subjectId: s.subjectId, amount: { currencyCode: "USD", value: "15" }, priority: 7 });
      t.like(made.creditGrant, { status: "active", priority: 7, amount: { currencyCode: "USD", value: "15" } }, protocol);
      const read = await client.getCreditGrant({ creditGrantId: made.creditGrant?.id ?? "" });
      t.is(read.creditGrant?.id, made.creditGrant?.id, protocol);
      const err = await t.throwsAsync(client.createCreditGrant({ subjectId: s.subjectId, amount: { currencyCode: "USD", value: "-1" } }));
      t.regex((err as ConnectError).rawMessage, /amount\.value/, protocol);
    }
    t.is((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries.length, PROTOCOLS.length);
  });

  test(`${store}: a create replayed with its Idempotency-Key makes one grant`, async (t) => {
    const s = await Scenario.start(server, AT);
    const send = () =>
      fetch(`${server.url}/credit-grants`, {
        method: "POST",
        headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": "grant-once" },
        body: JSON.stringify({ subject_id: s.subjectId, amount: usd("42") }),
      });
    const first = await send();
    const second = await send();
    t.is(first.status, 200);
    t.is(second.headers.get("idempotent-replayed"), "true");
    t.is(await second.text(), await first.text());
    t.is((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants.length, 1);
    t.deepEqual(await ledgerOf(s), [["grant", "42"]]);
  });
}
