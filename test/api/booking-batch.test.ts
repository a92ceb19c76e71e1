/**
 * A cycle close books its invoices as a batch (finalizeAllOpen: the parties, discounts and
 * spendable credit of all of them read at once), on MariaDB and SQLite: what one invoice of the
 * batch uses is seen by the next of the same subject, as when each was read on its own. Two
 * subscriptions of one subject to a plan of base 1000 USD cents a month in advance, from Jan 15:
 * Feb 15's cycle close writes both of their invoices in one transaction.
 */
import test from "ava";
import { FEB, JAN, coupon, plan, subscribe, usd } from "../helpers/coupon-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a subject's "once" discount discounts one invoice of a batch, not both`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const card = await plan(s);
    const a = await subscribe(s, card);
    const b = await subscribe(s, card);
    const once = await coupon(s, { name: "Once 25%", percent_off: "25" });
    const d = await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: once.id });
    await s.advance(FEB);
    const feb = (await s.invoices()).slice(2);
    t.deepEqual(feb.map((i: Json) => i.subscription_id).sort(), [a, b].sort());
    // 1000 − 25% on one of them, the other in full.
    t.deepEqual(feb.map((i: Json) => [i.total_amount.value, i.total_discount.value]).sort(), [
      ["1000", "0"],
      ["750", "250"],
    ]);
    const after = (await s.call("GET", `/discounts?subject_id=${s.subjectId}`)).discounts.filter((x: Json) => x.id === d.id);
    t.deepEqual(
      after.map((x: Json) => [x.status, x.invoices_discounted]),
      [["ended", 1]],
    );
  });

  test(`${store}: a subject's credit pays the invoices of a batch in turn, never more than it has`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const card = await plan(s);
    await subscribe(s, card);
    await subscribe(s, card);
    const g = (await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd(1500), category: "promotional" })).credit_grant;
    await s.advance(FEB);
    const feb = (await s.invoices()).slice(2);
    // 1500 of credit: one invoice in full (0 due), the other 500 of its 1000 (500 due).
    t.deepEqual(
      feb.map((i: Json) => [(i.credits_applied as Json[]).map((c) => [c.credit_grant_id, c.amount.value]), i.amount_due.value]).sort((x: Json, y: Json) => (x[1] < y[1] ? -1 : 1)),
      [
        [[[g.id, "1000"]], "0"],
        [[[g.id, "500"]], "500"],
      ],
    );
    const left = await s.call("GET", `/credit-grants/${g.id}`);
    t.deepEqual([left.status, left.remaining_amount.value], ["depleted", "0"]);
  });
}
