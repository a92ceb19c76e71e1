/**
 * First charges made a batch at a time (Dunning.attemptFirsts), against the real server on MariaDB
 * and SQLite: five subjects on one test clock renew in the same cycle close, each with its own
 * card outcome, and each invoice gets exactly its own attempt, status, next attempt and events —
 * no outcome lands on another invoice of the batch, and a later advance charges nothing again.
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const RENEWAL = "2026-02-15T00:00:00Z";
const CARD_FAILS = "4000 0000 0000 0341";
const CARD_NO_FUNDS = "4000 0000 0000 9995";
const CARD_AUTH = "4000 0025 0000 3155";

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: one cycle close charges five renewals, each with its own outcome, once`, async (t) => {
    const s = await Scenario.start(server, AT);
    // 49.00 a month, paid at subscribe by a good card; then each subject's card for the renewal.
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { price_type: "flat", amount: { currency_code: "USD", value: "4900" } } }] });
    const cards = [CARD_OK, CARD_NO_FUNDS, CARD_AUTH, CARD_FAILS, CARD_OK];
    const subjects: string[] = [];
    for (const [k, number] of cards.entries()) {
      if (k > 0) s.subjectId = (await s.call("POST", "/subjects", { name: `Customer ${k}`, test_clock_id: s.clockId })).id;
      subjects.push(s.subjectId);
      const r = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 }, create_checkout_session: "always" }, CARD_OK);
      t.is(r.result_type, "success_after_checkout");
      if (number !== CARD_OK) await s.saveCardInPortal(number);
    }
    await s.advance(RENEWAL);

    const renewals: Json[] = [];
    for (const subjectId of subjects) {
      const list = (await s.call("GET", `/invoices?subject_id=${subjectId}&limit=10`)).invoices as Json[];
      // The renewal bills from the renewal date (the first invoice, paid at subscribe, from Jan 15).
      const renewal = list.filter((i) => i.period_start === RENEWAL);
      t.is(renewal.length, 1);
      renewals.push(await s.call("GET", `/invoices/${(renewal[0] as Json).id}`));
    }
    const [ok, noFunds, auth, fails, ok2] = renewals as [Json, Json, Json, Json, Json];
    t.like(ok, { status: "paid", attempt_count: 1, next_payment_attempt: null, amount_due: { value: "4900" } });
    t.like(ok2, { status: "paid", attempt_count: 1, next_payment_attempt: null });
    // A decline: attempt 1, the next 3 days later (the default schedule 3, 5, 7).
    t.like(noFunds, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });
    t.like(fails, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });
    // Authentication needed: a failed attempt too (its retry planned), waiting for the customer with a pay link.
    t.like(auth, { status: "open", attempt_count: 1, next_payment_attempt: "2026-02-18T00:00:00Z" });
    t.truthy(auth.payment_url);

    const events = async (type: string) => ((await s.call("GET", `/events?types=${type}&limit=100`)).events as Json[]).map((e) => e.data.id as string);
    const ids = renewals.map((i) => i.id as string);
    const paidEvents = (await events("invoice.paid")).filter((id) => ids.includes(id));
    t.deepEqual(paidEvents.sort(), [ok.id, ok2.id].sort());
    t.deepEqual((await events("invoice.payment_failed")).filter((id) => ids.includes(id)).sort(), [noFunds.id, auth.id, fails.id].sort());
    t.deepEqual(
      (await events("invoice.payment_action_required")).filter((id) => ids.includes(id)),
      [auth.id],
    );

    // Short of the first retry: nothing is charged again.
    await s.advance("2026-02-17T23:00:00Z");
    for (const before of renewals) t.like(await s.call("GET", `/invoices/${before.id}`), { status: before.status, attempt_count: 1 });
  });
}
