/**
 * DESIGN §13, §15, through the real server on both stores: a resume's credit for unused time that
 * first lowers an open invoice's amount due (given-back.ts lessReduction) keeps, for the rest, the
 * taxes paid for that time per rate, whatever the resume's invoice's rates. 1 seat at 10,000 + VAT
 * 10% paid Feb 1; Feb 15 1 → 2 seats (5,000 + 500, left open: the card fails); paused Feb 15; the
 * buyer moves to VAT 20%; resumed Feb 20. The credit for 2 seats' last 14 of 28 days is
 * 10,000 + 1,000 paid at 10%: 5,500 lowers the open invoice to 0, the rest, 5,000 + 500, is a line
 * of the resume's invoice giving back −500 at VAT 10 (it booked −1,000 at VAT 20: 500 of tax never paid).
 */
import test from "ava";
import { booked, buyer, taxRate } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { patch } from "../helpers/price-bodies.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

for (const store of STORES) {
  const server = useServer(store);

  test.serial(`${store}: a resume's credit less an open invoice's 5,500 gives back the rest's tax as paid: −5,000 at VAT 10 (−500), not at the resume's 20%`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats(10000)], default_tax_rate_ids: [await taxRate(s, "VAT 10", "10")] });
    const vat20 = await taxRate(s, "VAT 20", "20");
    const id = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } })).subscription.id;
    await s.saveCardInPortal(CARD_FAILS_LATER);
    await s.advance("2026-02-15T00:00:00Z");
    const up = (await patch(s, id, { fixed_rate_quantities: { seats: 2 } })).proration_invoice;
    await s.call("POST", `/subscriptions/${id}/pause`, {});
    await s.advance("2026-02-20T00:00:00Z");
    await buyer(s, { tax_rate_ids: [vat20] });
    await s.call("POST", `/subscriptions/${id}/resume`, {});
    // The open increase: 5,000 + 500, paid by the credit.
    t.like(await s.call("GET", `/invoices/${up.id}`), { status: "paid", amount_due: { value: "0" } });
    const credit = (await booked(s)).at(-1)?.lines.find((l) => l[1].startsWith("-"));
    t.deepEqual(credit?.[1], "-5000");
    t.deepEqual(credit?.[3], [["VAT 10", "-5000", "-500"]]);
  });
}
