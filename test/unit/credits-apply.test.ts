/**
 * The allocation of credit to an invoice (src/billing/credits/apply.ts) and the spend order
 * (order.ts), table-driven: which grant pays how much, restricted grants only against their
 * lines, never beyond the total, whole smallest units.
 */
import test from "ava";
import { type ApplicableGrant, type ChargeLine, allocateCredits, appliedTotal } from "../../src/billing/credits/apply.js";
import { spendOrder } from "../../src/billing/credits/order.js";

const g = (id: string, remaining: string, codes: string[] = []): ApplicableGrant => ({ id, remaining, appliesToRateCodes: codes });
const l = (rateCode: string | null, amount: string): ChargeLine => ({ rateCode, amount });

const cases: [string, ChargeLine[], string, ApplicableGrant[], [string, string][]][] = [
  ["no grants: nothing applied", [l("api", "1000")], "1000", [], []],
  ["one grant covers part", [l("api", "1000")], "1000", [g("a", "400")], [["a", "400"]]],
  ["one grant covers all, its rest stays", [l("api", "1000")], "1000", [g("a", "5000")], [["a", "1000"]]],
  [
    "grants in the order given, the second takes the rest",
    [l("api", "1000")],
    "1000",
    [g("a", "300"), g("b", "5000")],
    [
      ["a", "300"],
      ["b", "700"],
    ],
  ],
  ["an exhausted grant is skipped", [l("api", "1000")], "1000", [g("a", "0"), g("b", "200")], [["b", "200"]]],
  ["total 0: nothing", [l("api", "0")], "0", [g("a", "10")], []],
  ["negative total (credit lines): nothing", [l("api", "100"), l(null, "-300")], "-200", [g("a", "10")], []],
  ["a restricted grant pays only its lines", [l("api", "600"), l("seats", "400")], "1000", [g("a", "5000", ["seats"])], [["a", "400"]]],
  [
    "restricted, then unrestricted takes what is left of the total",
    [l("api", "600"), l("seats", "400")],
    "1000",
    [g("a", "5000", ["seats"]), g("b", "5000")],
    [
      ["a", "400"],
      ["b", "600"],
    ],
  ],
  [
    "unrestricted first leaves a restricted grant only what is left of the total",
    [l("api", "600"), l("seats", "400")],
    "1000",
    [g("b", "900"), g("a", "5000", ["seats"])],
    [
      ["b", "900"],
      ["a", "100"],
    ],
  ],
  [
    "two restricted grants on one line: the second takes its rest",
    [l("seats", "400")],
    "400",
    [g("a", "150", ["seats"]), g("b", "500", ["seats"])],
    [
      ["a", "150"],
      ["b", "250"],
    ],
  ],
  ["a restricted grant without lines of its codes pays nothing", [l("api", "600")], "600", [g("a", "100", ["seats"])], []],
  [
    "tax on top: the total (after tax) bounds, lines bound restricted grants",
    [l("api", "1000")],
    "1200",
    [g("a", "5000", ["api"]), g("b", "5000")],
    [
      ["a", "1000"],
      ["b", "200"],
    ],
  ],
  ["a discount below the lines: the total bounds even restricted grants", [l("api", "1000")], "800", [g("a", "5000", ["api"])], [["a", "800"]]],
  // A rate's lines net: usage 1500 with its maximum's line −500 (a cap of 1000) is 1000 of api to
  // pay, not 1500 (whose 500 over the cap would pay the seats); 2000 − 1000 = 1000 due.
  ["a rate's maximum line nets against its usage: a grant restricted to it pays the net", [l("api", "1500"), l("api", "-500"), l("seats", "1000")], "2000", [g("a", "5000", ["api"])], [["a", "1000"]]],
  [
    "two restricted grants on a capped rate: the second takes what is left of its net (1500 − 500 − 600 = 400)",
    [l("api", "1500"), l("api", "-500"), l("seats", "1000")],
    "2000",
    [g("a", "600", ["api"]), g("b", "5000", ["api"])],
    [
      ["a", "600"],
      ["b", "400"],
    ],
  ],
  // 300 − 500 = −200 for api: nothing of it to pay.
  ["a rate whose lines net ≤ 0 pays nothing", [l("api", "300"), l("api", "-500"), l("seats", "1000")], "800", [g("a", "5000", ["api"])], []],
  // api nets 1000, seats 1000: 2000, the whole total.
  ["restricted to two rates: each up to its net", [l("api", "1500"), l("seats", "1000"), l("api", "-500")], "2000", [g("a", "5000", ["api", "seats"])], [["a", "2000"]]],
  [
    "a restricted grant on a capped rate, then an unrestricted one takes the rest of the total",
    [l("api", "1500"), l("api", "-500"), l("seats", "1000")],
    "2000",
    [g("a", "5000", ["api"]), g("b", "5000")],
    [
      ["a", "1000"],
      ["b", "1000"],
    ],
  ],
  ["a fractional rest is taken down to a whole unit", [l("api", "1000")], "1000", [g("a", "10.75")], [["a", "10"]]],
  ["a rest below one unit pays nothing", [l("api", "1000")], "1000", [g("a", "0.5"), g("b", "3")], [["b", "3"]]],
  ["beyond JS numbers: exact", [l("api", "123456789012345678901")], "123456789012345678901", [g("a", "99999999999999999999")], [["a", "99999999999999999999"]]],
];

for (const [name, lines, total, grants, want] of cases) {
  test(`allocation: ${name}`, (t) => {
    const got = allocateCredits(lines, total, grants);
    t.deepEqual(
      got.map((a) => [a.grantId, a.amount]),
      want,
    );
    t.is(appliedTotal(got), want.reduce((acc, [, v]) => acc + BigInt(v), 0n).toString());
  });
}

test("spend order: priority, then soonest expiry (none last), then oldest, then id", (t) => {
  const d = (s: string) => new Date(s);
  const grants = [
    { id: "e", priority: 50, expiresAt: null, createdAt: d("2026-01-01T00:00:00Z") },
    { id: "d", priority: 50, expiresAt: d("2026-06-01T00:00:00Z"), createdAt: d("2026-01-03T00:00:00Z") },
    { id: "c", priority: 50, expiresAt: d("2026-03-01T00:00:00Z"), createdAt: d("2026-01-05T00:00:00Z") },
    { id: "b", priority: 10, expiresAt: null, createdAt: d("2026-01-09T00:00:00Z") },
    { id: "g", priority: 50, expiresAt: null, createdAt: d("2026-01-01T00:00:00Z") },
    { id: "f", priority: 50, expiresAt: null, createdAt: d("2025-12-01T00:00:00Z") },
    { id: "a", priority: 1, expiresAt: d("2027-01-01T00:00:00Z"), createdAt: d("2026-01-10T00:00:00Z") },
  ];
  t.deepEqual(
    spendOrder(grants).map((x) => x.id),
    ["a", "b", "c", "d", "f", "e", "g"],
  );
});
