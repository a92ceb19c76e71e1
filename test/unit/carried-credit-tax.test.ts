/**
 * A carried proration credit's tax (DESIGN §13), in the pure parts: takeCredits keeps the tax of
 * a credit it carries whole and none of one it splits (withCredits taxes what it carries on the
 * invoice it carries it from), and grantProrationCredits grants the pre-tax amount plus that tax,
 * an entry carried before the tax was recorded (no `tax`) at its amount as before. Amounts in cents.
 */
import test from "ava";
import { dec, formatDecimal } from "../../src/billing/money.js";
import { grantProrationCredits } from "../../src/billing/subscriptions/credit-application.js";
import type { BillingTx } from "../../src/billing/subscriptions/ports.js";
import { takeCredits } from "../../src/billing/subscriptions/proration.js";
import type { Subscription } from "../../src/billing/subscriptions/types.js";

test("takeCredits: a credit carried whole keeps its tax; the rest of a split one has none until withCredits taxes it", (t) => {
  const credits = [
    { description: "resume", amount: "-1774", tax: "-177" },
    { description: "later", amount: "-600", tax: "-60" },
  ];
  // room 1,000: 1,000 of the 1,774 as a line (taxed where it lands), 774 left without a tax; 600 carried as it was.
  const out = takeCredits(credits, dec(1000), "USD");
  t.deepEqual(
    out.lines.map((l) => formatDecimal(l.amount)),
    ["-1000"],
  );
  t.deepEqual(out.carried, [
    { description: "resume", amount: "-774", whole: "-1774" },
    { description: "later", amount: "-600", tax: "-60" },
  ]);
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
