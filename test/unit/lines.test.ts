/** Invoice lines (src/billing/invoicing/lines.ts), table-driven: fixed, usage, package and dimensional pricing. */
import test from "ava";
import type { MatrixCell, Price } from "../../src/billing/catalog/types.js";
import { dimensionalLines, fixedLine, priced, simpleUsageLine, total } from "../../src/billing/invoicing/lines.js";
import { dec, formatDecimal } from "../../src/billing/money.js";

const flat = (value: string): Price => ({ kind: "flat", amount: { currency: "USD", value } });
const pkg = (value: string, units: string, rounding: "round_up" | "round_down" = "round_up"): Price => ({
  kind: "package",
  amount: { currency: "USD", value },
  packageUnits: units,
  rounding,
});

/** Lines as plain text, easy to compare: [description, quantity, unit amount, amount]. */
const plain = (lines: ReturnType<typeof fixedLine>) => lines.map((l) => [l.description, formatDecimal(l.quantity), formatDecimal(l.unitAmount), formatDecimal(l.amount)]);

const pricedCases: [string, Price, string, string, [string, string]][] = [
  ["flat keeps the quantity", flat("250"), "3", "1", ["3", "250"]],
  ["flat × multiplier", flat("250"), "3", "1.5", ["3", "375"]],
  ["flat, fractional quantity", flat("10"), "0.25", "1", ["0.25", "10"]],
  ["package round_up, exact", pkg("500", "100"), "200", "1", ["2", "500"]],
  ["package round_up, one unit over", pkg("500", "100"), "201", "1", ["3", "500"]],
  ["package round_up, a fraction over", pkg("500", "100"), "100.0001", "1", ["2", "500"]],
  ["package round_down, just under", pkg("500", "100", "round_down"), "199", "1", ["1", "500"]],
  ["package round_down, under one package", pkg("500", "100", "round_down"), "99", "1", ["0", "500"]],
  ["package × multiplier", pkg("500", "100"), "150", "2", ["2", "1000"]],
];
for (const [name, price, quantity, multiplier, [q, unit]] of pricedCases) {
  test(`priced: ${name}`, (t) => {
    const p = priced(price, dec(quantity), dec(multiplier));
    t.deepEqual([formatDecimal(p.quantity), formatDecimal(p.unitAmount)], [q, unit]);
  });
}

const fixedCases: [string, Price, string, string, string[][]][] = [
  ["one seat", flat("1000"), "1", "1", [["Seats", "1", "1000", "1000"]]],
  ["no seats: no line", flat("1000"), "0", "1", []],
  ["rounded half-up once per line", flat("0.5"), "3", "1", [["Seats", "3", "0.5", "2"]]],
  ["below half rounds down", flat("0.4"), "3", "1", [["Seats", "3", "0.4", "1"]]],
  ["package named with its size", pkg("700", "10"), "25", "1", [["Seats (3 × 10)", "3", "700", "2100"]]],
  ["package rounded down to nothing: no line", pkg("700", "10", "round_down"), "9", "1", []],
];
for (const [name, price, quantity, multiplier, want] of fixedCases) {
  test(`fixedLine: ${name}`, (t) => {
    t.deepEqual(plain(fixedLine("Seats", price, dec(quantity), dec(multiplier))), want);
  });
}

const usageCases: [string, Price, string, string, string, string[][]][] = [
  ["all billable", flat("2"), "10", "0", "1", [["API calls", "10", "2", "20"]]],
  ["included units first", flat("2"), "10", "4", "1", [["API calls", "6", "2", "12"]]],
  ["usage within the included units: no line", flat("2"), "4", "4", "1", []],
  ["usage under the included units: no line", flat("2"), "1", "4", "1", []],
  ["no usage: no line", flat("2"), "0", "0", "1", []],
  ["multiplier", flat("2"), "10", "0", "0.5", [["API calls", "10", "1", "10"]]],
  ["package round_up", pkg("100", "1000"), "2500", "0", "1", [["API calls (3 × 1000 units)", "3", "100", "300"]]],
  ["package after included units", pkg("100", "1000"), "2500", "1500", "1", [["API calls (1 × 1000 units)", "1", "100", "100"]]],
  ["package round_down below one: no line", pkg("100", "1000", "round_down"), "999", "0", "1", []],
  ["fraction of a smallest unit, half-up", flat("0.001"), "500", "0", "1", [["API calls", "500", "0.001", "1"]]],
];
for (const [name, price, used, included, multiplier, want] of usageCases) {
  test(`simpleUsageLine: ${name}`, (t) => {
    t.deepEqual(plain(simpleUsageLine("API calls", price, dec(used), dec(included), dec(multiplier))), want);
  });
}

const cells: MatrixCell[] = [
  { coordinates: { region: "eu", tier: "basic" }, price: flat("1") },
  { coordinates: { region: "eu", tier: "pro" }, price: flat("3") },
  { coordinates: { region: "us", tier: "basic" }, price: pkg("50", "10") },
];
const keyOf = (c: Record<string, string>) => `${c.region}|${c.tier}`;
const use = (region: string, tier: string, used: string) => ({ coordinates: { region, tier }, used: dec(used) });

const dimensionalCases: [string, ReturnType<typeof use>[], string, string[][]][] = [
  [
    "each cell priced, in matrix order",
    [use("us", "basic", "15"), use("eu", "basic", "4"), use("eu", "pro", "2")],
    "0",
    [
      ["Storage (region=eu, tier=basic)", "4", "1", "4"],
      ["Storage (region=eu, tier=pro)", "2", "3", "6"],
      ["Storage (region=us, tier=basic)", "2", "50", "100"],
    ],
  ],
  [
    "included units go to the most expensive cell first (us/basic: 5 per unit)",
    [use("us", "basic", "10"), use("eu", "pro", "2"), use("eu", "basic", "4")],
    "12",
    [["Storage (region=eu, tier=basic)", "4", "1", "4"]],
  ],
  ["usage of one combination in several parts is summed", [use("eu", "pro", "1"), use("eu", "pro", "2")], "0", [["Storage (region=eu, tier=pro)", "3", "3", "9"]]],
  [
    "a combination without a cell is billed at zero and named",
    [use("ap", "basic", "7"), use("eu", "basic", "1")],
    "0",
    [
      ["Storage (region=eu, tier=basic)", "1", "1", "1"],
      ["Storage (region=ap, tier=basic: no price for this combination)", "7", "0", "0"],
    ],
  ],
  ["no usage: no lines", [use("ap", "basic", "0")], "0", []],
];
for (const [name, usage, included, want] of dimensionalCases) {
  test(`dimensionalLines: ${name}`, (t) => {
    t.deepEqual(plain(dimensionalLines("Storage", cells, usage, dec(included), dec(1), keyOf)), want);
  });
}

test("total is the sum of the rounded lines", (t) => {
  const lines = [...fixedLine("A", flat("0.5"), dec(1), dec(1)), ...fixedLine("B", flat("0.5"), dec(1), dec(1))];
  // Each 0.5 rounds up to 1: the total is 2, not round(1.0) = 1.
  t.is(formatDecimal(total(lines)), "2");
  t.is(formatDecimal(total([])), "0");
});
