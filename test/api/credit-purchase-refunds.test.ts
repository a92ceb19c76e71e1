/**
 * Golden cases, on MariaDB and SQLite: a refund credit note on a paid credit purchase takes back
 * the credit it refunds (DESIGN §14, §15; docs/credits.md): the grant's remaining falls by the
 * note's total with a "void" ledger entry on the purchase's invoice (its `invoice_id`, never the
 * note's ID) whose description names the note by number, at most what is still unspent; a refund beyond it
 * (credit spent on invoices, or the grant voided) is refused with CREDIT_ALREADY_SPENT naming the
 * amount's field, and nothing is written or refunded. The arithmetic is written beside each amount.
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { reasonOf, violatedFields } from "../helpers/clients.js";
import { CALLBACKS, creditState } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const usd = (value: string) => ({ currency_code: "USD", value });

/** A subscription of one seat at 4.50 a month with a card on file (its Jan 15 invoice charged to it). */
async function subscribed(s: Scenario): Promise<void> {
  const card = await s.card({ fixed_rates: [seats(450)] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_OK);
}

/** A paid grant of `value` bought with the card on file (charged at once): the grant. */
async function bought(s: Scenario, value: string): Promise<Json> {
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd(value), category: "paid", checkout_callback_urls: CALLBACKS });
  if (r.credit_grant.status !== "active") throw new Error(`purchase: ${JSON.stringify(r)}`);
  return r.credit_grant;
}

const refund = (s: Scenario, invoiceId: string, ask: Json = {}) => s.raw("POST", "/credit-notes", { invoice_id: invoiceId, reason: "other", outcome: "refund", ...ask });

/** The grant as [status, remaining], the ledger as [type, amount], the balance, and the purchase invoice's amount credited. */
async function state(s: Scenario, grant: Json): Promise<Json> {
  const g = await s.call("GET", `/credit-grants/${grant.id}`);
  const ledger = ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);
  const inv = await s.call("GET", `/invoices/${grant.invoice_id}`);
  const notes = (await s.call("GET", `/credit-notes?invoice_id=${grant.invoice_id}`)).credit_notes as Json[];
  return {
    grant: [g.status, g.remaining_amount.value],
    ledger,
    balance: (await creditState(s))[0],
    credited: inv.amount_credited?.value ?? "0",
    notes: notes.map((n) => n.total.value),
  };
}

/** The "void" ledger entries of the subject as [invoice_id, description, amount]. */
async function voids(s: Scenario): Promise<[string, string, string][]> {
  const entries = (await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[];
  return entries.filter((e) => e.entry_type === "void").map((e) => [e.invoice_id, e.description, e.amount.value]);
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a whole refund of unspent purchased credit takes it all back: the grant is voided`, async (t) => {
    const s = await Scenario.start(server, AT);
    await s.saveCardInPortal(CARD_OK);
    const grant = await bought(s, "700");
    const r = await refund(s, grant.invoice_id);
    t.is(r.status, 200, JSON.stringify(r.body));
    t.like(r.body, { outcome: "refund", total: usd("700") });
    t.truthy(r.body.refund_id);
    const after = await state(s, grant);
    t.deepEqual(after.grant, ["voided", "0"]); // 700 − 700 = 0
    t.deepEqual(after.ledger, [
      ["grant", "700"],
      ["void", "-700"], // the refund takes back all 700: balance 700 − 700 = 0
    ]);
    t.is(after.credited, "700");
    t.is(after.balance, "0");
    const voided = ((await s.call("GET", "/events?types=credit_grant.voided&limit=100")).events as Json[]).filter((e) => e.data.id === grant.id);
    t.is(voided.length, 1);
    // The entry is on the purchase's invoice, and names the note.
    t.deepEqual(await voids(s), [[grant.invoice_id, `Refunded by credit note ${r.body.number}`, "-700"]]);
  });

  test(`${store}: partial refunds take back their amounts; one beyond what is left is refused, nothing written`, async (t) => {
    const s = await Scenario.start(server, AT);
    await s.saveCardInPortal(CARD_OK);
    const grant = await bought(s, "700");
    const first = await refund(s, grant.invoice_id, { amount: "200" });
    t.is(first.status, 200);
    const second = await refund(s, grant.invoice_id, { amount: "300" });
    t.is(second.status, 200);
    t.not(first.body.number, second.body.number);
    // Two entries on the one purchase invoice, each naming its own note.
    t.deepEqual(await voids(s), [
      [grant.invoice_id, `Refunded by credit note ${first.body.number}`, "-200"],
      [grant.invoice_id, `Refunded by credit note ${second.body.number}`, "-300"],
    ]);
    const after = await state(s, grant);
    t.deepEqual(after.grant, ["active", "200"]); // 700 − 200 − 300 = 200
    t.deepEqual(after.ledger, [
      ["grant", "700"],
      ["void", "-200"], // first refund: 700 − 200 = 500 left
      ["void", "-300"], // second refund: 500 − 300 = 200 left
    ]);
    t.is(after.credited, "500"); // 200 + 300
    t.is(after.balance, "200");
    // 250 > the 200 left to credit of the invoice (700 − 500), which is the 200 unspent too: refused.
    const over = await refund(s, grant.invoice_id, { amount: "250" });
    t.is(over.status, 400);
    t.is(reasonOf(over.body as Json), "CREDIT_EXCEEDS_INVOICE");
    t.deepEqual(await state(s, grant), after, "nothing written");
    // The rest, 200, can be refunded: 200 − 200 = 0, voided.
    t.is((await refund(s, grant.invoice_id)).status, 200);
    t.like(await state(s, grant), { grant: ["voided", "0"], credited: "700", notes: ["200", "300", "200"] });
  });

  test(`${store}: credit already spent on an invoice cannot be refunded; the unspent rest can`, async (t) => {
    const s = await Scenario.start(server, AT);
    await subscribed(s); // Jan 15: 450 charged to the card
    const grant = await bought(s, "700");
    await s.advance("2026-02-15T00:00:00Z"); // Feb 15: 450 paid by the credit, 700 − 450 = 250 left
    t.deepEqual((await state(s, grant)).grant, ["active", "250"]);
    // The whole invoice (700) or its line (700) > the 250 unspent: refused, naming the field.
    const whole = await refund(s, grant.invoice_id);
    t.is(whole.status, 400);
    t.is(reasonOf(whole.body as Json), "CREDIT_ALREADY_SPENT");
    t.deepEqual(violatedFields(whole.body as Json), ["amount"]);
    const line = await refund(s, grant.invoice_id, { lines: [{ invoice_line_index: 0, amount: "300" }] }); // 300 > 250
    t.is(line.status, 400);
    t.is(reasonOf(line.body as Json), "CREDIT_ALREADY_SPENT");
    t.deepEqual(violatedFields(line.body as Json), ["lines[0].amount"]);
    const before = await state(s, grant);
    t.deepEqual(before.notes, []);
    t.is(before.credited, "0");
    // The unspent 250 is refunded and taken back.
    t.is((await refund(s, grant.invoice_id, { amount: "250" })).status, 200);
    const after = await state(s, grant);
    t.deepEqual(after.grant, ["voided", "0"]); // 250 − 250 = 0
    t.deepEqual(after.ledger, [
      ["grant", "700"],
      ["application", "-450"], // Feb 15's invoice: 700 − 450 = 250
      ["void", "-250"], // the refund: 250 − 250 = 0
    ]);
    t.is(after.credited, "250");
  });

  test(`${store}: a purchase whose grant was voided cannot be refunded (its credit is gone)`, async (t) => {
    const s = await Scenario.start(server, AT);
    await s.saveCardInPortal(CARD_OK);
    const grant = await bought(s, "700");
    await s.call("POST", `/credit-grants/${grant.id}/void`, {});
    const r = await refund(s, grant.invoice_id, { amount: "100" }); // 100 > 0 left of a voided grant
    t.is(r.status, 400);
    t.is(reasonOf(r.body as Json), "CREDIT_ALREADY_SPENT");
    t.regex(String((r.body as Json).message), /voided/);
    t.deepEqual((await state(s, grant)).notes, []);
  });

  test(`${store}: a refund of an invoice that is not a credit purchase takes back no credit`, async (t) => {
    const s = await Scenario.start(server, AT);
    await subscribed(s);
    const grant = await bought(s, "700");
    const [first] = await s.invoices();
    const r = await refund(s, String(first?.id), { amount: "100" });
    t.is(r.status, 200, JSON.stringify(r.body));
    t.deepEqual((await state(s, grant)).grant, ["active", "700"]);
  });
}
