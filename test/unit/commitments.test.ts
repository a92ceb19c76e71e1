/**
 * Minimum commitment (DESIGN §14) and credits on invoices, pure: the true-up line of a period
 * (with a prorated commitment), a draft's true-up sized again, what a period's invoices billed
 * for it (the charges a true-up is sized on), the commitment in effect after a
 * close, the correction of a trued-up period for late usage, the wire's minimum_commitment
 * checked, and an invoice's lines as credit sees them (rate code by line key). Amounts in cents; the arithmetic beside each case.
 */
import test from "ava";
import { type InvalidArgumentError, Violations } from "../../src/billing/errors.js";
import { dec, formatDecimal } from "../../src/billing/money.js";
import {
  checkCommitment,
  commitmentAfterClose,
  isTrueUpCorrection,
  pendingCommitment,
  periodCharges,
  type PeriodInvoice,
  resizedTrueUp,
  trueUpCorrection,
  trueUpLine,
} from "../../src/billing/subscriptions/commitments.js";
import { chargeLines, withApplications } from "../../src/billing/subscriptions/credit-application.js";
import { storedLine } from "../../src/billing/subscriptions/invoice-building.js";
import type { Invoice, InvoiceLine, InvoiceLineKind } from "../../src/billing/subscriptions/types.js";

const line = (kind: InvoiceLineKind, amount: string, key: string | null = null): InvoiceLine => ({ description: kind, quantity: "1", unitAmount: amount, amount, kind, key, windowInvoiceId: null });

// [commitment, fixed, usage amounts, fraction, true-up amount or null]
const trueUps: [string, string, string[], string, string | null][] = [
  // 5000 − (1000 + 1500) = 2500
  ["5000", "1000", ["1500"], "1", "2500"],
  // 3000 − (2000 + 1000) = 0: none
  ["3000", "2000", ["1000"], "1", null],
  // above it: none
  ["3000", "2000", ["1500"], "1", null],
  // no usage: 5000 − 1000 = 4000
  ["5000", "1000", [], "1", "4000"],
  // half a period: 5000 × 0.5 = 2500 − 1000 = 1500
  ["5000", "1000", ["0"], "0.5", "1500"],
  // 15 of 31 days: 5000 × 15/31 = 2419.354… − 1000 = 1419.35… → 1419
  ["5000", "1000", [], formatDecimal(dec(15).div(31)), "1419"],
  // a fractional commitment rounds once, half-up: 1000.5 − 0 = 1000.5 → 1001
  ["1000.5", "0", [], "1", "1001"],
];

for (const [commitment, fixed, usage, fraction, expected] of trueUps) {
  test(`true-up of ${commitment} × ${fraction.slice(0, 8)} over fixed ${fixed} and usage [${usage}] is ${expected}`, (t) => {
    const l = trueUpLine(
      commitment,
      dec(fixed),
      usage.map((a) => ({ amount: dec(a), kind: "usage" as const })),
      "USD",
      dec(fraction),
    );
    t.is(l ? formatDecimal(l.amount) : null, expected);
    if (l) t.is(l.kind, "commitment_true_up");
  });
}

test("a true-up counts usage, minimum and maximum lines as the period's usage, nothing else", (t) => {
  const usage = [
    { amount: dec(500), kind: "usage" as const },
    { amount: dec(300), kind: "minimum" as const },
    { amount: dec(-100), kind: "maximum" as const },
    { amount: dec(900), kind: "adjustment" as const },
    { amount: dec(-200), kind: "proration" as const },
  ];
  // 5000 − (1000 + 500 + 300 − 100) = 3300
  t.is(formatDecimal((trueUpLine("5000", dec(1000), usage, "USD") as { amount: ReturnType<typeof dec> }).amount), "3300");
  // The window's own usage-terms adjustment (no window of its own) is its usage: 5000 − (1000 + 500 + 300 − 100 − 400) = 3700.
  const adjusted = [...usage, { amount: dec(-400), kind: "adjustment" as const, windowInvoiceId: null }];
  t.is(formatDecimal((trueUpLine("5000", dec(1000), adjusted, "USD") as { amount: ReturnType<typeof dec> }).amount), "3700");
});

test("a draft's true-up is sized again on its recomputed usage from what its key kept", (t) => {
  const first = storedLine(trueUpLine("5000", dec(1000), [{ amount: dec(1000), kind: "usage" }], "USD") as NonNullable<ReturnType<typeof trueUpLine>>);
  // 5000 − (1000 + 1000) = 3000; then usage 1500: 5000 − 2500 = 2500; usage 4500: none
  t.is(first.amount, "3000");
  t.is(formatDecimal(resizedTrueUp(first, [{ amount: dec(1500), kind: "usage" }], "USD")?.amount ?? dec(0)), "2500");
  t.is(resizedTrueUp(first, [{ amount: dec(4500), kind: "usage" }], "USD"), undefined);
});

// January's period [Jan 15, Feb 15), one window closed by its invoice "jan" with 6000 of usage and a true-up of 10000 − 6000 = 4000.
const JAN = { from: new Date("2026-01-15T00:00:00Z"), to: new Date("2026-02-15T00:00:00Z") };
const tied = (l: InvoiceLine, to: string): InvoiceLine => ({ ...l, windowInvoiceId: to });
const closed = [line("usage", "6000", "api|"), line("commitment_true_up", "4000", "commitment|10000|0")];
const late = (amount: string, of = "jan") => [{ ...line("adjustment", amount, "api|"), amount: dec(amount), windowInvoiceId: of }];

// [case, what was billed for the window, this run's late usage, the correction or null]
const corrections: [string, InvoiceLine[], string[], string | null][] = [
  // late 3000 ≤ 4000: all of it taken back (January costs max(9000, 10000) = 10000, not 13000)
  ["late usage below the true-up", closed, ["3000"], "-3000"],
  // late 5000 > 4000: −4000 (January costs 6000 + 4000 + 5000 − 4000 = 11000 = max(11000, 10000))
  ["late usage above the true-up", closed, ["5000"], "-4000"],
  // 3000 taken back before; late 2000 more: min(5000, 4000) − 3000 = 1000 left to take back
  ["an earlier correction counts", [...closed, tied(line("adjustment", "3000", "api|"), "jan"), tied(line("commitment_true_up", "-3000"), "jan")], ["2000"], "-1000"],
  // nothing new: nothing more
  ["a run that finds no new late usage", [...closed, tied(line("adjustment", "3000", "api|"), "jan"), tied(line("commitment_true_up", "-3000"), "jan")], [], null],
  // all 4000 taken back before: late usage past it is billed whole
  ["nothing of the true-up left", [...closed, tied(line("adjustment", "5000", "api|"), "jan"), tied(line("commitment_true_up", "-4000"), "jan")], ["500"], null],
  // the window's invoice also takes back another period's true-up (tied to that window): not this one's
  ["another window's correction on the window's invoice", [...closed, tied(line("commitment_true_up", "-500"), "dec")], ["3000"], "-3000"],
  // no true-up (the period reached the commitment): none
  ["a period not trued up", [line("usage", "12000", "api|")], ["3000"], null],
  // late usage credited after 3000 was taken back: 2000 late in all, −2000 due, +1000 back
  ["late usage credited", [...closed, tied(line("adjustment", "3000", "api|"), "jan"), tied(line("commitment_true_up", "-3000"), "jan")], ["-1000"], "1000"],
];

for (const [title, billed, run, expected] of corrections) {
  test(`a true-up's correction for late usage: ${title}`, (t) => {
    const c = trueUpCorrection(
      JAN,
      { id: "jan", lines: billed.filter((l) => l.windowInvoiceId === null) },
      [{ id: "jan", billed }],
      run.flatMap((a) => late(a)),
    );
    t.is(c ? formatDecimal(c.amount) : null, expected);
    if (c) t.like(c, { kind: "commitment_true_up", windowInvoiceId: "jan", key: null });
  });
}

test("a true-up's correction says what it is, is told from a period's own true-up, and a draft's finalization keeps it", (t) => {
  const c = trueUpCorrection(JAN, { id: "jan", lines: closed }, [{ id: "jan", billed: closed }], late("3000")) as NonNullable<ReturnType<typeof trueUpCorrection>>;
  t.is(c.description, "Minimum commitment true-up, less late usage (period 2026-01-15T00:00:00Z to 2026-02-15T00:00:00Z)");
  t.true(isTrueUpCorrection(storedLine(c)));
  t.false(isTrueUpCorrection(closed[1] as InvoiceLine));
});

// January's period of two windows: a change of rate card's "a" [Jan 15, Feb 1) billed 3000, and "b" [Feb 1, Feb 15),
// closed by its invoice with 3000 of usage and the period's true-up 10000 − (3000 + 3000) = 4000.
const changed = [line("usage", "3000", "api|")];
const closedB = [line("usage", "3000", "api|"), line("commitment_true_up", "4000", "commitment|10000|3000")];

// [case, a's billed, b's billed, b's invoice's other lines, this run's late usage [amount, window], the correction or null]
const periodCorrections: [string, InvoiceLine[], InvoiceLine[], InvoiceLine[], [string, string][], string | null][] = [
  // late 3000 of "a", the true-up on "b": all of it taken back (the period costs max(9000, 10000) = 10000, not 13000)
  ["late usage of the window before the one that closed the period", changed, closedB, [], [["3000", "a"]], "-3000"],
  // 2000 late in each: 4000 ≤ 4000, all taken back (the period costs 10000, not 12000 with −2000 for "b" alone)
  [
    "late usage of both windows, up to the period's true-up",
    changed,
    closedB,
    [],
    [
      ["2000", "a"],
      ["2000", "b"],
    ],
    "-4000",
  ],
  // 3000 of "a" taken back before; 2000 more of "b": min(5000, 4000) − 3000 = 1000 left
  [
    "an earlier correction counts across the windows",
    [...changed, tied(line("adjustment", "3000", "api|"), "a")],
    [...closedB, tied(line("commitment_true_up", "-3000"), "b")],
    [],
    [["2000", "b"]],
    "-1000",
  ],
  // b's invoice billed 1000 late of "a" at the close (the true-up, 10000 − 7000 = 3000, was sized on it): only the 1000 since counts
  [
    "late usage billed on the closing invoice itself was in the true-up's sizing",
    [...changed, tied(line("adjustment", "1000", "api|"), "a")],
    [line("usage", "3000", "api|"), line("commitment_true_up", "3000", "commitment|10000|4000")],
    [tied(line("adjustment", "1000", "api|"), "a")],
    [["1000", "a"]],
    "-1000",
  ],
  // late usage of a window of another period: not this one's
  ["late usage of another period's window", changed, closedB, [], [["3000", "dec"]], null],
];

for (const [title, a, b, onB, run, expected] of periodCorrections) {
  test(`a period's true-up correction for late usage of its windows: ${title}`, (t) => {
    const c = trueUpCorrection(
      JAN,
      { id: "b", lines: [...b.filter((l) => l.windowInvoiceId === null), ...onB] },
      [
        { id: "a", billed: a },
        { id: "b", billed: b },
      ],
      run.flatMap(([amount, of]) => late(amount, of)),
    );
    t.is(c ? formatDecimal(c.amount) : null, expected);
    if (c) t.like(c, { kind: "commitment_true_up", windowInvoiceId: "b", key: null, description: "Minimum commitment true-up, less late usage (period 2026-01-15T00:00:00Z to 2026-02-15T00:00:00Z)" });
  });
}

// The period [Feb 1, Mar 1) of a subscription, and its invoices as the store reads them.
const FEB = new Date("2026-02-01T00:00:00Z");
const MAR = new Date("2026-03-01T00:00:00Z");
const at = (day: string) => new Date(`2026-${day}T00:00:00Z`);
const window = (from: Date, to: Date) => ({ from, to, rateCardId: "c", fixedRateQuantities: {}, rateMultipliers: {} });
const inv = (id: string, start: Date, end: Date, lines: InvoiceLine[], w: [Date, Date] | null = null, status: Invoice["status"] = "paid"): PeriodInvoice => ({
  id,
  status,
  periodStart: start,
  periodEnd: end,
  window: w ? window(w[0], w[1]) : null,
  lines,
});
const adjustment = (amount: string, of: string): InvoiceLine => ({ ...line("adjustment", amount, "api|"), windowInvoiceId: of });
// The invoice that opened the period: the seats of [Feb 1, Mar 1) and the usage of January (not this period's).
const opening = inv("open", FEB, MAR, [line("fixed", "1000", "seats|"), line("usage", "700", "api|"), line("proration", "-300")], [at("01-01"), FEB]);

// [case, invoices, late lines of the closing invoice, charges]
const periods: [string, PeriodInvoice[], InvoiceLine[], string][] = [
  // the opening invoice's fixed lines only: 1000 (January's usage 700 and a carried credit −300 are not this period's)
  ["the opening invoice", [opening], [], "1000"],
  // a change of rate card on Feb 15 billed the usage so far 8000, a minimum 200 and an upgrade 500: 1000 + 8000 + 200 + 500 = 9700
  [
    "a change's usage and upgrade",
    [opening, inv("change", FEB, at("02-15"), [line("usage", "8000", "api|"), line("minimum", "200", "api|minimum"), line("fixed", "500")], [FEB, at("02-15")])],
    [],
    "9700",
  ],
  // a seat increase charged at once: 1000 + 400 − 100 (a decrease netted with it) = 1300
  ["a seat change's proration", [opening, inv("proration", at("02-10"), MAR, [line("proration", "400", "seats|"), line("proration", "-100", "extra|")])], [], "1300"],
  // a carried credit (no rate) on a period's invoice is a credit, not a charge: 1000 + 400 = 1400
  ["a carried credit", [opening, inv("proration", at("02-10"), MAR, [line("proration", "400", "seats|"), line("proration", "-250")])], [], "1400"],
  // a void invoice counts nothing: 1000
  ["a void change invoice", [opening, inv("change", FEB, at("02-15"), [line("usage", "8000", "api|")], [FEB, at("02-15")], "void")], [], "1000"],
  // late usage of the change's window (on the closing invoice) counts, of January's window not: 1000 + 8000 + 300 = 9300
  [
    "late usage of the period's window",
    [opening, inv("change", FEB, at("02-15"), [line("usage", "8000", "api|")], [FEB, at("02-15")])],
    [adjustment("300", "change"), adjustment("900", "january")],
    "9300",
  ],
  // the previous period's invoices (the store gives only the period's, but were one given): 1000
  ["an earlier period's invoice", [opening, inv("january", at("01-01"), FEB, [line("fixed", "1000"), line("usage", "50")], [at("01-01"), at("01-20")])], [], "1000"],
];

for (const [title, invoices, late, expected] of periods) {
  test(`a period's charges: ${title}`, (t) => {
    t.is(
      formatDecimal(
        periodCharges(
          invoices,
          FEB,
          MAR,
          late.map((l) => ({ ...l, amount: dec(l.amount) })),
        ),
      ),
      expected,
    );
  });
}

// The defect's example: monthly, commitment 10000 (USD 100), no fixed fee, 100 a unit (USD 1).
// [case, billed before the close, closing window's usage, true-up or null]
const examples: [string, string, string, string | null][] = [
  // day 15: a change of rate card billed 80 units = 8000; 30 more by the close = 3000: 8000 + 3000 = 11000 ≥ 10000: none
  ["a change billed 8000, 3000 at the close", "8000", "3000", null],
  // 8000 + 1000 = 9000 < 10000: the rest, 10000 − 9000 = 1000
  ["a change billed 8000, 1000 at the close", "8000", "1000", "1000"],
  // the old rule counted only the close's usage: 10000 − 3000 = 7000, billing 8000 + 3000 + 7000 = 18000
];

for (const [title, billed, usage, expected] of examples) {
  test(`commitment 10000 with ${title}: true-up ${expected}`, (t) => {
    const l = trueUpLine("10000", dec(billed), [{ amount: dec(usage), kind: "usage" }], "USD");
    t.is(l ? formatDecimal(l.amount) : null, expected);
    if (l) t.is(l.key, `commitment|10000|${billed}`);
  });
}

test("a PATCH's commitment applies from the next period; 0 removes it then", (t) => {
  const card = { currency: "USD" };
  const set = pendingCommitment({ commitment: null }, "4000", card);
  t.deepEqual(set, { currency: "USD", current: null, next: "4000" });
  const inEffect = commitmentAfterClose(set);
  t.deepEqual(inEffect, { currency: "USD", current: "4000" });
  t.deepEqual(commitmentAfterClose(inEffect), inEffect);
  const removed = pendingCommitment({ commitment: inEffect }, null, card);
  t.deepEqual(removed, { currency: "USD", current: "4000", next: null });
  t.is(commitmentAfterClose(removed), null);
  t.is(pendingCommitment({ commitment: null }, null, card), null);
});

// [input, card currency, violated fields, value]
const inputs: [{ currencyCode: string; value: string } | undefined, string, string[], string | null | "absent"][] = [
  [undefined, "USD", [], "absent"],
  [{ currencyCode: "USD", value: "5000" }, "USD", [], "5000"],
  [{ currencyCode: "usd", value: "5000.50" }, "USD", [], "5000.5"],
  [{ currencyCode: "USD", value: "0" }, "USD", [], null],
  [{ currencyCode: "USD", value: "-1" }, "USD", ["minimum_commitment.value"], "absent"],
  [{ currencyCode: "EUR", value: "100" }, "USD", ["minimum_commitment.currency_code"], "absent"],
  [{ currencyCode: "XYZ", value: "100" }, "USD", ["minimum_commitment.currency_code"], "absent"],
  [{ currencyCode: "USD", value: "" }, "USD", ["minimum_commitment.value"], "absent"],
];

for (const [input, currency, fields, value] of inputs) {
  test(`minimum_commitment ${JSON.stringify(input)} on a ${currency} card`, (t) => {
    const v = new Violations();
    const r = checkCommitment(input, { currency } as never, v);
    let violated: string[] = [];
    try {
      v.throwIfAny();
    } catch (err) {
      violated = (err as InvalidArgumentError).violations.map((x) => x.field);
    }
    t.deepEqual(violated, fields);
    t.deepEqual(r.given ? r.value : "absent", value);
  });
}

test("an invoice's lines as credit sees them: the rate code of coded kinds from their key", (t) => {
  const lines = [
    line("fixed", "1000", "seats|"),
    line("fixed", "500"),
    line("usage", "700", "api|region=eu"),
    line("minimum", "100", "api|minimum"),
    line("adjustment", "50", "api|"),
    line("proration", "-200"),
    line("commitment_true_up", "900", "commitment|5000|1000"),
  ];
  t.deepEqual(chargeLines({ lines }), [
    { rateCode: "seats", amount: "1000" },
    { rateCode: null, amount: "500" },
    { rateCode: "api", amount: "700" },
    { rateCode: "api", amount: "100" },
    { rateCode: "api", amount: "50" },
    { rateCode: null, amount: "-200" },
    { rateCode: null, amount: "900" },
  ]);
});

test("amount due is the total less what credit applied, never negative", (t) => {
  const inv = { total: "1000" } as Invoice;
  // 1000 − (300 + 200) = 500; 1000 − 1000 = 0; nothing applied: 1000
  t.is(
    withApplications(inv, [
      { grantId: "a", amount: "300" },
      { grantId: "b", amount: "200" },
    ]).amountDue,
    "500",
  );
  t.is(withApplications(inv, [{ grantId: "a", amount: "1000" }]).amountDue, "0");
  t.is(withApplications(inv, []).amountDue, "1000");
  t.is(withApplications({ total: "0" } as Invoice, []).amountDue, "0");
});
