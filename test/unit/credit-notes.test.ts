/**
 * The arithmetic of credit notes (src/billing/credit-notes/arithmetic.ts) and their input checks,
 * table-driven: a line's gross and tax, what is left of each line after earlier notes, a whole
 * credit, an amount spread in proportion (exact sums, the largest remainders), per-line credits,
 * the tax part of each credited line (half-up), refusals beyond a line or the invoice.
 */
import test from "ava";
import { type CreditAsk, type CreditPlan, creditableLines, lineGross, lineTax, planCredit, taxPart } from "../../src/billing/credit-notes/arithmetic.js";
import { checkCreditable, creditNoteId } from "../../src/billing/credit-notes/credit-notes.js";
import { type CreateCreditNoteInput, checkCreditNote } from "../../src/billing/credit-notes/validation.js";
import { FailedPreconditionError, type InvalidArgumentError, Violations } from "../../src/billing/errors.js";
import { dec } from "../../src/billing/money.js";
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

test("a negative line (a credit on the invoice) is never credited; the rest spreads over the others", planCase, [line("Seats", "1000"), line("Proration credit", "-300")], [], "1400", whole, [
  [[0, "700", "0"]],
  "700",
  "0",
  "700",
]);

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
