/**
 * Proration (DESIGN §13), pure: the fraction of a period left, the lines of a change priced by
 * the engine's fixed-line pricing (flat, package, tiered seats), netting per call, and carried
 * credits on an invoice. Amounts in cents; the arithmetic beside each case.
 */
import test from "ava";
import type { Price } from "../../src/billing/catalog/types.js";
import { fixedLine } from "../../src/billing/invoicing/lines.js";
import { dec, formatDecimal } from "../../src/billing/money.js";
import { type RateChange, creditRoom, cycleCharge, netOfChange, prorationLines, remainingPart, takeCredits } from "../../src/billing/subscriptions/proration.js";
import type { InvoiceLineKind } from "../../src/billing/subscriptions/types.js";

const at = (iso: string) => new Date(iso);
const usd = (value: string) => ({ currency: "USD", value });

// [start, end, at, fraction (exact, 20 significant digits), label]
const parts: [string, string, string, string, string][] = [
  // Jan 31 → Feb 15: 15 of January's cycle's 31 days
  ["2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z", "2026-01-31T00:00:00Z", "0.48387096774193548387", "remaining 15 of 31 days"],
  // February 2026 (28 days): Mar 1 → Mar 15 is 14 of 28 = 1/2
  ["2026-02-15T00:00:00Z", "2026-03-15T00:00:00Z", "2026-03-01T00:00:00Z", "0.5", "remaining 14 of 28 days"],
  // February 2028 is a leap month: 14 of 29
  ["2028-02-15T00:00:00Z", "2028-03-15T00:00:00Z", "2028-03-01T00:00:00Z", "0.48275862068965517241", "remaining 14 of 29 days"],
  // Clamped to the month's end: Jan 31 → Feb 28 (28 days); Feb 14 → 14 of 28
  ["2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-02-14T00:00:00Z", "0.5", "remaining 14 of 28 days"],
  // A yearly cycle: Jun 1 2026 → Jan 15 2027 is 228 of 365 days
  ["2026-01-15T00:00:00Z", "2027-01-15T00:00:00Z", "2026-06-01T00:00:00Z", "0.62465753424657534247", "remaining 228 of 365 days"],
  // Half a day: 15.5 of 31 = 1/2
  ["2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z", "2026-01-30T12:00:00Z", "0.5", "remaining 15.5 of 31 days"],
  // At the start: all of it; past the end: nothing
  ["2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z", "2026-01-15T00:00:00Z", "1", "remaining 31 of 31 days"],
  ["2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z", "2026-02-16T00:00:00Z", "0", "remaining 0 of 31 days"],
];

for (const [start, end, when, fraction, label] of parts) {
  test(`remainingPart [${start}, ${end}) at ${when}: ${label}`, (t) => {
    const p = remainingPart(at(start), at(end), at(when));
    t.deepEqual([formatDecimal(p.fraction.toSignificantDigits(20)), p.label], [fraction, label]);
  });
}

const flat: Price = { kind: "flat", amount: usd("1000") };
const pack: Price = { kind: "package", amount: usd("2000"), packageUnits: "5", rounding: "round_up" };
const graduated: Price = {
  kind: "tiered",
  currency: "USD",
  mode: "graduated",
  tiers: [
    { upTo: "5", unitAmount: usd("1000"), flatAmount: null },
    { upTo: null, unitAmount: usd("800"), flatAmount: null },
  ],
};
const volume: Price = {
  kind: "tiered",
  currency: "USD",
  mode: "volume",
  tiers: [
    { upTo: "5", unitAmount: usd("1000"), flatAmount: null },
    { upTo: null, unitAmount: usd("800"), flatAmount: usd("500") },
  ],
};

/** One rate's change from `q0` × `m0` to `q1` × `m1`, priced by the engine's fixed lines. */
function change(price: Price, q0: string, q1: string, m0 = "1", m1 = "1"): RateChange {
  const charge = (q: string, m: string) => cycleCharge(fixedLine("Seats", price, dec(q), dec(m)));
  return { name: "Seats", oldQuantity: q0, newQuantity: q1, oldMultiplier: m0, newMultiplier: m1, oldCharge: charge(q0, m0), newCharge: charge(q1, m1) };
}

const half = { fraction: dec("0.5"), label: "remaining 14 of 28 days" };
const jan = remainingPart(at("2026-01-15T00:00:00Z"), at("2026-02-15T00:00:00Z"), at("2026-01-31T00:00:00Z"));

// [case, changes, part, lines as [description, unit amount (12 places), amount]]
const lineCases: [string, RateChange[], { fraction: ReturnType<typeof dec>; label: string }, [string, string, string][]][] = [
  // (5 − 3) × 1000 = 2000; × 15/31 = 967.741935… → 968
  ["flat increase", [change(flat, "3", "5")], jan, [["Seats: 3 → 5 (remaining 15 of 31 days)", "967.741935483871", "968"]]],
  // −2000 × 15/31 = −967.741935… → −968 (half-up: away from zero)
  ["flat decrease", [change(flat, "5", "3")], jan, [["Seats: 5 → 3 (remaining 15 of 31 days)", "-967.741935483871", "-968"]]],
  // 2 × 1000 × (1.5 − 1) = 1000; × 1/2 = 500
  ["multiplier", [change(flat, "2", "2", "1", "1.5")], half, [["Seats: multiplier 1 → 1.5 (remaining 14 of 28 days)", "500", "500"]]],
  // 1 → 2 and × 2: 1000 → 4000; 3000 × 1/2 = 1500
  ["quantity and multiplier", [change(flat, "1", "2", "1", "2")], half, [["Seats: 1 → 2, multiplier 1 → 2 (remaining 14 of 28 days)", "1500", "1500"]]],
  // package of 5, rounded up: 3 → 1 package (2000), 7 → 2 packages (4000); 2000 × 15/31 → 968
  ["package", [change(pack, "3", "7")], jan, [["Seats: 3 → 7 (remaining 15 of 31 days)", "967.741935483871", "968"]]],
  // package: 3 → 4 stays 1 package: no change, no line
  ["package, same packages", [change(pack, "3", "4")], jan, []],
  // graduated: 3 = 3 × 1000 = 3000; 7 = 5 × 1000 + 2 × 800 = 6600; 3600 × 15/31 = 1741.935… → 1742
  ["graduated tiers", [change(graduated, "3", "7")], jan, [["Seats: 3 → 7 (remaining 15 of 31 days)", "1741.935483870968", "1742"]]],
  // volume: 4 = 4 × 1000 = 4000; 6 = 6 × 800 + 500 flat = 5300; 1300 × 1/2 = 650
  ["volume tiers with a flat fee", [change(volume, "4", "6")], half, [["Seats: 4 → 6 (remaining 14 of 28 days)", "650", "650"]]],
  // volume: 5 = 5000; 6 = 5300: 300 × 15/31 = 145.16… → 145
  ["volume tiers across the bound", [change(volume, "5", "6")], jan, [["Seats: 5 → 6 (remaining 15 of 31 days)", "145.161290322581", "145"]]],
  // exactly half a cent: 1 × 1/2 = 0.5 → 1; −0.5 → −1
  [
    "half a cent rounds away from zero",
    [change({ kind: "flat", amount: usd("1") }, "1", "2"), change({ kind: "flat", amount: usd("1") }, "2", "1")],
    half,
    [
      ["Seats: 1 → 2 (remaining 14 of 28 days)", "0.5", "1"],
      ["Seats: 2 → 1 (remaining 14 of 28 days)", "-0.5", "-1"],
    ],
  ],
  // 1 × 14/29 = 0.48… → 0: left out
  ["a line that rounds to 0 is left out", [change({ kind: "flat", amount: usd("1") }, "1", "2")], { fraction: dec(14).div(29), label: "x" }, []],
];

for (const [name, changes, part, expected] of lineCases) {
  test(`prorationLines: ${name}`, (t) => {
    const lines = prorationLines(changes, part);
    t.deepEqual(
      lines.map((l) => [l.description, formatDecimal(l.unitAmount.toDecimalPlaces(12)), formatDecimal(l.amount)]),
      expected,
    );
    t.true(lines.every((l) => l.kind === "proration" && l.quantity.eq(1)));
  });
}

const L = (description: string, amount: string) => ({ description, quantity: dec(1), unitAmount: dec(amount), amount: dec(amount), kind: "proration" as const, key: null, windowInvoiceId: null });

test("netOfChange: a positive net is charged with all its lines; a negative one is carried (per line, or one net credit); zero is nothing", (t) => {
  t.deepEqual(
    netOfChange([L("a", "-968"), L("b", "2419")]).charge.map((l) => l.description),
    ["a", "b"],
  );
  t.deepEqual(netOfChange([L("a", "-968"), L("b", "-10")]), {
    charge: [],
    credits: [
      { description: "a", amount: "-968" },
      { description: "b", amount: "-10" },
    ],
  });
  // −1935 + 1210 = −725
  t.deepEqual(netOfChange([L("a", "-1935"), L("b", "1210")]), { charge: [], credits: [{ description: "Net of a; b", amount: "-725" }] });
  t.deepEqual(netOfChange([L("a", "-5"), L("b", "5")]), { charge: [], credits: [] });
  t.deepEqual(netOfChange([]), { charge: [], credits: [] });
});

const stored = (kind: InvoiceLineKind, amount: string) => ({ kind, amount });

test("creditRoom: an invoice's total, a draft's at most its lines kept as written (usage is recomputed), never below 0", (t) => {
  const lines = [stored("fixed", "1000"), stored("usage", "500"), stored("adjustment", "20")];
  t.is(formatDecimal(creditRoom(lines, false)), "1520");
  t.is(formatDecimal(creditRoom(lines, true)), "1020");
  t.is(formatDecimal(creditRoom([stored("usage", "500")], true)), "0");
  t.is(formatDecimal(creditRoom([], false)), "0");
  t.is(formatDecimal(creditRoom([stored("fixed", "100"), stored("proration", "-300")], false)), "0");
  // a correction of an earlier period's true-up (tied to its window) is kept as written: 1000 + 3000 − 3000 = 1000 on a draft (4000 were it recomputed)
  const corrected = [stored("fixed", "1000"), stored("usage", "500"), stored("adjustment", "3000"), { ...stored("commitment_true_up", "-3000"), windowInvoiceId: "jan" }];
  t.is(formatDecimal(creditRoom(corrected, true)), "1000");
});

test("takeCredits: oldest first, whole while they fit, the first that does not in part, the rest carried", (t) => {
  const credits = [
    { description: "old", amount: "-1935" },
    { description: "new", amount: "-645" },
  ];
  // room 1000: 1000 of the 1935; 935 and 645 carried
  const a = takeCredits(credits, dec(1000), "USD");
  t.deepEqual(
    a.lines.map((l) => [l.description, formatDecimal(l.amount)]),
    [["old (USD 10.00 of USD 19.35; the rest on the next invoice)", "-1000"]],
  );
  t.deepEqual(a.carried, [
    { description: "old", amount: "-935", whole: "-1935" },
    { description: "new", amount: "-645" },
  ]);
  // room 1000 again: 935 whole, 65 of 645; 580 carried
  const b = takeCredits(a.carried, dec(1000), "USD");
  t.deepEqual(
    b.lines.map((l) => [l.description, formatDecimal(l.amount)]),
    [
      ["old (the last USD 9.35 of USD 19.35)", "-935"],
      ["new (USD 0.65 of USD 6.45; the rest on the next invoice)", "-65"],
    ],
  );
  t.deepEqual(b.carried, [{ description: "new", amount: "-580", whole: "-645" }]);
  // room 0: nothing taken
  t.deepEqual(takeCredits(credits, dec(0), "USD"), { lines: [], carried: credits });
  // room enough for all
  t.deepEqual(
    takeCredits(credits, dec(5000), "USD").lines.map((l) => formatDecimal(l.amount)),
    ["-1935", "-645"],
  );
});
