/**
 * A credit for unused time's taxes as paid, per rate (paid-taxes.ts), in the pure parts: a credit
 * drawn from lines with two exclusive rates and an inclusive one gives back each in proportion
 * (the exclusive ones summing to the credit's exclusive tax, rounded once), and a split credit's
 * rest and landed part sum to it rate by rate; takeCredits puts the landed part's taxes on its
 * line (InvoiceLine.paidTax). Amounts in cents.
 */
import test from "ava";
import type { BookedTax } from "../../src/billing/invoicing/booking.js";
import { dec } from "../../src/billing/money.js";
import { type DrawnRate, creditTaxes, drawRates, splitTaxes } from "../../src/billing/subscriptions/paid-taxes.js";
import { takeCredits } from "../../src/billing/subscriptions/proration.js";

const rate = (id: string, percentage: string, inclusive: boolean, taxable: string, amount: string): BookedTax => ({
  taxRateId: id,
  displayName: id,
  percentage,
  inclusive,
  taxableAmount: taxable,
  amount,
});

/** 11,000 with 1,000 inside at 10% inclusive (10,000 taxable), then 6% state and 2.5% city on top: 600 and 250. */
const PAID = [rate("incl", "10", true, "10000", "1000"), rate("state", "6", false, "10000", "600"), rate("city", "2.5", false, "10000", "250")];

test("creditTaxes: 3,333 of an 11,000 line gives back each rate × 3,333 / 11,000, the exclusive ones their rounded sum split in proportion", (t) => {
  const drawn = new Map<string, DrawnRate>();
  drawRates(drawn, PAID, dec(3333), dec(11000));
  // inclusive: 1,000 × 3,333 / 11,000 = 303.0 → 303; exclusive: 850 × 3,333 / 11,000 = 257.55 → 258 (paidTax's share),
  // split 600 : 250 → 182.07 and 75.86 → 182 and 76 (the unit left over to the larger remainder). Taxable: 3,333 − 303 = 3,030.
  t.deepEqual(creditTaxes(drawn, dec(3333), dec(258)), [rate("incl", "10", true, "-3030", "-303"), rate("state", "6", false, "-3030", "-182"), rate("city", "2.5", false, "-3030", "-76")]);
});

test("splitTaxes: the rest keeps its exclusive tax split in proportion and its share of the inclusive one; the part landing what is left of each", (t) => {
  const taxes = [rate("incl", "10", true, "-3030", "-303"), rate("state", "6", false, "-3030", "-182"), rate("city", "2.5", false, "-3030", "-76")];
  // 1,000 of the 3,333 carried: exclusive 258 × 1,000 / 3,333 = 77.4 → 77 (takeCredits' rounding), split 182 : 76 → 54.3 and 22.7 → 54 and 23;
  // inclusive 303 × 1,000 / 3,333 = 90.9 → 91. Taxable: 1,000 − 91 = 909; landed 2,333 − 212 = 2,121.
  const { rest, landed } = splitTaxes(taxes, dec(3333), dec(1000), dec(77));
  t.deepEqual(rest, [rate("incl", "10", true, "-909", "-91"), rate("state", "6", false, "-909", "-54"), rate("city", "2.5", false, "-909", "-23")]);
  t.deepEqual(landed, [rate("incl", "10", true, "-2121", "-212"), rate("state", "6", false, "-2121", "-128"), rate("city", "2.5", false, "-2121", "-53")]);
});

test("creditTaxes: a credit drawn from lines at two rates is taxable at each on the part drawn from the lines it taxed, not on the whole credit", (t) => {
  const drawn = new Map<string, DrawnRate>();
  // −10,000 drawn newest first: 7,500 of a 7,500 line at 20% (1,500), then 2,500 of a 10,000 line at 10% (1,000 × 2,500 / 10,000 = 250).
  drawRates(drawn, [rate("vat20", "20", false, "7500", "1500")], dec(7500), dec(7500));
  drawRates(drawn, [rate("vat10", "10", false, "10000", "1000")], dec(2500), dec(10000));
  t.deepEqual(creditTaxes(drawn, dec(10000), dec(1750), dec(10000)), [rate("vat20", "20", false, "-7500", "-1500"), rate("vat10", "10", false, "-2500", "-250")]);
});

test("splitTaxes: a credit taxed at two rates on different parts splits each rate's taxable amount in proportion", (t) => {
  const taxes = [rate("vat20", "20", false, "-7500", "-1500"), rate("vat10", "10", false, "-2500", "-250")];
  // 4,000 of the 10,000 carried with 1,750 × 4,000 / 10,000 = 700, split 1,500 : 250 → 600 and 100; taxable 4,000 × 7,500 / 10,000 = 3,000
  // and 4,000 × 2,500 / 10,000 = 1,000. Landed: what is left of each, −4,500 (−900) and −1,500 (−150).
  const { rest, landed } = splitTaxes(taxes, dec(10000), dec(4000), dec(700));
  t.deepEqual(rest, [rate("vat20", "20", false, "-3000", "-600"), rate("vat10", "10", false, "-1000", "-100")]);
  t.deepEqual(landed, [rate("vat20", "20", false, "-4500", "-900"), rate("vat10", "10", false, "-1500", "-150")]);
});

test("takeCredits: the landed part's line gives back its taxes as paid; one carried without them (stored before) is taxed where it lands", (t) => {
  const taxes = [rate("vat", "10", false, "-6774", "-677")];
  const credits = [
    { description: "resume", amount: "-6774", tax: "-677", taxAmounts: taxes },
    { description: "older", amount: "-100", tax: "-10" },
  ];
  // Room 5,000: 5,000 lands, 1,774 carried with −677 × 1,774 / 6,774 = −177.3 → −177; the line keeps −677 + 177 = −500.
  const { lines, carried } = takeCredits(credits, dec(5000), "USD");
  t.deepEqual(
    lines.map((l) => l.paidTax),
    [[rate("vat", "10", false, "-5000", "-500")]],
  );
  t.deepEqual(carried, [
    { description: "resume", amount: "-1774", whole: "-6774", tax: "-177", taxAmounts: [rate("vat", "10", false, "-1774", "-177")] },
    { description: "older", amount: "-100", tax: "-10" },
  ]);
  // Room for both: the older one's line has no taxes as paid (booked where it lands).
  t.deepEqual(
    takeCredits(credits, dec(10000), "USD").lines.map((l) => l.paidTax),
    [taxes, undefined],
  );
});
