/**
 * A test clock's advance runs each draft's finalization and each cycle close at its own time, as
 * real time does (Scheduler.stepUpTo): a draft due before a later close is final before that
 * close, so a subject's "once" discount and its credit go to it. On MariaDB and SQLite, in an
 * environment whose drafts have a grace period of 1 day, from Jan 1, 2026:
 * - A: the API plan (10 per unit of usage, in arrears), from Jan 1; 1,000 units on Jan 20. Its
 *   close on Feb 1 makes a draft of 10,000, due Feb 2.
 * - B: a fixed plan of 5,000 a month in advance, from Jan 10 (paid at its checkout). Its close on
 *   Feb 10 makes an invoice final at once.
 * - On Jan 10, after both: a subject's coupon "Once 20%" and a promotional grant of 3,000.
 * Real time: A's invoice is final on Feb 2: 10,000 − 20% = 8,000, 3,000 of credit, 5,000 due; B's
 * on Feb 10: 5,000, no discount, no credit left. One advance to Feb 12 used to close B's cycle
 * before finalizing A's draft: B took the discount (4,000) and the credit (1,000 due), A neither
 * (10,000 due).
 */
import test from "ava";
import { apiPlan, coupon, percentOff, subscribe, use } from "../helpers/booking-bodies.js";
import { promo } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { fixedRate, flat } from "../helpers/price-bodies.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** A subscription's invoices with lines, as [period start, status, subtotal, total_discount, total, credits applied, amount_due], oldest period first. */
async function invoicesOf(s: Scenario, subscriptionId: string): Promise<[string, string, string, string, string, string[], string][]> {
  return (await s.invoices())
    .filter((i: Json) => i.subscription_id === subscriptionId && (i.line_items as Json[]).length > 0)
    .map(
      (i: Json) =>
        [i.period_start, i.status, i.subtotal.value, i.total_discount.value, i.total_amount.value, (i.credits_applied as Json[]).map((c) => c.amount.value), i.amount_due.value] as [
          string,
          string,
          string,
          string,
          string,
          string[],
          string,
        ],
    )
    .sort((x, y) => (x[0] < y[0] ? -1 : 1));
}

for (const store of STORES) {
  const server = useServer(store);

  for (const [how, advances] of [
    ["in one advance", ["2026-02-12T00:00:00Z"]],
    ["in two advances (as real time)", ["2026-02-03T00:00:00Z", "2026-02-12T00:00:00Z"]],
  ] as const) {
    test(`${store}: a draft due before a later close takes the subject's once discount and credit first, ${how}`, async (t) => {
      const s = await Scenario.start(server, "2026-01-01T00:00:00Z", { invoiceGraceSeconds: 86_400 });
      const a = await subscribe(s, await apiPlan(s));
      await use(s, "2026-01-20T00:00:00Z", "1000");
      await s.advance("2026-01-10T00:00:00Z");
      const fixed = await s.card({ fixed_rates: [fixedRate(flat(5000), "base", "Base")] });
      const b = (await s.subscribe({ rate_card_id: fixed, fixed_rate_quantities: { base: 1 } })).subscription.id as string;
      await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: await coupon(s, "Once 20%", percentOff("20", "once")) });
      await promo(s, "promo", 3000);
      for (const at of advances) await s.advance(at);

      // A: Feb 1's draft (its period start), final on Feb 2: 10,000 − 2,000 = 8,000; 3,000 of credit; 5,000 due.
      t.deepEqual(await invoicesOf(s, a), [["2026-02-01T00:00:00Z", "paid", "8000", "2000", "8000", ["3000"], "5000"]]);
      // B: Jan 10 (its checkout), then Feb 10 in full: the discount and the credit were spent.
      t.deepEqual(await invoicesOf(s, b), [
        ["2026-01-10T00:00:00Z", "paid", "5000", "0", "5000", [], "5000"],
        ["2026-02-10T00:00:00Z", "paid", "5000", "0", "5000", [], "5000"],
      ]);
    });
  }
}
