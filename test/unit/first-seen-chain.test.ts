/**
 * chainLines (first-seen.ts): an anchored unique_count window bills the lines of the chain's count
 * since the anchor less those of its count before the window, by line key, never less than
 * nothing. Table-driven, pure.
 */
import test from "ava";
import { line } from "../../src/billing/invoicing/line.js";
import { dec } from "../../src/billing/money.js";
import { chainLines } from "../../src/billing/subscriptions/first-seen.js";

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
