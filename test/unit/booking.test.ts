/**
 * The arithmetic of a booked invoice (src/billing/invoicing/booking.ts, DESIGN §15), table-driven
 * with the arithmetic beside each case (amounts in smallest units), and fast-check properties:
 * a proportional split always sums to what is split, discounts never exceed what they cover, and
 * total = subtotal + exclusive tax with subtotal = Σ lines − Σ discounts.
 */
import test from "ava";
import fc from "fast-check";
import type { BookingDiscount } from "../../src/billing/coupons/types.js";
import { bookTotals, lineTaxes, splitInProportion } from "../../src/billing/invoicing/booking.js";
import { dec, formatDecimal } from "../../src/billing/money.js";
import { REVERSE_CHARGE_NOTE, TAX_EXEMPT_NOTE, type AppliedTaxRate, type TaxExempt } from "../../src/billing/taxes/types.js";

const pct = (id: string, percentOff: string, codes: string[] = []): BookingDiscount => ({ discountId: id, couponId: `c_${id}`, name: id, percentOff, amountOff: null, appliesToRateCodes: codes });
const off = (id: string, amountOff: string, codes: string[] = []): BookingDiscount => ({ discountId: id, couponId: `c_${id}`, name: id, percentOff: null, amountOff, appliesToRateCodes: codes });
const rate = (id: string, percentage: string, inclusive = false): AppliedTaxRate => ({ id, displayName: id, percentage, inclusive });
const line = (amount: string, rateCode: string | null = null) => ({ amount, rateCode });

type Want = { subtotal: string; discount: string; tax: string; total: string; lineDiscounts?: string[]; lineTaxes?: string[][] };
type Case = [title: string, lines: { amount: string; rateCode: string | null }[], discounts: BookingDiscount[], rates: AppliedTaxRate[][], exempt: TaxExempt, want: Want];

const VAT19 = rate("vat19", "19");
const VAT20_IN = rate("vat20in", "20", true);

const cases: Case[] = [
  // nothing to book: subtotal = total = Σ lines = 1000 + 250
  ["no discount, no tax", [line("1000"), line("250")], [], [[], []], "none", { subtotal: "1250", discount: "0", tax: "0", total: "1250" }],
  // 20% of 10000 = 2000; subtotal 8000
  ["percent coupon on the whole invoice", [line("10000")], [pct("d1", "20")], [[]], "none", { subtotal: "8000", discount: "2000", tax: "0", total: "8000" }],
  // 15% of 999 = 149.85 → 150 (half-up to the smallest unit)
  ["percent discount rounds half-up", [line("999")], [pct("d1", "15")], [[]], "none", { subtotal: "849", discount: "150", tax: "0", total: "849" }],
  // amount 5000 off a 3000 invoice: capped at 3000, never negative
  ["amount coupon capped at the invoice", [line("3000")], [off("d1", "5000")], [[]], "none", { subtotal: "0", discount: "3000", tax: "0", total: "0" }],
  // 10% of the api lines only: 10% of 4000 = 400; seats 6000 untouched
  [
    "coupon limited to one rate",
    [line("6000", "seats"), line("4000", "api")],
    [pct("d1", "10", ["api"])],
    [[], []],
    "none",
    { subtotal: "9600", discount: "400", tax: "0", total: "9600", lineDiscounts: ["0", "400"] },
  ],
  // 10000 × 19% = 1900 exclusive: total 11900
  ["exclusive tax", [line("10000")], [], [[VAT19]], "none", { subtotal: "10000", discount: "0", tax: "1900", total: "11900", lineTaxes: [["10000", "1900"]] }],
  // 12000 includes 20%: tax = 12000 × 20 / 120 = 2000, taxable 10000; total stays 12000
  ["inclusive tax", [line("12000")], [], [[VAT20_IN]], "none", { subtotal: "12000", discount: "0", tax: "2000", total: "12000", lineTaxes: [["10000", "2000"]] }],
  // two exclusive rates on one line: 10000 × 19% = 1900, 10000 × 2.5% = 250; total 12150
  [
    "two rates on one line",
    [line("10000")],
    [],
    [[VAT19, rate("city", "2.5")]],
    "none",
    { subtotal: "10000", discount: "0", tax: "2150", total: "12150", lineTaxes: [["10000", "1900", "10000", "250"]] },
  ],
  // discount then tax: 10000 − 10% = 9000; 9000 × 19% = 1710; total 10710
  ["discount then tax", [line("10000")], [pct("d1", "10")], [[VAT19]], "none", { subtotal: "9000", discount: "1000", tax: "1710", total: "10710", lineTaxes: [["9000", "1710"]] }],
  // exempt and reverse charge: no tax, a note
  ["exempt buyer", [line("10000")], [], [[VAT19]], "exempt", { subtotal: "10000", discount: "0", tax: "0", total: "10000" }],
  ["reverse charge", [line("10000")], [], [[VAT19]], "reverse", { subtotal: "10000", discount: "0", tax: "0", total: "10000" }],
  // 1000 off split over 3333 and 6667 in proportion: 333.3 → 333, 666.7 → 667 (largest remainder)
  ["amount split over lines", [line("3333"), line("6667")], [off("d1", "1000")], [[], []], "none", { subtotal: "9000", discount: "1000", tax: "0", total: "9000", lineDiscounts: ["333", "667"] }],
  // two discounts in order: 10% of 10000 = 1000, then 500 off the 9000 left: 1500 in all
  ["two discounts apply in order", [line("10000")], [pct("d1", "10"), off("d2", "500")], [[]], "none", { subtotal: "8500", discount: "1500", tax: "0", total: "8500" }],
  // a proration credit (−2000) lowers the base: 10% of (10000 − 2000) = 800, split 1000 and −200
  [
    "a negative line lowers the discount's base",
    [line("10000"), line("-2000")],
    [pct("d1", "10")],
    [[], []],
    "none",
    { subtotal: "7200", discount: "800", tax: "0", total: "7200", lineDiscounts: ["1000", "-200"] },
  ],
  // tax per line, rounded per line: 333 × 19% = 63.27 → 63, twice: 126 (not round(666 × 19%) = 127)
  [
    "tax rounds per line",
    [line("333"), line("333")],
    [],
    [[VAT19], [VAT19]],
    "none",
    {
      subtotal: "666",
      discount: "0",
      tax: "126",
      total: "792",
      lineTaxes: [
        ["333", "63"],
        ["333", "63"],
      ],
    },
  ],
  // KWD (3 decimals: amounts in fils): 1234 fils × 5% = 61.7 → 62
  ["KWD 5% exclusive", [line("1234")], [], [[rate("vat5", "5")]], "none", { subtotal: "1234", discount: "0", tax: "62", total: "1296" }],
  // JPY (no decimals: amounts in yen): 999 yen × 10% = 99.9 → 100
  ["JPY 10% exclusive", [line("999")], [], [[rate("jct", "10")]], "none", { subtotal: "999", discount: "0", tax: "100", total: "1099" }],
];

for (const [title, lines, discounts, rates, exempt, want] of cases) {
  test(title, (t) => {
    const b = bookTotals({ lines, discounts, ratesPerLine: rates, exempt });
    t.deepEqual({ subtotal: b.subtotal, discount: b.totalDiscount, tax: b.totalTax, total: b.total }, { subtotal: want.subtotal, discount: want.discount, tax: want.tax, total: want.total });
    if (want.lineDiscounts) {
      t.deepEqual(
        b.lines.map((l) => formatDecimal(l.discountAmounts.reduce((a, d) => a.plus(dec(d.amount)), dec(0)))),
        want.lineDiscounts,
      );
    }
    if (want.lineTaxes)
      t.deepEqual(
        b.lines.map((l) => l.taxAmounts.flatMap((x) => [x.taxableAmount, x.amount])),
        want.lineTaxes,
      );
    t.deepEqual(b.notes, exempt === "reverse" ? [REVERSE_CHARGE_NOTE] : exempt === "exempt" ? [TAX_EXEMPT_NOTE] : []);
  });
}

test("tax amounts add up per rate across lines", (t) => {
  const b = bookTotals({ lines: [line("1000"), line("2000")], discounts: [], ratesPerLine: [[VAT19], [VAT19]], exempt: "none" });
  // 1000 × 19% = 190, 2000 × 19% = 380: 570 on 3000
  t.deepEqual(
    b.taxAmounts.map((x) => [x.taxRateId, x.taxableAmount, x.amount]),
    [["vat19", "3000", "570"]],
  );
});

test("inclusive and exclusive rates on one line: exclusive tax on the amount without the inclusive tax", (t) => {
  // 11000 includes 10%: 11000 × 10 / 110 = 1000; exclusive 5% on 10000 = 500
  t.deepEqual(
    lineTaxes(dec(11000), [rate("in", "10", true), rate("ex", "5")]).map((x) => [x.taxableAmount, x.amount]),
    [
      ["10000", "1000"],
      ["10000", "500"],
    ],
  );
});

test("property: a proportional split sums to the amount, and each part is within one unit of its exact share", (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 1_000_000 }), fc.array(fc.integer({ min: 1, max: 1_000_000 }), { minLength: 1, maxLength: 12 }), (amount, weights) => {
      const ws = weights.map((w) => dec(w));
      const parts = splitInProportion(dec(amount), ws);
      const whole = ws.reduce((a, w) => a.plus(w), dec(0));
      if (!parts.reduce((a, p) => a.plus(p), dec(0)).eq(amount)) return false;
      return parts.every(
        (p, i) =>
          p.isInteger() &&
          p
            .minus(
              dec(amount)
                .times(ws[i] ?? 0)
                .div(whole),
            )
            .abs()
            .lt(1),
      );
    }),
  );
  t.pass();
});

test("property: discounts never exceed what they cover; total = subtotal + exclusive tax; subtotal = Σ lines − Σ discounts", (t) => {
  const arb = fc.record({
    amounts: fc.array(fc.integer({ min: 0, max: 1_000_000 }), { minLength: 1, maxLength: 6 }),
    percent: fc.integer({ min: 1, max: 100 }),
    amountOff: fc.integer({ min: 1, max: 2_000_000 }),
    tax: fc.integer({ min: 0, max: 30 }),
    inclusive: fc.boolean(),
  });
  fc.assert(
    fc.property(arb, ({ amounts, percent, amountOff, tax, inclusive }) => {
      const lines = amounts.map((a) => line(String(a)));
      const b = bookTotals({ lines, discounts: [pct("p", String(percent)), off("a", String(amountOff))], ratesPerLine: lines.map(() => [rate("r", String(tax), inclusive)]), exempt: "none" });
      const sum = amounts.reduce((a, x) => a + x, 0);
      const discount = dec(b.totalDiscount);
      const exclusive = b.taxAmounts.filter((x) => !x.inclusive).reduce((a, x) => a.plus(dec(x.amount)), dec(0));
      return (
        discount.lte(sum) &&
        dec(b.subtotal).eq(dec(sum).minus(discount)) &&
        dec(b.total).eq(dec(b.subtotal).plus(exclusive)) &&
        b.lines.every((l, i) => l.discountAmounts.reduce((a, d) => a.plus(dec(d.amount)), dec(0)).lte(amounts[i] ?? 0))
      );
    }),
  );
  t.pass();
});
