/**
 * DESIGN §13, §15, through the real server on both stores: a credit for unused time drawn from
 * lines paid at two tax rates books each rate on the part drawn from the lines it taxed
 * (paid-taxes.ts), so the invoice's tax breakdown shows what was taxed at each rate. A at 10,000
 * a seat, 10% on Feb 1 (10,000 + 1,000 paid); Feb 8 the buyer's rate becomes 20% and 1 → 2 seats
 * (10,000 × 21/28 = 7,500 + 1,500); Feb 15 A → B with half the period left: A's credit is
 * −10,000 (2 seats × 10,000 × 14/28), drawn newest first: −7,500 of the 20% line (tax −1,500) and
 * −2,500 of the 10% one (tax −250). Its line shows −7,500 taxable at 20% and −2,500 at 10%; it
 * showed −10,000 at each (−20,000 taxable on a −10,000 line).
 */
import test from "ava";
import { booked, buyer, taxRate } from "../helpers/booking-bodies.js";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";

for (const store of STORES) {
  const server = useServer(store);

  test.serial(`${store}: an upgrade's credit drawn −7,500 from a 20% line and −2,500 from a 10% one is taxable −7,500 at 20% and −2,500 at 10%`, async (t) => {
    const s = await Scenario.start(server, "2026-02-01T00:00:00Z");
    const vat10 = await taxRate(s, "VAT 10", "10");
    const vat20 = await taxRate(s, "VAT 20", "20");
    const a = await s.card({ name: "A", fixed_rates: [seats(10000)], default_tax_rate_ids: [vat10] });
    const b = await s.card({ name: "B", fixed_rates: [seats(20000)], default_tax_rate_ids: [vat10] });
    const id = (await s.subscribe({ rate_card_id: a, fixed_rate_quantities: { seats: 1 } })).subscription.id;
    await s.advance("2026-02-08T00:00:00Z");
    await buyer(s, { tax_rate_ids: [vat20] });
    await s.call("PATCH", `/subscriptions/${id}`, { fixed_rate_quantities: { seats: 2 } });
    await s.advance("2026-02-15T00:00:00Z");
    await s.call("POST", `/subscriptions/${id}/change-rate-card`, { rate_card_id: b, behavior: "prorate" });
    const up = (await booked(s)).at(-1);
    const credit = up?.lines.find((l) => l[1].startsWith("-"));
    // −7,500 × 20% = −1,500; −2,500 × 10% = −250: −1,750 given back, as paid.
    t.deepEqual(credit?.[1], "-10000");
    t.deepEqual([...(credit?.[3] ?? [])].sort(), [
      ["VAT 10", "-2500", "-250"],
      ["VAT 20", "-7500", "-1500"],
    ]);
    // The invoice's breakdown: 20,000 − 7,500 = 12,500 at 20% (2,500); −2,500 at 10% (−250).
    t.deepEqual(up?.tax_amounts, [
      ["VAT 20", "20", false, "12500", "2500"],
      ["VAT 10", "10", false, "-2500", "-250"],
    ]);
  });
}
