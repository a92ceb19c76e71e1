/**
 * The arithmetic of credit notes (src/billing/credit-notes/arithmetic.ts) and their input checks,
 * table-driven: a line's gross and tax, what is left of each line after earlier notes, a whole
 * credit, an amount spread in proportion (exact sums, the largest remainders), per-line credits,
 * the tax part of each credited line (half-up), refusals beyond a line or the invoice.
 */
import test from "ava";
import fc from "fast-check";
import { type CreditAsk, type CreditPlan, creditableLines, lineGross, lineTax, planCredit, taxPart } from "../../src/billing/credit-notes/arithmetic.js";
import { checkCreditable, creditNoteId } from "../../src/billing/credit-notes/credit-notes.js";
import { type CreateCreditNoteInput, checkCreditNote } from "../../src/billing/credit-notes/validation.js";
import { FailedPreconditionError, type InvalidArgumentError, Violations } from "../../src/billing/errors.js";
import { type Decimal, dec, roundAmount } from "../../src/billing/money.js";
import type { Invoice, InvoiceLine } from "../../src/billing/subscriptions/types.js";

/** A line of `amount`, with an optional discount and taxes [percentage-ish amount, inclusive]. */
function line(description: string, amount: string, discount = "0", taxes: [string, boolean][] = []): InvoiceLine {
  return {
    description,
    quantity: "1",
    unitAmount: amount,
    amount,
    kind: "fixed",
    key: null,
    windowInvoiceId: null,
    discountAmounts: discount === "0" ? [] : [{ discountId: "d", couponId: "c", name: "D", amount: discount }],
    taxAmounts: taxes.map(([t, inclusive], i) => ({ taxRateId: `t${i}`, displayName: "Tax", percentage: "0", inclusive, taxableAmount: "0", amount: t })),
  };
}

test("a line's gross: amount − discounts + exclusive tax; its tax: every tax", (t) => {
  const rows: [InvoiceLine, string, string][] = [
    [line("plain", "1000"), "1000", "0"],
    [line("discounted", "1000", "250"), "750", "0"],
    [line("exclusive tax", "1000", "0", [["200", false]]), "1200", "200"],
    [line("inclusive tax (inside the amount)", "1200", "0", [["200", true]]), "1200", "200"],
    [
      line("both, discounted", "1000", "100", [
        ["90", false],
        ["50", true],
      ]),
      "990",
      "140",
    ],
  ];
  for (const [l, gross, tax] of rows) {
    t.is(lineGross(l).toFixed(), gross, l.description);
    t.is(lineTax(l).toFixed(), tax, l.description);
  }
});

test("the tax part of a credit: round(credited × tax / gross), half-up; none on a line of no gross", (t) => {
  const rows: [string, string, string, string][] = [
    // credited, gross, tax → part
    ["1200", "1200", "200", "200"],
    ["600", "1200", "200", "100"],
    ["1", "1200", "200", "0"],
    ["3", "1200", "200", "1"], // 0.5 → 1
    ["9", "1200", "200", "2"], // 1.5 → 2
    ["500", "1000", "0", "0"],
    ["500", "0", "0", "0"],
  ];
  for (const [credited, gross, tax, part] of rows) t.is(taxPart(dec(credited), { gross: dec(gross), tax: dec(tax) }).toFixed(), part, `${credited} of ${gross} (${tax} tax)`);
});

test("the tax part is cumulative: round((before + credited) × tax / gross) − round(before × tax / gross), so partial notes reverse a line's tax exactly", (t) => {
  const rows: [string, string, string, string, string][] = [
    // credited, before, gross, tax → part
    ["366", "0", "1100", "100", "33"], // round(33.27) − 0 = 33
    ["367", "366", "1100", "100", "34"], // round(733 × 100 / 1100 = 66.64) − 33 = 67 − 33 = 34
    ["367", "733", "1100", "100", "33"], // round(1100 × 100 / 1100) − 67 = 100 − 67 = 33: 33 + 34 + 33 = 100
    ["550", "550", "1100", "100", "50"], // 100 − 50
    ["1", "0", "1200", "200", "0"], // round(0.17) = 0
    ["1", "5", "1200", "200", "0"], // round(6 × 200 / 1200 = 1) − round(5 × 200 / 1200 = 0.83 → 1) = 0
    ["2", "1", "1200", "200", "1"], // round(3 × 200 / 1200 = 0.5 → 1) − round(0.17 → 0) = 1, half-up
  ];
  for (const [credited, before, gross, tax, part] of rows)
    t.is(taxPart(dec(credited), { gross: dec(gross), tax: dec(tax) }, dec(before)).toFixed(), part, `${credited} after ${before} of ${gross} (${tax} tax)`);
});

test("three partial notes on a line of 1000 + 100 tax (366, 367, 367) reverse its 100 of tax exactly: 33, 34, 33", (t) => {
  const lines = [line("Seats", "1000", "0", [["100", false]])];
  const notes: { lines: CreditPlan["lines"] }[] = [];
  const taxes: string[] = [];
  for (const amount of ["366", "367", "367"]) {
    const left = dec("1100").minus(notes.reduce((a, n) => a.plus(dec(n.lines[0]?.amount ?? "0")), dec(0)));
    const p = planCredit(creditableLines(lines, notes), left, { kind: "lines", lines: [{ index: 0, amount: dec(amount) }] }) as CreditPlan;
    notes.push({ lines: p.lines });
    taxes.push(p.totalTax);
  }
  // Each on its own: round(366 × 100 / 1100) = round(367 × 100 / 1100) = 33, 99 in all, 1 of tax never reversed.
  t.deepEqual(taxes, ["33", "34", "33"]);
  t.deepEqual(
    notes.map((n) => n.lines[0]?.taxAmount),
    ["33", "34", "33"],
  );
});

const plan = (r: CreditPlan | unknown) => {
  const p = r as CreditPlan;
  return [p.lines.map((l) => [l.invoiceLineIndex, l.amount, l.taxAmount]), p.subtotal, p.totalTax, p.total];
};

const LINES = [line("Seats", "1000", "0", [["200", false]]), line("API", "500", "0", [["100", false]]), line("Support", "300")];
const TOTAL = "2100";
const whole: CreditAsk = { kind: "amount", amount: null };

const planCase = test.macro({
  exec(t, lines: InvoiceLine[], earlier: [number, string][], credited: string, ask: CreditAsk, expected: unknown) {
    const notes = [{ lines: earlier.map(([i, a]) => ({ invoiceLineIndex: i, description: "", amount: a, taxAmount: "0" })) }];
    const left = dec(TOTAL).minus(dec(credited));
    const out = planCredit(creditableLines(lines, notes), left, ask);
    t.deepEqual(Array.isArray(out) ? out.map((p) => ({ ...p, left: p.left.toFixed(), ...("asked" in p ? { asked: p.asked.toFixed() } : {}) })) : plan(out), expected);
  },
  title: (name) => name ?? "",
});

test("the whole invoice: every line all of it, tax in proportion", planCase, LINES, [], "0", whole, [
  [
    [0, "1200", "200"],
    [1, "600", "100"],
    [2, "300", "0"],
  ],
  "1800",
  "300",
  "2100",
]);

test("the whole of what is left after an earlier note on one line", planCase, LINES, [[0, "600"]], "600", whole, [
  [
    [0, "600", "100"],
    [1, "600", "100"],
    [2, "300", "0"],
  ],
  "1300",
  "200",
  "1500",
]);

test("an amount spread in proportion to what is left, summing exactly", planCase, LINES, [], "0", { kind: "amount", amount: dec("1000") }, [
  // 1000 × 1200/2100 = 571.43, × 600/2100 = 285.71, × 300/2100 = 142.86 → floors 571, 285, 142 (998); +1 to the largest remainders (142.86, 285.71)
  [
    [0, "571", "95"],
    [1, "286", "48"],
    [2, "143", "0"],
  ],
  "857",
  "143",
  "1000",
]);

test("a small amount lands on the lines with the largest remainders", planCase, LINES, [], "0", { kind: "amount", amount: dec("1") }, [[[0, "1", "0"]], "1", "0", "1"]);

test(
  "per line: an amount of one, all that is left of another",
  planCase,
  LINES,
  [[1, "100"]],
  "100",
  {
    kind: "lines",
    lines: [
      { index: 0, amount: dec("300") },
      { index: 1, amount: null },
    ],
  },
  [
    [
      [0, "300", "50"],
      [1, "500", "83"],
    ],
    "667",
    "133",
    "800",
  ],
);

test(
  "per line: beyond what is left of a line is refused, naming the line",
  planCase,
  LINES,
  [[2, "200"]],
  "200",
  {
    kind: "lines",
    lines: [
      { index: 2, amount: dec("101") },
      { index: 0, amount: dec("1") },
    ],
  },
  [{ kind: "line_exceeded", position: 0, field: "amount", left: "100" }],
);

test("per line: a line credited in full already is refused", planCase, LINES, [[2, "300"]], "300", { kind: "lines", lines: [{ index: 2, amount: null }] }, [
  { kind: "line_exceeded", position: 0, field: "invoice_line_index", left: "0" },
]);

test("an amount beyond what is left of the invoice is refused", planCase, LINES, [], "1500", { kind: "amount", amount: dec("601") }, [{ kind: "exceeds_invoice", asked: "601", left: "600" }]);

test("nothing left of the invoice: the whole of it is refused", planCase, LINES, [], TOTAL, whole, [{ kind: "exceeds_invoice", asked: "0", left: "0" }]);

test("a whole note credits a negative line (a credit on the invoice) too, as a negative note line", planCase, [line("Seats", "1000"), line("Proration credit", "-300")], [], "1400", whole, [
  // 2100 − 1400 = 700 left = 1000 − 300: every line all of it.
  [
    [0, "1000", "0"],
    [1, "-300", "0"],
  ],
  "700",
  "0",
  "700",
]);

/**
 * A rate-card change's invoice (test/api/change-tax.test.ts): the unused time on the old card, a
 * negative line, taxed by the old card; the remaining time on the new one by the new card.
 * UPGRADE: −5000 untaxed, 10000 + 2000 (20%): subtotal 5000, total_tax 2000, total 7000.
 * DOWNGRADE_TAX (the mirror): −5000 − 1000 (20%) = −6000, 15000 untaxed: subtotal 10000, total_tax −1000, total 9000.
 */
const UPGRADE = [line("Unused time on A", "-5000"), line("Remaining time on B", "10000", "0", [["2000", false]])];
const MIRROR = [line("Unused time on A", "-5000", "0", [["-1000", false]]), line("Remaining time on B", "15000")];

/** planCredit on `lines` after earlier notes ([line, amount] each), of which what is left is their gross less those notes. */
const mixedCase = test.macro({
  exec(t, lines: InvoiceLine[], earlier: [number, string][], ask: CreditAsk, expected: unknown) {
    const notes = [{ lines: earlier.map(([i, a]) => ({ invoiceLineIndex: i, description: "", amount: a, taxAmount: "0" })) }];
    const total = lines.reduce((a, l) => a.plus(lineGross(l)), dec(0));
    const left = earlier.reduce((a, [, amount]) => a.minus(dec(amount)), total);
    const out = planCredit(creditableLines(lines, notes), left, ask);
    t.deepEqual(Array.isArray(out) ? out.map((p) => ({ ...p, left: p.left.toFixed(), ...("asked" in p ? { asked: p.asked.toFixed() } : {}) })) : plan(out), expected);
  },
  title: (name) => name ?? "",
});

const rows: [string, InvoiceLine[], [number, string][], CreditAsk, unknown][] = [
  [
    // Every line all of it: −5000 (no tax), 12000 of which 2000 tax. The old code: 7000 on line 1, tax round(7000 × 2000 / 12000) = 1167.
    "an upgrade's invoice, whole: −5000 untaxed and 12000 with its 2000 of tax; subtotal 5000, tax 2000, total 7000",
    UPGRADE,
    [],
    whole,
    [
      [
        [0, "-5000", "0"],
        [1, "12000", "2000"],
      ],
      "5000",
      "2000",
      "7000",
    ],
  ],
  [
    // −6000 with its −1000 of tax, 15000 untaxed: tax −1000, subtotal 9000 − (−1000) = 10000. The old code: 9000 on line 1, tax 0.
    "the mirror (a taxed negative line, an untaxed charge), whole: tax −1000, subtotal 10000, total 9000",
    MIRROR,
    [],
    whole,
    [
      [
        [0, "-6000", "-1000"],
        [1, "15000", "0"],
      ],
      "10000",
      "-1000",
      "9000",
    ],
  ],
  [
    // Half (3500 of 7000): the negative line's share round(3500 × 5000 / 7000) = 2500, the positive 3500 + 2500 = 6000, tax round(6000 × 2000 / 12000) = 1000.
    "an amount: the same fraction of every line, signed (half: −2500 and 6000 with 1000 of tax)",
    UPGRADE,
    [],
    { kind: "amount", amount: dec("3500") },
    [
      [
        [0, "-2500", "0"],
        [1, "6000", "1000"],
      ],
      "2500",
      "1000",
      "3500",
    ],
  ],
  [
    // 1000 × 5000 / 7000 = 714.29 → 714; 1000 + 714 = 1714 on line 1, tax round(1714 × 2000 / 12000 = 285.67) = 286.
    "an amount not a round fraction: the negative lines' share rounded half-up, the positive lines the rest",
    UPGRADE,
    [],
    { kind: "amount", amount: dec("1000") },
    [
      [
        [0, "-714", "0"],
        [1, "1714", "286"],
      ],
      "714",
      "286",
      "1000",
    ],
  ],
  [
    // Mirror, 3000 of 9000: round(3000 × 6000 / 9000) = 2000 → −2000, tax round(−2000 × −1000 / −6000 = −333.33) = −333; 3000 + 2000 = 5000 untaxed.
    "the mirror, an amount: the negative line's tax in proportion (−333)",
    MIRROR,
    [],
    { kind: "amount", amount: dec("3000") },
    [
      [
        [0, "-2000", "-333"],
        [1, "5000", "0"],
      ],
      "3333",
      "-333",
      "3000",
    ],
  ],
  [
    // An amount equal to all that is left is the whole note: 7000 × 5000 / 7000 = 5000, 7000 + 5000 = 12000.
    "an amount of all that is left is the whole note",
    UPGRADE,
    [],
    { kind: "amount", amount: dec("7000") },
    [
      [
        [0, "-5000", "0"],
        [1, "12000", "2000"],
      ],
      "5000",
      "2000",
      "7000",
    ],
  ],
  [
    // After the half (−2500, 6000): left −2500 and 6000 (3500); tax 2000 − round(6000 × 2000 / 12000) = 2000 − 1000 = 1000: 1000 + 1000 = 2000 in all.
    "the whole after an amount: what is left of every line; the two notes' tax 1000 + 1000 = 2000",
    UPGRADE,
    [
      [0, "-2500"],
      [1, "6000"],
    ],
    whole,
    [
      [
        [0, "-2500", "0"],
        [1, "6000", "1000"],
      ],
      "2500",
      "1000",
      "3500",
    ],
  ],
  [
    // A per-line note took 3000 of line 1 (tax round(3000 × 2000 / 12000) = 500): left −5000 and 9000 (4000); tax 2000 − 500 = 1500: 500 + 1500 = 2000.
    "the whole after a per-line note: the rest of the taxed line and all of the negative one; 500 + 1500 = 2000 of tax",
    UPGRADE,
    [[1, "3000"]],
    whole,
    [
      [
        [0, "-5000", "0"],
        [1, "9000", "1500"],
      ],
      "2500",
      "1500",
      "4000",
    ],
  ],
  [
    // Per line, unchanged: 3000 of line 1, round(3000 × 2000 / 12000) = 500.
    "per line: a positive line as before",
    UPGRADE,
    [],
    { kind: "lines", lines: [{ index: 1, amount: dec("3000") }] },
    [[[1, "3000", "500"]], "2500", "500", "3000"],
  ],
  [
    "per line: a negative line is not credited on its own (nothing left of it to credit)",
    UPGRADE,
    [],
    { kind: "lines", lines: [{ index: 0, amount: null }] },
    [{ kind: "line_exceeded", position: 0, field: "invoice_line_index", left: "0" }],
  ],
  [
    // 7000 of line 1 is all that is left of the invoice (7000): the whole note, −5000 folded in, so its 2000 of tax is all reversed.
    // The old code: 7000 on line 1 alone, tax round(7000 × 2000 / 12000) = 1167, subtotal 5833; 0 left, 833 of tax never reversed.
    "per line: asks taking all that is left of the invoice are the whole note (−5000 and 12000 with 2000 of tax), not 7000 with 1167",
    UPGRADE,
    [],
    { kind: "lines", lines: [{ index: 1, amount: dec("7000") }] },
    [
      [
        [0, "-5000", "0"],
        [1, "12000", "2000"],
      ],
      "5000",
      "2000",
      "7000",
    ],
  ],
  [
    // After 3000 of line 1 (tax 500): left −5000 and 9000 (4000). 4000 of line 1 is all that is left: −5000 and 9000 with 2000 − 500 = 1500; 500 + 1500 = 2000.
    "per line after a per-line note: the rest of the invoice asked of line 1 folds in the negative line; 500 + 1500 = 2000 of tax",
    UPGRADE,
    [[1, "3000"]],
    { kind: "lines", lines: [{ index: 1, amount: dec("4000") }] },
    [
      [
        [0, "-5000", "0"],
        [1, "9000", "1500"],
      ],
      "2500",
      "1500",
      "4000",
    ],
  ],
  [
    // Mirror: 9000 of line 1 (15000 untaxed) is all that is left: −6000 with its −1000 of tax and 15000; subtotal 10000, tax −1000. The old code: 9000, tax 0.
    "the mirror, per line: all that is left asked of the untaxed line reverses the negative line's −1000 of tax too",
    MIRROR,
    [],
    { kind: "lines", lines: [{ index: 1, amount: dec("9000") }] },
    [
      [
        [0, "-6000", "-1000"],
        [1, "15000", "0"],
      ],
      "10000",
      "-1000",
      "9000",
    ],
  ],
  [
    // 6999 leaves 1: the note stays per line (round(6999 × 2000 / 12000 = 1166.5) = 1167); the last unit's whole note reverses the rest.
    "per line: one unit short of all that is left stays a per-line note",
    UPGRADE,
    [],
    { kind: "lines", lines: [{ index: 1, amount: dec("6999") }] },
    [[[1, "6999", "1167"]], "5832", "1167", "6999"],
  ],
  [
    "per line: beyond what is left of the invoice (7001 of 7000) is refused",
    UPGRADE,
    [],
    { kind: "lines", lines: [{ index: 1, amount: dec("7001") }] },
    [{ kind: "exceeds_invoice", asked: "7001", left: "7000" }],
  ],
  ["an amount beyond what is left (7000 = −5000 + 12000) is refused", UPGRADE, [], { kind: "amount", amount: dec("7001") }, [{ kind: "exceeds_invoice", asked: "7001", left: "7000" }]],
];
for (const [name, lines, earlier, ask, expected] of rows) test(name, mixedCase, lines, earlier, ask, expected);

/** Exact sums of what every note credited of each line, and of all their tax and totals. */
function sums(lines: readonly InvoiceLine[], notes: readonly CreditPlan[]) {
  const perLine = lines.map(() => dec(0));
  for (const n of notes) for (const l of n.lines) perLine[l.invoiceLineIndex as number] = (perLine[l.invoiceLineIndex as number] as Decimal).plus(dec(l.amount));
  const add = (f: (n: CreditPlan) => string) => notes.reduce((a, n) => a.plus(dec(f(n))), dec(0)).toFixed();
  return { perLine: perLine.map((d) => d.toFixed()), subtotal: add((n) => n.subtotal), tax: add((n) => n.totalTax), total: add((n) => n.total) };
}

const least = (a: Decimal, b: Decimal): Decimal => (a.lt(b) ? a : b);
const atLeastOne = (a: Decimal): Decimal => (a.lt(1) ? dec(1) : a);

test("property: any partial notes (amounts, per line) then a whole note credit every line exactly and sum to the invoice's subtotal, total_tax and total", (t) => {
  const rate = fc.constantFrom("0", "7", "20", "25");
  const invoiceLine = fc.record({ amount: fc.integer({ min: -20000, max: 20000 }).filter((a) => a !== 0), rate, discount: fc.integer({ min: 0, max: 30 }) });
  const step = fc.record({ perLine: fc.boolean(), pick: fc.nat(), fraction: fc.double({ min: 0, max: 1, noNaN: true }) });
  fc.assert(
    fc.property(fc.array(invoiceLine, { minLength: 1, maxLength: 5 }), fc.array(step, { maxLength: 6 }), (specs, steps) => {
      // Each line: amount, a discount (percent of a positive line), an exclusive tax at its rate: round(net × rate / 100), half-up.
      const lines = specs.map((sp, i) => {
        const discount = sp.amount > 0 ? Math.floor((sp.amount * sp.discount) / 100) : 0;
        const tax = roundAmount(
          dec(sp.amount - discount)
            .times(dec(sp.rate))
            .div(100),
        );
        return line(`L${i}`, String(sp.amount), String(discount), tax.isZero() ? [] : [[tax.toFixed(), false]]);
      });
      const total = lines.reduce((a, l) => a.plus(lineGross(l)), dec(0));
      fc.pre(total.gt(0));
      const notes: CreditPlan[] = [];
      const leftOf = () => total.minus(notes.reduce((a, n) => a.plus(dec(n.total)), dec(0)));
      for (const s of steps) {
        const left = leftOf();
        if (left.lte(1)) break;
        // Something is always left for the whole note: at most left − 1.
        const cap = left.minus(1);
        let ask: CreditAsk;
        const credit = creditableLines(lines, notes);
        const open = credit.flatMap((l, i) => (l.left.gt(0) ? [i] : []));
        if (s.perLine && open.length > 0) {
          const index = open[s.pick % open.length] as number;
          const most = least((credit[index] as { left: Decimal }).left, cap);
          ask = { kind: "lines", lines: [{ index, amount: atLeastOne(most.times(s.fraction).floor()) }] };
        } else ask = { kind: "amount", amount: atLeastOne(cap.times(s.fraction).floor()) };
        const p = planCredit(credit, left, ask);
        if (Array.isArray(p)) return false;
        notes.push(p);
      }
      const last = planCredit(creditableLines(lines, notes), leftOf(), whole);
      if (Array.isArray(last)) return false;
      notes.push(last);
      const got = sums(lines, notes);
      const subtotal = lines.reduce((a, l) => a.plus(lineGross(l)).minus(lineTax(l)), dec(0));
      const tax = lines.reduce((a, l) => a.plus(lineTax(l)), dec(0));
      // Every note credits a positive total; every line is credited all of it, within it all along.
      const positive = notes.every((n) => dec(n.total).gt(0));
      return positive && JSON.stringify(got) === JSON.stringify({ perLine: lines.map((l) => lineGross(l).toFixed()), subtotal: subtotal.toFixed(), tax: tax.toFixed(), total: total.toFixed() });
    }),
    { numRuns: 500, seed: 15 },
  );
  t.pass();
});

test("property: per-line notes alone, the last taking all that is left of the invoice, credit every line exactly and sum to its subtotal, total_tax and total", (t) => {
  const rate = fc.constantFrom("0", "7", "20", "25");
  const invoiceLine = fc.record({ amount: fc.integer({ min: -20000, max: 20000 }).filter((a) => a !== 0), rate });
  fc.assert(
    fc.property(fc.array(invoiceLine, { minLength: 1, maxLength: 5 }), fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }), (specs, fractions) => {
      const lines = specs.map((sp, i) => {
        const tax = roundAmount(dec(sp.amount).times(dec(sp.rate)).div(100));
        return line(`L${i}`, String(sp.amount), "0", tax.isZero() ? [] : [[tax.toFixed(), false]]);
      });
      const total = lines.reduce((a, l) => a.plus(lineGross(l)), dec(0));
      fc.pre(total.gt(0));
      const notes: CreditPlan[] = [];
      const leftOf = () => total.minus(notes.reduce((a, n) => a.plus(dec(n.total)), dec(0)));
      // Some partial asks, then each positive line in turn all it can take (at most what is left of the invoice), until nothing is left.
      const asks = [...fractions.map((f) => ({ f })), ...lines.map(() => ({ f: 1 }))];
      for (const [k, { f }] of asks.entries()) {
        const left = leftOf();
        if (left.isZero()) break;
        const credit = creditableLines(lines, notes);
        const open = credit.flatMap((l, i) => (l.left.gt(0) ? [i] : []));
        const index = open[k % open.length] as number;
        const amount = atLeastOne(
          least((credit[index] as { left: Decimal }).left, left)
            .times(f)
            .floor(),
        );
        const p = planCredit(credit, left, { kind: "lines", lines: [{ index, amount }] });
        if (Array.isArray(p)) return false;
        notes.push(p);
      }
      if (!leftOf().isZero()) return true;
      const got = sums(lines, notes);
      const subtotal = lines.reduce((a, l) => a.plus(lineGross(l)).minus(lineTax(l)), dec(0));
      const tax = lines.reduce((a, l) => a.plus(lineTax(l)), dec(0));
      return JSON.stringify(got) === JSON.stringify({ perLine: lines.map((l) => lineGross(l).toFixed()), subtotal: subtotal.toFixed(), tax: tax.toFixed(), total: total.toFixed() });
    }),
    { numRuns: 500, seed: 15 },
  );
  t.pass();
});

const input = (over: Partial<CreateCreditNoteInput>): CreateCreditNoteInput => ({ invoiceId: "inv_1", reason: "other", outcome: "credit_balance", lines: [], metadata: {}, ...over });

test("input checks name each field", (t) => {
  const rows: [Partial<CreateCreditNoteInput>, string[]][] = [
    [{}, []],
    [{ invoiceId: "", reason: "because", outcome: "cash" }, ["invoice_id", "reason", "outcome"]],
    [{ amount: "0" }, ["amount"]],
    [{ amount: "12.5" }, ["amount"]],
    [{ amount: "abc" }, ["amount"]],
    [{ amount: "100", lines: [{ invoiceLineIndex: 0 }] }, ["amount"]],
    [{ lines: [{ invoiceLineIndex: 0, amount: "-1" }, { invoiceLineIndex: 0 }, { invoiceLineIndex: -1 }] }, ["lines[0].amount", "lines[1].invoice_line_index", "lines[2].invoice_line_index"]],
    [{ memo: "x".repeat(1001) }, ["memo"]],
  ];
  for (const [over, fields] of rows) {
    const v = new Violations();
    checkCreditNote(input(over), v);
    let found: string[] = [];
    try {
      v.throwIfAny();
    } catch (err) {
      found = (err as InvalidArgumentError).violations.map((x) => x.field);
    }
    t.deepEqual(found, fields, JSON.stringify(over));
  }
});

test("a note's ID is derived from its invoice's state and what it credits: the same on a retry, another once a note was written", (t) => {
  const id = creditNoteId("env_1", "inv_1", 0, "0", "1000", "refund");
  t.regex(id, /^cn_[0-9A-Za-z]{22}$/);
  t.is(creditNoteId("env_1", "inv_1", 0, "0", "1000", "refund"), id);
  const others = [
    creditNoteId("env_2", "inv_1", 0, "0", "1000", "refund"),
    creditNoteId("env_1", "inv_2", 0, "0", "1000", "refund"),
    creditNoteId("env_1", "inv_1", 1, "1000", "1000", "refund"),
    creditNoteId("env_1", "inv_1", 0, "0", "999", "refund"),
    creditNoteId("env_1", "inv_1", 0, "0", "1000", "credit_balance"),
  ];
  t.is(new Set([id, ...others]).size, 6);
});

test("a void note credits nothing of its lines", (t) => {
  const notes = [
    { status: "void", lines: [{ invoiceLineIndex: 0, description: "", amount: "500", taxAmount: "0" }] },
    { status: "issued", lines: [{ invoiceLineIndex: 0, description: "", amount: "100", taxAmount: "0" }] },
  ];
  t.deepEqual(
    creditableLines([line("Seats", "1000")], notes).map((l) => l.left.toFixed()),
    ["900"],
  );
});

test("which outcomes an invoice's status takes: a balance credit only for money received (a paid invoice), an open one's amount due reduced instead", (t) => {
  const inv = (status: Invoice["status"], over: Partial<Invoice> = {}) =>
    ({ id: "inv_1", status, total: "1500", amountDue: "1500", subscriptionId: "sub_1", periodKey: "2026-01", ...over }) as Invoice;
  const purchase = { subscriptionId: "", periodKey: "credit:cg_1" };
  const rows: [Invoice, "reduce_amount_due" | "credit_balance" | "refund", string | null][] = [
    [inv("open"), "reduce_amount_due", null],
    [inv("open"), "credit_balance", "INVOICE_NOT_PAID"],
    [inv("open"), "refund", "INVOICE_NOT_REFUNDABLE"],
    [inv("paid"), "reduce_amount_due", "INVOICE_NOT_OPEN"],
    [inv("paid"), "credit_balance", null],
    [inv("paid"), "refund", null],
    [inv("paid", { amountDue: "0" }), "refund", "INVOICE_NOT_REFUNDABLE"],
    [inv("paid", { amountDue: "0" }), "credit_balance", null],
    [inv("void"), "credit_balance", "INVOICE_NOT_CREDITABLE"],
    [inv("uncollectible"), "credit_balance", "INVOICE_NOT_CREDITABLE"],
    [inv("uncollectible"), "reduce_amount_due", "INVOICE_NOT_CREDITABLE"],
    [inv("draft"), "reduce_amount_due", "INVOICE_NOT_CREDITABLE"],
    [inv("open", purchase), "credit_balance", "INVOICE_NOT_CREDITABLE"],
    [inv("paid", purchase), "credit_balance", "INVOICE_NOT_CREDITABLE"],
    [inv("paid", purchase), "refund", null],
  ];
  for (const [invoice, outcome, reason] of rows) {
    const label = `${invoice.status} ${invoice.periodKey} due ${invoice.amountDue}: ${outcome}`;
    let got: string | null = null;
    try {
      checkCreditable(invoice, outcome);
    } catch (err) {
      t.true(err instanceof FailedPreconditionError, label);
      got = (err as FailedPreconditionError).reason;
      if (reason === "INVOICE_NOT_PAID")
        t.deepEqual(
          (err as FailedPreconditionError).violations.map((v) => v.field),
          ["outcome"],
          label,
        );
    }
    t.is(got, reason, label);
  }
});
