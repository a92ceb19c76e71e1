/**
 * A carried proration credit's tax (DESIGN §13), in the pure parts: takeCredits keeps the tax of
 * a credit it carries whole and gives the rest of one it splits its share of it (never worked out
 * again from the invoice it is carried from), and grantProrationCredits grants the pre-tax amount
 * plus that tax, an entry carried before the tax was recorded (no `tax`) at its amount as before.
 * Amounts in cents.
 */
import test from "ava";
import { dec, formatDecimal } from "../../src/billing/money.js";
import { grantProrationCredits } from "../../src/billing/subscriptions/credit-application.js";
import type { BillingTx } from "../../src/billing/subscriptions/ports.js";
import { takeCredits } from "../../src/billing/subscriptions/proration.js";
import type { Subscription } from "../../src/billing/subscriptions/types.js";

test("takeCredits: a credit carried whole keeps its tax; the rest of a split one its share (−177 × 774 / 1,774 = −77.2 → −77)", (t) => {
  const credits = [
    { description: "resume", amount: "-1774", tax: "-177" },
    { description: "later", amount: "-600", tax: "-60" },
  ];
  // room 1,000: 1,000 of the 1,774 as a line (taxed where it lands), 774 left with −77; 600 carried as it was.
  const out = takeCredits(credits, dec(1000), "USD");
  t.deepEqual(
    out.lines.map((l) => formatDecimal(l.amount)),
    ["-1000"],
  );
  t.deepEqual(out.carried, [
    { description: "resume", amount: "-774", whole: "-1774", tax: "-77" },
    { description: "later", amount: "-600", tax: "-60" },
  ]);
});

test('takeCredits: a split one\'s rest, split again, keeps a share of what it had (−77 × 274 / 774 = −27.3 → −27); no tax ("0", or an old entry without one) stays none', (t) => {
  const out = takeCredits(
    [
      { description: "resume", amount: "-774", whole: "-1774", tax: "-77" },
      { description: "exempt", amount: "-1000", tax: "0" },
      { description: "old row", amount: "-1000" },
    ],
    dec(500),
    "USD",
  );
  t.deepEqual(out.carried, [
    { description: "resume", amount: "-274", whole: "-1774", tax: "-27" },
    { description: "exempt", amount: "-1000", tax: "0" },
    { description: "old row", amount: "-1000" },
  ]);
  const split = takeCredits(
    [
      { description: "exempt", amount: "-1000", tax: "0" },
      { description: "old row", amount: "-1000" },
    ],
    dec(1500),
    "USD",
  );
  t.deepEqual(split.carried, [{ description: "old row", amount: "-500", whole: "-1000" }]);
  t.deepEqual(takeCredits([{ description: "exempt", amount: "-1000", tax: "0" }], dec(400), "USD").carried, [{ description: "exempt", amount: "-600", whole: "-1000", tax: "0" }]);
});

test("grantProrationCredits: pre-tax amount + its tax (1,774 + 177 = 1,951); an entry stored without a tax at its amount (1,774)", async (t) => {
  const granted: [string, string][] = [];
  const tx = {
    credits: {
      insertGrant: (g: { amount: string }, e: { description: string }) => {
        granted.push([e.description, g.amount]);
        return Promise.resolve();
      },
    },
    emit: () => Promise.resolve(),
  } as unknown as BillingTx;
  const s = { id: "sub_1", environmentId: "env_1", subjectId: "subj_1" } as Subscription;
  const left = await grantProrationCredits(
    tx,
    s,
    "USD",
    [
      { description: "taxed", amount: "-1774", tax: "-177" },
      { description: "old row", amount: "-1774" },
    ],
    new Date("2026-03-01T00:00:00Z"),
  );
  t.deepEqual(left, []);
  t.deepEqual(granted, [
    ["taxed, incl. tax: USD 1.77", "1951"],
    ["old row", "1774"],
  ]);
});
