/**
 * chainLines (first-seen.ts): an anchored unique_count window bills the lines of the chain's count
 * since the anchor less those of its count before the window, by line key, never less than
 * nothing. Table-driven, pure.
 */
import test from "ava";
import { line } from "../../src/billing/invoicing/line.js";
import { dec } from "../../src/billing/money.js";
import { cappedChainLines, chainLines } from "../../src/billing/subscriptions/first-seen.js";

const l = (quantity: string, unit: string, cell?: string) => ({ ...line("users", dec(quantity), dec(unit)), ...(cell ? { cell } : {}) });
const shown = (lines: ReturnType<typeof chainLines>) => lines.map((x) => [x.cell ?? "", x.quantity.toString(), x.amount.toString()]);

const cases: [string, ReturnType<typeof l>[], ReturnType<typeof l>[], string[][]][] = [
  // 4 users at 100 since the anchor, 2 before the window (2 included: lines of 2 and 0 units): 200 − 0.
  ["flat with included units", [l("2", "100")], [], [["", "2", "200"]]],
  // 3 since, 2 before, none included: 300 − 200 = 100 for the one first seen in the window.
  ["flat", [l("3", "100")], [l("2", "100")], [["", "1", "100"]]],
  // Graduated: 12 since (10 at 10, 2 at 5), 10 before (10 at 10): the window adds 2 at 5 = 10.
  ["graduated tiers", [l("10", "10", "tier:1"), l("2", "5", "tier:2")], [l("10", "10", "tier:1")], [["tier:2", "2", "10"]]],
  // Volume: 10 at 10 billed (100) before; 11 at 5 (55) now: −45 would be a negative charge; nothing.
  ["volume tier reached", [l("11", "5", "tier:2")], [l("10", "10", "tier:1")], []],
  // Volume: 9 at 10 before (90), 10 at 10 now (100): +10 in the same tier.
  ["volume, same tier", [l("10", "10", "tier:1")], [l("9", "10", "tier:1")], [["tier:1", "1", "10"]]],
  // Nothing new in the window.
  ["no value first seen", [l("2", "100")], [l("2", "100")], []],
];

for (const [name, all, before, want] of cases) {
  test(name, (t) => {
    t.deepEqual(shown(chainLines(all, before)), want);
  });
}

/** cappedChainLines: the chain's lines with its limit prorated by its share, less the earlier windows' with theirs. */
const limited = (minimum: string | null, maximum: string | null) => ({ name: "users", minimum: minimum === null ? null : dec(minimum), maximum: maximum === null ? null : dec(maximum) });
const cappedShown = (r: ReturnType<typeof cappedChainLines>) => [...r.usage, ...r.extra.map((x) => x.line)].map((x) => [x.cell ?? "", x.quantity.toString(), x.amount.toString()]);
const half = dec("0.5");

const cappedCases: [string, ReturnType<typeof limited>, ReturnType<typeof l>[], ReturnType<typeof l>[], string, string[][]][] = [
  // Maximum 1,000, half the period before: 1,000 capped at 500 (−500) billed; the chain 1,000 capped at
  // 1,000: the window gives the cut back, +500 (1,000 in all).
  ["maximum, no new value", limited(null, "1000"), [l("10", "100")], [l("10", "100")], "1", [["maximum", "1", "500"]]],
  // 6 before (600 − 100 = 500 billed), 8 now (800, under 1,000): +200 usage, +100 of the cut given back: 800 in all.
  [
    "maximum, two new values",
    limited(null, "1000"),
    [l("8", "100")],
    [l("6", "100")],
    "1",
    [
      ["", "2", "200"],
      ["maximum", "1", "100"],
    ],
  ],
  // Minimum 1,000: 5 before (500, at the half's 500: nothing raised), 6 now (600 raised to 1,000): +100, +400.
  [
    "minimum",
    limited("1000", null),
    [l("6", "100")],
    [l("5", "100")],
    "1",
    [
      ["", "1", "100"],
      ["minimum", "1", "400"],
    ],
  ],
  // 2 before (200 + 300 raised = 500 billed), 8 now (800 + 200 raised): +600 usage, −100 of the minimum: 1,000 in all.
  [
    "minimum covered by later usage",
    limited("1000", null),
    [l("8", "100")],
    [l("2", "100")],
    "1",
    [
      ["", "6", "600"],
      ["minimum", "1", "-100"],
    ],
  ],
  // Volume: 10 at 10 (100) before; 11 at 5 (55) now: −45; nothing.
  ["volume tier reached", limited(null, null), [l("11", "5", "tier:2")], [l("10", "10", "tier:1")], "1", []],
];

for (const [name, rate, all, before, shareAll, want] of cappedCases) {
  test(`capped: ${name}`, (t) => {
    t.deepEqual(cappedShown(cappedChainLines(rate, all, before, dec(shareAll), half)), want);
  });
}

/**
 * cappedChainLines with the earlier windows billed at another multiplier than the one now in force
 * (`billed`, kept with the anchor): their limit is taken from what they billed, and their usage at
 * the multiplier now in force less that is one adjustment line (cell "").
 */
const since = new Date("2026-01-01T00:00:00Z");
const from = new Date("2026-01-15T00:00:00Z");
const repricedCases: [string, ReturnType<typeof l>[], ReturnType<typeof l>[], ReturnType<typeof l>[], string, string, string[][]][] = [
  // x1 -> x2, maximum 1,000, 4 users before, the same 4: the chain 800 (x2), the earlier window billed
  // 400 at x1 (under 500): no new user, +400 repriced, no maximum either side: 400, 800 in all.
  ["raised, no new value", [l("4", "200")], [l("4", "200")], [l("4", "100")], "1", "2", [["", "1", "400"]]],
  // x2 -> x1, 3 users before (600 at x2, capped at 500: 500 billed), 6 now (600 at x1, under 1,000):
  // +300 for 3 new, −300 for the earlier 3 at x1 (300 − 600), +100 of the cut given back: 100, 600 in all.
  [
    "lowered, three new values",
    [l("6", "100")],
    [l("3", "100")],
    [l("3", "200")],
    "2",
    "1",
    [
      ["", "3", "300"],
      ["", "1", "-300"],
      ["maximum", "1", "100"],
    ],
  ],
  // The same multiplier: nothing repriced (the earlier windows' lines are the ones billed).
  ["same multiplier", [l("5", "100")], [l("4", "100")], [l("4", "100")], "1", "1", [["", "1", "100"]]],
];

for (const [name, all, before, billed, was, now, want] of repricedCases) {
  test(`capped, repriced: ${name}`, (t) => {
    const r = cappedChainLines(limited(null, "1000"), all, before, dec(1), half, { lines: billed, was, now: dec(now), since, from });
    t.deepEqual(cappedShown(r), want);
    const adjustment = r.extra.find((x) => x.kind === "adjustment");
    if (adjustment) t.is(adjustment.line.description, `users: the earlier windows' usage since the change (2026-01-01T00:00:00Z to 2026-01-15T00:00:00Z) at multiplier ${now}, billed at ${was}`);
  });
}
