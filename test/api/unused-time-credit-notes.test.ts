/**
 * A resume's credit for the cycle a pause cut short, and a change of rate card's credit for the old
 * card, are recorded on the invoice(s) they were drawn on (amount credited), as a seat decrease's
 * is (seat-decrease-credit-notes.test.ts): a credit note may then credit only what is left, and a
 * credit valued after a note is worth what the note left (unused-time-after-refund.test.ts).
 * Through the real server (REST) on a test clock, on MariaDB and SQLite. Amounts in cents (USD).
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { reasonOf } from "../helpers/clients.js";
import { ledger } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { patch } from "../helpers/price-bodies.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** The invoice's [status, total, amount due, amount credited]. */
async function credited(s: Scenario, id: string): Promise<string[]> {
  const i = await s.call("GET", `/invoices/${id}`);
  return [i.status, i.total_amount.value, i.amount_due.value, i.amount_credited.value];
}

/** 1 seat at 1,000 a month from January 15 (31 days), paused on January 18 (28 days left): its subscription and first invoice. */
async function pausedOnThe18th(s: Scenario): Promise<{ id: string; invoice: string }> {
  const card = await s.card({ fixed_rates: [seats()] });
  const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
  await s.advance("2026-01-18T00:00:00Z");
  await s.call("POST", `/subscriptions/${id}/pause`, {});
  const [first] = await s.invoices();
  return { id, invoice: String(first?.id) };
}

/** A refund note of `amount` (all that is left without it) of invoice `id`, as sent: its status, reason and message. */
async function refund(s: Scenario, id: string, amount?: string): Promise<[number, string | undefined, string]> {
  const r = await s.raw("POST", "/credit-notes", { invoice_id: id, reason: "other", outcome: "refund", ...(amount ? { amount } : {}) });
  return [r.status, reasonOf(r.body), String(r.body.message ?? r.body.total?.value)];
}

/** Pro (10,000) and Ent (20,000) cards, 1 Pro seat from January 15 (31 days): the cards, the subscription and its first invoice. */
async function onPro(s: Scenario): Promise<{ ent: string; id: string; invoice: string }> {
  const pro = await s.card({ name: "Pro", fixed_rates: [seats(10000, "pro", "Pro")] });
  const ent = await s.card({ name: "Ent", fixed_rates: [seats(20000, "ent", "Ent")] });
  const id = (await s.subscribe({ rate_card_id: pro, fixed_rate_quantities: { pro: 1 } })).subscription.id;
  const [first] = await s.invoices();
  return { ent, id, invoice: String(first?.id) };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: after a resume credited 903 of the paused cycle's 1,000, a credit note refunds at most the 97 left`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { id, invoice } = await pausedOnThe18th(s);
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    // 1,000 × 28/31 = 903.2 → 903 off the resume's invoice (1,000 − 903 = 97), given back of the paused cycle's invoice.
    const [, resumed] = await s.invoices();
    t.deepEqual([resumed?.status, resumed?.total_amount.value], ["paid", "97"]);
    t.deepEqual(await credited(s, invoice), ["paid", "1000", "1000", "903"]);
    // A refund of all 1,000 would give back the 903 a second time (the old code took it: 1,903 back of 1,000 paid).
    const over = await refund(s, invoice, "1000");
    t.deepEqual(over.slice(0, 2), [400, "CREDIT_EXCEEDS_INVOICE"]);
    t.regex(over[2], /^1000 to credit, but 97 of invoice .*'s total 1000 is left to credit$/);
    // The whole note refunds what is left: 1,000 − 903 = 97; 903 + 97 = 1,000 back in all.
    t.deepEqual(await refund(s, invoice), [200, undefined, "97"]);
    t.deepEqual(await credited(s, invoice), ["paid", "1000", "1000", "1000"]);
  });

  test(`${store}: a resume after a refund of 500 of 1,000 credits the 500 left and records it: nothing is left to credit`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { id, invoice } = await pausedOnThe18th(s);
    t.deepEqual(await refund(s, invoice, "500"), [200, undefined, "500"]);
    await s.advance("2026-01-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    // 903 unused, held to what the note left: 1,000 − 500 = 500 credited (resume's invoice 1,000 − 500 = 500); 500 + 500 = 1,000 given back.
    const [, resumed] = await s.invoices();
    t.deepEqual([resumed?.status, resumed?.total_amount.value], ["paid", "500"]);
    t.deepEqual(await credited(s, invoice), ["paid", "1000", "1000", "1000"]);
    const again = await refund(s, invoice, "1");
    t.deepEqual(again.slice(0, 2), [400, "CREDIT_EXCEEDS_INVOICE"]);
  });

  test(`${store}: a resume and a whole refund at the same time give back 1,000 in all, whichever the database takes first`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { id, invoice } = await pausedOnThe18th(s);
    await s.advance("2026-01-20T00:00:00Z");
    const [, note] = await Promise.all([s.call("POST", `/subscriptions/${id}/resume`, {}), refund(s, invoice)]);
    const [, resumed] = await s.invoices();
    const off = 1000 - Number(resumed?.total_amount.value);
    // The resume first: 903 off its invoice and 97 refunded; the note first: 1,000 refunded and nothing off.
    t.true((off === 903 && note[2] === "97") || (off === 0 && note[2] === "1000"), `${off} credited, ${note[2]} refunded`);
    t.deepEqual(await credited(s, invoice), ["paid", "1000", "1000", "1000"]);
  });

  test(`${store}: a resume's credit drawn on seats whose invoice is open lowers what it asks, not the resume's invoice`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats()] });
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
    await s.saveCardInPortal(CARD_FAILS_LATER);
    await s.advance("2026-02-15T00:00:00Z");
    // Feb 1: 1,000 paid. Feb 15: 1 → 2, 1,000 × 14/28 = 500, its charge declined: open. Paused then.
    const up = (await patch(s, id, { fixed_rate_quantities: { seats: 2 } })).proration_invoice;
    t.deepEqual([up.status, up.amount_due.value], ["open", "500"]);
    await s.call("POST", `/subscriptions/${id}/pause`, {});
    await s.advance("2026-02-20T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    // 2 × 1,000 × 14/28 = 1,000 unused, drawn newest first: the open invoice's 500 (no longer asked: paid by the
    // credit) and 500 of Feb 1's. The resume's invoice: 2 × 1,000 − 500 = 1,500 (the old code: − 1,000 = 1,000,
    // and the 500 still asked, voided or written off leaving the customer 500 credited for money never received).
    t.deepEqual(await credited(s, up.id), ["paid", "500", "0", "500"]);
    const [first] = await s.invoices();
    t.deepEqual(await credited(s, String(first?.id)), ["paid", "1000", "1000", "500"]);
    const resumed = (await s.invoices()).at(-1) as Json;
    t.is(resumed.total_amount.value, "1500");
    t.deepEqual(await ledger(s), []);
  });

  test(`${store}: after an upgrade credited 9,355 of Pro's 10,000, a credit note refunds at most the 645 left`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { ent, id, invoice } = await onPro(s);
    await s.advance("2026-01-17T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: ent });
    // Pro's unused 10,000 × 29/31 = 9,354.8 → −9,355 and Ent's +18,710 on the change's invoice (9,355): 9,355 given back of Pro's.
    const [, change] = await s.invoices();
    t.is(change?.total_amount.value, "9355");
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "10000", "9355"]);
    // A refund of all 10,000 would give back the 9,355 a second time (the old code took it: 19,355 back of 10,000 paid).
    const over = await refund(s, invoice, "10000");
    t.deepEqual(over.slice(0, 2), [400, "CREDIT_EXCEEDS_INVOICE"]);
    t.regex(over[2], /^10000 to credit, but 645 of invoice .*'s total 10000 is left to credit$/);
    // 10,000 − 9,355 = 645.
    t.deepEqual(await refund(s, invoice), [200, undefined, "645"]);
  });

  test(`${store}: an upgrade after a refund of 4,000 of Pro's 10,000 credits the 6,000 left and records it`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { ent, id, invoice } = await onPro(s);
    await s.advance("2026-01-17T00:00:00Z");
    t.deepEqual(await refund(s, invoice, "4000"), [200, undefined, "4000"]);
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: ent });
    // Pro's unused 9,355 held to what the note left: 10,000 − 4,000 = 6,000; Ent's 20,000 × 29/31 = 18,710: 18,710 − 6,000 = 12,710.
    const [, change] = await s.invoices();
    t.is(change?.total_amount.value, "12710");
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "10000", "10000"]);
    t.deepEqual((await refund(s, invoice, "1")).slice(0, 2), [400, "CREDIT_EXCEEDS_INVOICE"]);
  });

  test(`${store}: a seat change past what was paid on Pro after a downgrade records Pro's credit: a note refunds at most the 323 left`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { id, invoice } = await onPro(s);
    const basic = await s.card({ name: "Basic", fixed_rates: [seats(2000, "basic", "Basic")] });
    await s.advance("2026-01-16T00:00:00Z");
    // Pro → Basic charges nothing (the period stays paid on Pro); Basic 1 → 6 (12,000, past Pro's 10,000) is priced from Pro:
    // Pro's unused 10,000 × 30/31 = 9,677.4 → −9,677, Basic's +11,612 (1,935), as patch-after-downgrade.test.ts bills it.
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: basic });
    const patched = await patch(s, id, { fixed_rate_quantities: { basic: 6 } });
    t.is(patched.proration_invoice.total_amount.value, "1935");
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "10000", "9677"]);
    // 10,000 − 9,677 = 323 left (the old code refunded all 10,000: 19,677 back of 10,000 paid for Pro).
    const over = await refund(s, invoice, "10000");
    t.regex(over[2], /^10000 to credit, but 323 of invoice .*'s total 10000 is left to credit$/);
    t.deepEqual(await refund(s, invoice), [200, undefined, "323"]);
  });

  test(`${store}: a second upgrade in the period credits Ent's time at what was paid for it, the first credit counted once`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { ent, id, invoice } = await onPro(s);
    const max = await s.card({ name: "Max", fixed_rates: [seats(40000, "max", "Max")] });
    await s.advance("2026-01-17T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: ent });
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: max });
    // Ent's 18,710 was paid by Pro's 9,355 credit and 9,355 of cash: all of it is credited, none of Pro's again.
    // Max: 40,000 × 29/31 = 37,419.4; the difference (40,000 − 20,000) × 29/31 = 18,709.7 → 18,710: −18,710 + 37,420.
    const [, , second] = await s.invoices();
    t.deepEqual(
      second?.line_items.map((l: Json) => l.amount.value),
      ["-18710", "37420"],
    );
    t.deepEqual(await credited(s, invoice), ["paid", "10000", "10000", "9355"]);
    // The first change's invoice: its 18,710 of Ent less the 9,355 of Pro's credit on it; Ent's credit given back of what it took.
    const [, first] = await s.invoices();
    t.deepEqual(await credited(s, String(first?.id)), ["paid", "9355", "9355", "9355"]);
  });
}
