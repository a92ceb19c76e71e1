/** Billing state's credit fields (credits/available.ts): per currency, the balance and the balance less the usage so far. */
import test from "ava";
import { creditFields } from "../../src/billing/credits/available.js";
import { dec } from "../../src/billing/money.js";

const cases: [string, [string, string][], [string, string][], [string, string, string][]][] = [
  ["nothing: no currency", [], [], []],
  ["credit, no usage", [["USD", "5000"]], [], [["USD", "5000", "5000"]]],
  ["usage, never any credit: no currency (it pays in arrears; an app must not stop it at zero)", [], [["USD", "1234.5"]], []],
  ["usage, credit spent to 0: available goes negative", [["USD", "0"]], [["USD", "1234.5"]], [["USD", "0", "-1234.5"]]],
  ["balance less usage, exact decimals", [["USD", "5000"]], [["USD", "0.000000000001"]], [["USD", "5000", "4999.999999999999"]]],
  ["overdrawn", [["USD", "2000"]], [["USD", "3500"]], [["USD", "2000", "-1500"]]],
  [
    "currencies apart, sorted by code; usage in a currency without credit left out",
    [
      ["USD", "100"],
      ["EUR", "50"],
    ],
    [
      ["JPY", "7"],
      ["EUR", "20"],
    ],
    [
      ["EUR", "50", "30"],
      ["USD", "100", "100"],
    ],
  ],
];

for (const [name, balances, cost, expected] of cases) {
  test(name, (t) => {
    const got = creditFields(new Map(balances), new Map(cost.map(([c, v]) => [c, dec(v)])));
    t.deepEqual(
      got.balance.map((b, i) => [b.currencyCode, b.value, got.available[i]?.value]),
      expected,
    );
    t.deepEqual(
      got.available.map((a) => a.currencyCode),
      got.balance.map((b) => b.currencyCode),
    );
  });
}
