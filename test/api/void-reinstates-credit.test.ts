/**
 * DESIGN §14: voiding an invoice gives back the credit it spent (as Stripe returns the balance
 * applied to an invoice it voids), through the public API on a test clock, on MariaDB and SQLite.
 * A 5,000 grant pays 5,000 of an 8,000 invoice (3,000 due, the charge fails: open); voiding it
 * puts the 5,000 back (a "reinstatement" entry, the grant active again), once: a second void is
 * refused. A grant that expired in between takes it back and lets it go at once (balance
 * unchanged); a credit note that reduced the amount due gives back nothing more than the
 * applications; an invoice marked uncollectible keeps what it spent. Amounts in cents (USD).
 */
import test from "ava";
import { seats } from "../helpers/catalog-bodies.js";
import { reasonOf } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { money } from "../helpers/price-bodies.js";
import { CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/**
 * Subscribed Jan 15 at 8,000 a month (and `more` fixed rates, one of each) with a card whose
 * charges fail (so invoices stay open), `grants` granted, then the clock at Feb 15: its invoice.
 */
async function openInvoice(s: Scenario, grants: Json[], more: Json[] = []): Promise<Json> {
  const card = await s.card({ fixed_rates: [seats(8000), ...more] });
  const quantities = Object.fromEntries([seats(8000), ...more].map((r) => [r.code, 1]));
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: quantities }, CARD_FAILS_LATER);
  for (const g of grants) await s.call("POST", "/credit-grants", { subject_id: s.subjectId, category: "promotional", ...g });
  await s.advance("2026-02-15T00:00:00Z");
  return (await s.invoices()).at(-1) as Json;
}

const ledger = async (s: Scenario): Promise<[string, string, string | null][]> =>
  ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value, e.invoice_id ?? null]);

const balance = async (s: Scenario): Promise<string> => {
  const state = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
  return ((state.credit_balance as Json[]).find((b) => b.currency_code === "USD")?.value as string | undefined) ?? "0";
};

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: voiding an open invoice gives back the 5,000 of credit it spent, once`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const inv = await openInvoice(s, [{ amount: money(5000) }]);
    t.deepEqual([inv.status, inv.total_amount.value, (inv.credits_applied as Json[]).map((c) => c.amount.value), inv.amount_due.value], ["open", "8000", ["5000"], "3000"]);
    t.is(await balance(s), "0");

    const voided = await s.call("POST", `/invoices/${inv.id}/void`, {});
    t.is(voided.status, "void");
    t.is(await balance(s), "5000");
    t.deepEqual(await ledger(s), [
      ["grant", "5000", null],
      ["application", "-5000", inv.id],
      ["reinstatement", "5000", inv.id],
    ]);
    const [g] = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
    t.deepEqual([g?.status, g?.remaining_amount.value], ["active", "5000"]);

    // A second void is refused and gives back nothing more.
    const again = await s.raw("POST", `/invoices/${inv.id}/void`, {});
    t.is(again.status, 400);
    t.is(reasonOf(again.body), "INVOICE_NOT_OPEN");
    t.is(await balance(s), "5000");
    t.is((await ledger(s)).filter(([type]) => type === "reinstatement").length, 1);

    // The credit given back pays the next invoice: Mar 15's 8,000 takes the 5,000.
    await s.advance("2026-03-15T00:00:00Z");
    const next = (await s.invoices()).at(-1) as Json;
    t.deepEqual([next.total_amount.value, next.amount_due.value], ["8000", "3000"]);
    t.is(await balance(s), "0");
  });

  test(`${store}: grants expired or voided before the void take their credit back and let it go at once: the balance stays 0`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    // Feb 15: seats 8,000 + support 500. "first" pays 5,000 of the seats and is left depleted;
    // "support" (for the support line only) pays its 500 and expires on Feb 20 with 3,500 left;
    // "third" pays 1,000 of the seats and is voided (depleted) before the invoice: 2,000 due.
    const inv = await openInvoice(
      s,
      [
        { amount: money(5000), priority: 10, expires_at: "2026-02-20T00:00:00Z", metadata: { name: "first" } },
        { amount: money(4000), priority: 20, expires_at: "2026-02-20T00:00:00Z", applies_to_rate_codes: ["support"], metadata: { name: "support" } },
        { amount: money(1000), priority: 30, metadata: { name: "third" } },
      ],
      [seats(500, "support", "Support")],
    );
    t.deepEqual([inv.status, inv.total_amount.value, (inv.credits_applied as Json[]).map((c) => c.amount.value), inv.amount_due.value], ["open", "8500", ["5000", "500", "1000"], "2000"]);
    await s.advance("2026-02-21T00:00:00Z");
    const grants = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
    const [first, support, third] = grants.map((g) => g.id as string);
    await s.call("POST", `/credit-grants/${third}/void`, {});
    t.is(await balance(s), "0");
    const before = (await ledger(s)).length;

    await s.call("POST", `/invoices/${inv.id}/void`, {});
    t.is(await balance(s), "0");
    const entries = ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[]).slice(before);
    t.deepEqual(
      entries.map((e) => [e.credit_grant_id, e.entry_type, e.amount.value, e.invoice_id]),
      [
        [first, "reinstatement", "5000", inv.id],
        [first, "expiry", "-5000", inv.id],
        [support, "reinstatement", "500", inv.id],
        [support, "expiry", "-500", inv.id],
        [third, "reinstatement", "1000", inv.id],
        [third, "void", "-1000", inv.id],
      ],
    );
    const after = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
    t.deepEqual(
      after.map((g) => [g.status, g.remaining_amount.value]),
      [
        ["depleted", "0"],
        ["expired", "0"],
        ["voided", "0"],
      ],
    );
  });

  test(`${store}: after a credit note reduced the amount due, a void gives back the applications only; uncollectible keeps them`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const inv = await openInvoice(s, [{ amount: money(5000) }]);
    await s.call("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", amount: "1000" });
    const noted = await s.call("GET", `/invoices/${inv.id}`);
    t.deepEqual([noted.status, noted.amount_due.value], ["open", "2000"]);
    await s.call("POST", `/invoices/${inv.id}/void`, {});
    t.is(await balance(s), "5000");
    t.deepEqual(
      (await ledger(s)).map(([type, value]) => [type, value]),
      [
        ["grant", "5000"],
        ["application", "-5000"],
        ["reinstatement", "5000"],
      ],
    );

    // Another subject's invoice marked uncollectible keeps the credit it spent (Stripe returns it on void only).
    const u = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const other = await openInvoice(u, [{ amount: money(5000) }]);
    const marked = await u.call("POST", `/invoices/${other.id}/mark_uncollectible`, {});
    t.is(marked.status, "uncollectible");
    t.is(await balance(u), "0");
    t.false((await ledger(u)).some(([type]) => type === "reinstatement"));
  });
  test(`${store}: a purchased grant a refund voided (its unspent credit refunded) gets back what a voided invoice spent`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(8000), seats(2000, "support", "Support")] });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1, support: 1 } }, CARD_OK);
    // 10,000 bought with the card on file, for seats only; then a card whose charges fail, so the next invoice stays open.
    const bought = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: money(10000), category: "paid", applies_to_rate_codes: ["seats"] });
    t.is(bought.credit_grant.status, "active");
    await s.saveCardInPortal(CARD_FAILS_LATER);
    await s.advance("2026-02-15T00:00:00Z");
    const inv = (await s.invoices()).find((i) => i.status === "open") as Json;
    // Seats 8,000 paid by the grant, support 2,000 due: 2,000 of the grant unspent.
    t.deepEqual([inv.total_amount.value, inv.amount_due.value], ["10000", "2000"]);
    const note = await s.raw("POST", "/credit-notes", { invoice_id: bought.credit_grant.invoice_id, reason: "other", outcome: "refund", amount: "2000" });
    t.is(note.status, 200, JSON.stringify(note.body));
    const voidedGrant = await s.call("GET", `/credit-grants/${bought.credit_grant.id}`);
    t.deepEqual([voidedGrant.status, voidedGrant.remaining_amount.value], ["voided", "0"]);

    await s.call("POST", `/invoices/${inv.id}/void`, {});
    // The 8,000 the void gives back was paid for and never refunded: spendable again, the grant active.
    const g = await s.call("GET", `/credit-grants/${bought.credit_grant.id}`);
    t.deepEqual([g.status, g.remaining_amount.value], ["active", "8000"]);
    t.is(await balance(s), "8000"); // 10,000 − 8,000 spent − 2,000 refunded + 8,000 reinstated
    t.deepEqual(
      (await ledger(s)).map(([type, amount]) => [type, amount]),
      [
        ["grant", "10000"],
        ["application", "-8000"],
        ["void", "-2000"],
        ["reinstatement", "8000"],
      ],
    );
  });
}
