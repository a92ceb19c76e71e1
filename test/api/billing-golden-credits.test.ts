/**
 * The golden table for DESIGN §14, written from the contract (credit.proto, credit_service.proto,
 * invoice.proto's credits_applied and amount_due, subscription.proto's minimum_commitment,
 * customer_access_service.proto's credit_balance and available_credit): credit grants and the
 * order they are spent in, expiry, grants restricted to rate codes, paid grants and their
 * invoices, auto top-up, low-balance events, minimum commitments, seat decreases credited to the
 * balance, voids, and the ledger adding up. Driven only through the public API on test clocks, on
 * MariaDB and SQLite; every number is worked out by hand in the comment beside it.
 *
 * Amounts are in cents (USD). The usage plan bills "API calls" at 10 per unit, in arrears, and
 * has no fixed price: a free plan, so no card is on file unless a case puts one there (a hosted
 * checkout), and an invoice with something due stays "open"; an invoice whose amount_due is 0 is
 * "paid" without any charge. Scenarios start on 2026-01-15T00:00:00Z: the periods are
 * Jan 15 → Feb 15 (31 days), Feb 15 → Mar 15 (28 days: Mar 1 is half-way), Mar 15 → Apr 15.
 * An invoice reads [status, total, credits_applied as [grant name, amount], amount_due]; a
 * ledger [entry_type, signed amount]; a grant [name, status, amount, remaining]; billing state
 * [credit_balance, available_credit]. GOLDEN_LOG=1 logs each case's result.
 */
import test from "ava";
import { violatedFields } from "../helpers/clients.js";
import {
  billed,
  checkoutWithCard,
  createGrant,
  credited,
  creditState,
  eventTypes,
  eventually,
  grantState,
  grantStates,
  grants,
  kinds,
  ledger,
  ledgerSums,
  paid,
  promo,
  settings,
} from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { fixedRate, flat, money, patch, sumText, usageRate } from "../helpers/price-bodies.js";
import { CARD_DECLINED, CARD_FAILS_LATER, CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
const JAN_20 = "2026-01-20T00:00:00Z";
const FEB = "2026-02-15T00:00:00Z";
const FEB_20 = "2026-02-20T00:00:00Z";
/** Half-way through Feb 15 → Mar 15 (14 of 28 days left). */
const MAR_1 = "2026-03-01T00:00:00Z";
const MAR = "2026-03-15T00:00:00Z";
const APR = "2026-04-15T00:00:00Z";
/** An hour before the first period ends. */
const BEFORE_FEB = "2026-02-14T23:00:00Z";

/** The usage plan: "API calls" (code api) at `price` per unit of the "usage" event's n. */
async function usagePlan(s: Scenario, price: string | number = 10): Promise<string> {
  const m = await s.metric();
  return s.card({ usage_based_rates: [usageRate(m, flat(price))] });
}

/** Subscribes to the usage plan (free: no card on file); the subscription. */
async function onUsagePlan(s: Scenario, body: Json = {}): Promise<Json> {
  const r = await s.subscribe({ rate_card_id: await usagePlan(s), ...body });
  return r.subscription;
}

/** `n` units of usage at `at`. */
function use(s: Scenario, at: string, n: string): Promise<void> {
  return s.events([[at, n]]);
}

async function hasCard(s: Scenario): Promise<boolean> {
  return (await s.call("GET", `/subjects/${s.subjectId}`)).has_payment_method;
}

type Case = [string, (s: Scenario, t: import("ava").ExecutionContext) => Promise<unknown>, unknown];

const applying: Case[] = [
  [
    "a promotional grant pays part of an invoice; the rest is due",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "promo", 5000);
      await use(s, JAN_20, "800");
      await s.advance(FEB);
      return [await credited(s), await grantStates(s), await ledger(s), await creditState(s)];
    },
    // 800 × 10 = 8,000; the grant pays 5,000 (all of it: depleted); 8,000 − 5,000 = 3,000 due, no card: open.
    [
      [["open", "8000", [["promo", "5000"]], "3000"]],
      [["promo", "depleted", "5000", "0"]],
      [
        ["grant", "5000"],
        ["application", "-5000"],
      ],
      ["0", "0"],
    ],
  ],
  [
    "credits pay all of an invoice: amount_due 0, paid with no card on file",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "promo", 10000);
      await use(s, JAN_20, "300");
      await s.advance(FEB);
      return [await credited(s), await grantStates(s), await hasCard(s), await creditState(s)];
    },
    // 300 × 10 = 3,000, all paid by the grant (10,000 − 3,000 = 7,000 left); nothing due, nothing charged.
    [[["paid", "3000", [["promo", "3000"]], "0"]], [["promo", "active", "10000", "7000"]], false, ["7000", "7000"]],
  ],
  [
    "amount_due 0 is not charged: a card whose charges fail is never tried",
    async (s) => {
      await checkoutWithCard(s, await usagePlan(s), CARD_FAILS_LATER);
      await promo(s, "promo", 5000);
      await use(s, JAN_20, "300");
      await s.advance(FEB);
      await use(s, "2026-02-20T00:00:00Z", "300");
      await s.advance(MAR);
      return credited(s);
    },
    // Feb 15: 300 × 10 = 3,000, all credit: paid though the card fails every charge (none made).
    // Mar 15: 3,000, the last 2,000 of credit, 1,000 due: charged, fails: open.
    [
      ["paid", "3000", [["promo", "3000"]], "0"],
      ["open", "3000", [["promo", "2000"]], "1000"],
    ],
  ],
  [
    "a promotional grant of priority 10 is spent before an older paid grant of priority 50",
    async (s) => {
      await checkoutWithCard(s, await usagePlan(s), CARD_OK);
      await paid(s, "paid", 5000);
      await promo(s, "promo", 2000, { priority: 10 });
      await use(s, JAN_20, "400");
      await s.advance(FEB);
      return [await credited(s), await grantStates(s)];
    },
    // The paid grant's invoice: 5,000 charged to the card. Feb 15: 400 × 10 = 4,000: promo (priority 10)
    // 2,000, then paid (priority 50) 2,000; nothing due. Paid left: 5,000 − 2,000 = 3,000.
    [
      [
        ["paid", "5000", [], "5000"],
        [
          "paid",
          "4000",
          [
            ["promo", "2000"],
            ["paid", "2000"],
          ],
          "0",
        ],
      ],
      [
        ["paid", "active", "5000", "3000"],
        ["promo", "depleted", "2000", "0"],
      ],
    ],
  ],
  [
    "at one priority: the soonest expiry first, then the oldest; a grant that never expires after one that does",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "a-oldest", 1000);
      await s.advance("2026-01-16T00:00:00Z");
      await promo(s, "b-expires-apr", 1000, { expires_at: "2026-04-01T00:00:00Z" });
      await promo(s, "c-expires-mar", 1000, { expires_at: MAR_1 });
      await s.advance("2026-01-17T00:00:00Z");
      await promo(s, "d-newer", 1000);
      await use(s, JAN_20, "350");
      await s.advance(FEB);
      return credited(s);
    },
    // 350 × 10 = 3,500, all priority 50: c (expires Mar 1) 1,000, b (Apr 1) 1,000, then the
    // never-expiring ones oldest first: a 1,000, d 500. Nothing due.
    [
      [
        "paid",
        "3500",
        [
          ["c-expires-mar", "1000"],
          ["b-expires-apr", "1000"],
          ["a-oldest", "1000"],
          ["d-newer", "500"],
        ],
        "0",
      ],
    ],
  ],
  [
    "priority comes before expiry and age",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "old-soon-80", 1000, { priority: 80, expires_at: MAR_1 });
      await s.advance("2026-01-16T00:00:00Z");
      await promo(s, "new-never-20", 1000, { priority: 20 });
      await use(s, JAN_20, "150");
      await s.advance(FEB);
      return credited(s);
    },
    // 150 × 10 = 1,500: priority 20 first (1,000), then priority 80 (500), though it is older and expires sooner.
    [
      [
        "paid",
        "1500",
        [
          ["new-never-20", "1000"],
          ["old-soon-80", "500"],
        ],
        "0",
      ],
    ],
  ],
  [
    "a grant restricted to one rate code pays only that rate's lines",
    async (s) => {
      const calls = await s.metric();
      const stored = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "store");
      const card = await s.card({ usage_based_rates: [usageRate(calls, flat(10)), usageRate(stored, flat(5), { code: "storage", name: "Storage" })] });
      await s.subscribe({ rate_card_id: card });
      await promo(s, "storage-only", 10000, { applies_to_rate_codes: ["storage"] });
      await promo(s, "general", 500, { priority: 60 });
      await use(s, JAN_20, "100");
      await s.events([[JAN_20, "300"]], "store");
      await s.advance(FEB);
      return [await credited(s), await grantStates(s)];
    },
    // API calls 100 × 10 = 1,000; Storage 300 × 5 = 1,500; total 2,500. storage-only (priority 50)
    // pays the Storage line's 1,500 and nothing of API calls; general (priority 60) 500 of the
    // rest; 2,500 − 2,000 = 500 due. storage-only keeps 10,000 − 1,500 = 8,500.
    [
      [
        [
          "open",
          "2500",
          [
            ["storage-only", "1500"],
            ["general", "500"],
          ],
          "500",
        ],
      ],
      [
        ["storage-only", "active", "10000", "8500"],
        ["general", "depleted", "500", "0"],
      ],
    ],
  ],
  [
    "a grant restricted to a rate capped by its maximum pays the rate's net, never the usage above the cap nor other rates with it",
    async (s) => {
      const calls = await s.metric();
      const card = await s.card({ fixed_rates: [fixedRate(flat(1000))], usage_based_rates: [usageRate(calls, flat(10), { max: 1000 })] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
      await promo(s, "api-only", 5000, { applies_to_rate_codes: ["api"] });
      await s.events([[JAN_20, "150"]]);
      await s.advance(FEB);
      return [await credited(s), await grantStates(s)];
    },
    // Feb 15: Seats 1,000 in advance; API calls 150 × 10 = 1,500 and its maximum's line −500 (a cap
    // of 1,000): total 2,000. api-only pays the rate's net 1,000 (not 1,500, whose 500 would pay
    // the seats); 2,000 − 1,000 = 1,000 due, charged. api-only keeps 5,000 − 1,000 = 4,000.
    [
      [
        ["paid", "1000", [], "1000"],
        ["paid", "2000", [["api-only", "1000"]], "1000"],
      ],
      [["api-only", "active", "5000", "4000"]],
    ],
  ],
  [
    "a grant effective later is not spent on an invoice before it",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "later", 5000, { effective_at: FEB_20 });
      await use(s, JAN_20, "100");
      await s.advance(FEB);
      await use(s, "2026-02-21T00:00:00Z", "100");
      await s.advance(MAR);
      return credited(s);
    },
    // Feb 15: 100 × 10 = 1,000, the grant not effective yet: 1,000 due. Mar 15: 1,000, paid by it.
    [
      ["open", "1000", [], "1000"],
      ["paid", "1000", [["later", "1000"]], "0"],
    ],
  ],
  [
    "a draft shows what would be applied; finalizing spends it",
    async (s0) => {
      const s = await Scenario.start(s0.server, JAN, { invoiceGraceSeconds: 3600 });
      await onUsagePlan(s);
      await promo(s, "promo", 5000);
      await use(s, JAN_20, "200");
      await s.advance(FEB);
      const draft = [await credited(s), await grantStates(s)];
      await s.advance("2026-02-15T02:00:00Z");
      return [draft, await credited(s), await grantStates(s)];
    },
    // 200 × 10 = 2,000: the draft shows 2,000 from promo and 0 due, spending nothing yet (5,000
    // left); once final, the grant keeps 3,000.
    [[[["draft", "2000", [["promo", "2000"]], "0"]], [["promo", "active", "5000", "5000"]]], [["paid", "2000", [["promo", "2000"]], "0"]], [["promo", "active", "5000", "3000"]]],
  ],
];

const expiryAndVoid: Case[] = [
  [
    "expiry mid-period: the unspent rest leaves the balance as an expiry entry",
    async (s) => {
      await onUsagePlan(s);
      const id = await promo(s, "promo", 5000, { expires_at: MAR_1 });
      await use(s, JAN_20, "200");
      await s.advance(FEB);
      await use(s, "2026-02-16T00:00:00Z", "100");
      await s.advance(FEB_20);
      const before = await creditState(s);
      await s.advance("2026-03-02T00:00:00Z");
      const after = await creditState(s);
      await s.advance(MAR);
      const g = await s.call("GET", `/credit-grants/${id}`);
      const expiredEvents = (await eventTypes(s, ["credit_grant.expired"])).length;
      return [await credited(s), before, after, await ledger(s), await grantState(s, id), g.expired_at, expiredEvents];
    },
    // Feb 15: 200 × 10 = 2,000 paid by the grant (3,000 left). Feb 20: balance 3,000, available
    // already 0 − 100 × 10 = −1,000: the grant expires Mar 1, before the close on Mar 15 could
    // spend it. Mar 1 the 3,000 expire: balance 0, available −1,000. Mar 15: 1,000 due, no credit.
    [
      [
        ["paid", "2000", [["promo", "2000"]], "0"],
        ["open", "1000", [], "1000"],
      ],
      ["3000", "-1000"],
      ["0", "-1000"],
      [
        ["grant", "5000"],
        ["application", "-2000"],
        ["expiry", "-3000"],
      ],
      ["promo", "expired", "5000", "0"],
      MAR_1,
      1,
    ],
  ],
  [
    "a grant expiring at a period's end still pays that period's invoice; the rest expires then",
    async (s) => {
      await onUsagePlan(s);
      const id = await promo(s, "promo", 5000, { expires_at: FEB });
      await use(s, JAN_20, "300");
      await s.advance(FEB);
      return [await credited(s), await ledger(s), await grantState(s, id), await creditState(s)];
    },
    // Feb 15: the cycle closes first, at the instant the grant expires: 300 × 10 = 3,000, all paid
    // by the grant (it is spendable at its expires_at, not after). Then its other 2,000 expire.
    [
      [["paid", "3000", [["promo", "3000"]], "0"]],
      [
        ["grant", "5000"],
        ["application", "-3000"],
        ["expiry", "-2000"],
      ],
      ["promo", "expired", "5000", "0"],
      ["0", "0"],
    ],
  ],
  [
    "void takes only what is left; what an invoice spent stays spent",
    async (s) => {
      await onUsagePlan(s);
      const id = await promo(s, "promo", 5000);
      await use(s, JAN_20, "200");
      await s.advance(FEB);
      await s.advance(FEB_20);
      const voided = await s.call("POST", `/credit-grants/${id}/void`, {});
      const again = await s.raw("POST", `/credit-grants/${id}/void`, {});
      await use(s, "2026-02-25T00:00:00Z", "100");
      await s.advance(MAR);
      return [[voided.status, voided.amount.value, voided.remaining_amount.value, voided.voided_at], [again.status, again.body.code], await credited(s), await ledger(s), await creditState(s)];
    },
    // Feb 15: 2,000 paid by the grant; Feb 20 the other 3,000 are voided. Mar 15: 100 × 10 = 1,000 due.
    [
      ["voided", "5000", "0", FEB_20],
      [400, "failed_precondition"],
      [
        ["paid", "2000", [["promo", "2000"]], "0"],
        ["open", "1000", [], "1000"],
      ],
      [
        ["grant", "5000"],
        ["application", "-2000"],
        ["void", "-3000"],
      ],
      ["0", "0"],
    ],
  ],
  [
    "the ledger adds up: granted = applied + expired + voided + balance",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "a", 3000, { expires_at: MAR_1 });
      await promo(s, "b", 4000);
      const c = await promo(s, "c", 2000, { priority: 90 });
      await use(s, JAN_20, "250");
      await s.advance(FEB);
      await s.advance("2026-03-02T00:00:00Z");
      await s.call("POST", `/credit-grants/${c}/void`, {});
      await use(s, "2026-03-05T00:00:00Z", "100");
      await s.advance(MAR);
      return [await credited(s), ledgerSums(await ledger(s)), await creditState(s)];
    },
    // Feb 15: 250 × 10 = 2,500 from a (soonest expiry; 500 left). Mar 1: a's 500 expire. Mar 2:
    // c's 2,000 voided. Mar 15: 100 × 10 = 1,000 from b (3,000 left).
    // Granted 3,000 + 4,000 + 2,000 = 9,000 = applied 3,500 + expired 500 + voided 2,000 + balance 3,000.
    [
      [
        ["paid", "2500", [["a", "2500"]], "0"],
        ["paid", "1000", [["b", "1000"]], "0"],
      ],
      { grant: "9000", application: "-3500", expiry: "-500", void: "-2000", balance: "3000" },
      ["3000", "3000"],
    ],
  ],
];

const paidGrants: Case[] = [
  [
    "a paid grant with a card on file: a credit_purchase invoice charged at once, the grant active",
    async (s) => {
      await checkoutWithCard(s, await usagePlan(s), CARD_OK);
      const r = await paid(s, "bought", 2500);
      const g = await s.call("GET", `/credit-grants/${r.credit_grant.id}`);
      const [inv] = await billed(s);
      return [
        r.checkout_url ?? null,
        [g.category, g.status, g.remaining_amount.value],
        g.invoice_id === inv.id,
        [inv.status, inv.total_amount.value, kinds(inv), inv.amount_due.value],
        await ledger(s),
        await creditState(s),
      ];
    },
    // One invoice line of kind credit_purchase for 2,500, paid by the card; the grant then holds 2,500.
    [null, ["paid", "active", "2500"], true, ["paid", "2500", [["credit_purchase", "2500"]], "2500"], [["grant", "2500"]], ["2500", "2500"]],
  ],
  [
    "a paid grant without a card: a checkout, and the grant is active once it is paid",
    async (s) => {
      const r = await paid(s, "bought", 3000);
      const before = [r.credit_grant.status, typeof r.checkout_url, await creditState(s), await ledger(s)];
      const pay = await s.payCheckout(r.checkout_url, CARD_OK);
      const [inv] = await billed(s);
      return [before, pay.status, await grantState(s, r.credit_grant.id), [inv.status, kinds(inv)], await hasCard(s), await creditState(s)];
    },
    // Pending (nothing in the balance) until the checkout's 3,000 is paid; then 3,000 to spend.
    [["pending_payment", "string", ["0", "0"], []], 303, ["bought", "active", "3000", "3000"], ["paid", [["credit_purchase", "3000"]]], true, ["3000", "3000"]],
  ],
  [
    "a paid grant whose charge fails grants nothing",
    async (s) => {
      await checkoutWithCard(s, await usagePlan(s), CARD_FAILS_LATER);
      const r = await paid(s, "bought", 3000);
      const g = await s.call("GET", `/credit-grants/${r.credit_grant.id}`);
      await use(s, JAN_20, "100");
      await s.advance(FEB);
      const usage = (await credited(s)).at(-1);
      return [g.status, await creditState(s), await ledger(s), usage];
    },
    // The card on file declines the 3,000: the grant failed, nothing in the ledger; Feb 15's
    // 100 × 10 = 1,000 gets no credit (its charge fails too: open).
    ["failed", ["0", "0"], [], ["open", "1000", [], "1000"]],
  ],
  [
    "a paid grant declined at its checkout grants nothing",
    async (s) => {
      const r = await paid(s, "bought", 3000);
      const pay = await s.payCheckout(r.checkout_url, CARD_DECLINED);
      const g = await s.call("GET", `/credit-grants/${r.credit_grant.id}`);
      return [pay.status === 303, ["pending_payment", "failed"].includes(g.status), await creditState(s), await ledger(s), await hasCard(s)];
    },
    // The declined card is not saved and grants nothing: balance 0, no ledger entry.
    [false, true, ["0", "0"], [], false],
  ],
];

const realTime: Case[] = [
  [
    "billing state before a period end: balance less usage so far is what the invoice then leaves",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "promo", 10000);
      await s.advance(JAN_20);
      await use(s, JAN_20, "350");
      await s.advance(BEFORE_FEB);
      const before = await creditState(s);
      await s.advance(FEB);
      return [before, await credited(s), await creditState(s)];
    },
    // Before: balance 10,000, available 10,000 − 350 × 10 = 6,500. Feb 15 applies 3,500 (= 10,000 −
    // 6,500), nothing due; then balance 6,500 and, with no usage in the new period, available 6,500.
    [["10000", "6500"], [["paid", "3500", [["promo", "3500"]], "0"]], ["6500", "6500"]],
  ],
  [
    "billing state overdrawn: available credit goes negative; the invoice applies the balance",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "promo", 2000);
      await s.advance(JAN_20);
      await use(s, JAN_20, "350");
      await s.advance(BEFORE_FEB);
      const before = await creditState(s);
      await s.advance(FEB);
      return [before, await credited(s), await creditState(s)];
    },
    // Before: 2,000 − 3,500 = −1,500 available. Feb 15: 3,500, 2,000 applied (= the balance), 1,500 due.
    [["2000", "-1500"], [["open", "3500", [["promo", "2000"]], "1500"]], ["0", "0"]],
  ],
  [
    "credit.balance_low and credit.depleted fire once per crossing",
    async (s) => {
      await onUsagePlan(s);
      await promo(s, "promo", 5000);
      await settings(s, { low_balance_threshold: money(3000) });
      await s.advance(JAN_20);
      for (const n of ["100", "150", "100", "200", "100"]) await use(s, JAN_20, n);
      const types = await eventually(
        () => eventTypes(s, ["credit.balance_low", "credit.depleted"]),
        (t) => t.length >= 2,
      );
      return [[...types].sort(), await creditState(s)];
    },
    // Available: 5,000 → 4,000 → 2,500 (below 3,000: balance_low) → 1,500 → −500 (depleted) → −1,500.
    // Each fires once (in no promised order: usage close together is evaluated at once).
    [
      ["credit.balance_low", "credit.depleted"],
      ["5000", "-1500"],
    ],
  ],
  [
    "auto top-up fires once when a burst crosses the threshold",
    async (s) => {
      await checkoutWithCard(s, await usagePlan(s), CARD_OK);
      await promo(s, "promo", 5000);
      const set = await settings(s, { auto_top_up: { threshold: money(2000), amount: money(10000) } });
      await s.advance(JAN_20);
      await Promise.all(["100", "100", "100", "100", "100"].map((n) => use(s, JAN_20, n)));
      const bought = await eventually(
        () => grants(s),
        (g) => g.length >= 2 && g.every((x) => x.status === "active"),
      );
      await use(s, JAN_20, "100");
      await s.advance("2026-01-21T00:00:00Z");
      const state = await creditState(s);
      await s.advance(FEB);
      const all = await grants(s);
      return [[set.auto_top_up.threshold.value, set.auto_top_up.amount.value], bought.map((g) => [g.category, g.status, g.amount.value]), state, all.length, await credited(s)];
    },
    // 5 × 100 × 10 = 5,000 used: available 5,000 → 0, below 2,000 once: one paid grant of 10,000,
    // charged to the card. Then 100 × 10 more: balance 15,000, available 15,000 − 6,000 = 9,000
    // (above the threshold: no second top-up). Feb 15: 6,000 from promo 5,000 (older) then the
    // top-up 1,000; nothing due. Available then 9,000: still no new top-up.
    [
      ["2000", "10000"],
      [
        ["promotional", "active", "5000"],
        ["paid", "active", "10000"],
      ],
      ["15000", "9000"],
      2,
      [
        ["paid", "10000", [], "10000"],
        [
          "paid",
          "6000",
          [
            ["promo", "5000"],
            ["paid", "1000"],
          ],
          "0",
        ],
      ],
    ],
  ],
  [
    "two currencies are kept apart",
    async (s) => {
      await onUsagePlan(s);
      const eu = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "eu");
      await s.subscribe({ rate_card_id: await s.card({ name: "EU", usage_based_rates: [usageRate(eu, flat(20, "EUR"))] }) });
      await promo(s, "usd", 5000);
      await promo(s, "eur", 1000, {}, "EUR");
      await use(s, JAN_20, "200");
      await s.events([[JAN_20, "100"]], "eu");
      await s.advance(FEB);
      const byCurrency = (await credited(s)).map((c, i) => [c, i]);
      const invoices = await billed(s);
      const rows = byCurrency.map(([c, i]) => [invoices[i as number].total_amount.currency_code, c]).sort((a, b) => String(a[0]).localeCompare(String(b[0])));
      return [rows, await creditState(s, "USD"), await creditState(s, "EUR"), await ledger(s, "EUR")];
    },
    // USD: 200 × 10 = 2,000 from the USD grant (3,000 left). EUR: 100 × 20 = 2,000; the EUR grant
    // pays 1,000, 1,000 due; the USD balance is never spent on it.
    [
      [
        ["EUR", ["open", "2000", [["eur", "1000"]], "1000"]],
        ["USD", ["paid", "2000", [["usd", "2000"]], "0"]],
      ],
      ["3000", "3000"],
      ["0", "0"],
      [
        ["grant", "1000"],
        ["application", "-1000"],
      ],
    ],
  ],
];

const commitments: Case[] = [
  [
    "commitment true-up without credits: the difference as its own line",
    async (s) => {
      const sub = await onUsagePlan(s, { minimum_commitment: money(5000) });
      await use(s, JAN_20, "200");
      await s.advance(FEB);
      const [inv] = await billed(s);
      return [sub.minimum_commitment, kinds(inv), [inv.status, inv.total_amount.value, inv.credits_applied, inv.amount_due.value]];
    },
    // 200 × 10 = 2,000 below 5,000: a commitment_true_up of 3,000; total 5,000, all due.
    [
      money("5000"),
      [
        ["usage", "2000"],
        ["commitment_true_up", "3000"],
      ],
      ["open", "5000", [], "5000"],
    ],
  ],
  [
    "commitment true-up with credits: credits pay the true-up too but do not count toward the commitment",
    async (s) => {
      await onUsagePlan(s, { minimum_commitment: money(5000) });
      await promo(s, "promo", 4000);
      await use(s, JAN_20, "200");
      await s.advance(FEB);
      const [inv] = await billed(s);
      return [kinds(inv), await credited(s)];
    },
    // Charges before credits 2,000: true-up 5,000 − 2,000 = 3,000; total 5,000; 4,000 applied; 1,000 due.
    [
      [
        ["usage", "2000"],
        ["commitment_true_up", "3000"],
      ],
      [["open", "5000", [["promo", "4000"]], "1000"]],
    ],
  ],
  [
    "charges above the commitment: no true-up; a period with no usage: the whole commitment",
    async (s) => {
      await onUsagePlan(s, { minimum_commitment: money(5000) });
      await use(s, JAN_20, "600");
      await s.advance(MAR);
      return (await billed(s)).map((i) => [i.total_amount.value, kinds(i)]);
    },
    // Jan 15 → Feb 15: 600 × 10 = 6,000 ≥ 5,000: no true-up. Feb 15 → Mar 15: nothing used: 5,000.
    [
      ["6000", [["usage", "6000"]]],
      ["5000", [["commitment_true_up", "5000"]]],
    ],
  ],
  [
    "a commitment set or removed mid-period applies from the next period",
    async (s) => {
      const sub = await onUsagePlan(s);
      await s.advance(JAN_20);
      await patch(s, sub.id, { minimum_commitment: money(5000) });
      await use(s, JAN_20, "200");
      await s.advance(FEB);
      await use(s, FEB_20, "100");
      await s.advance(MAR);
      await s.advance("2026-03-20T00:00:00Z");
      await patch(s, sub.id, { minimum_commitment: money(0) });
      await s.advance("2026-05-15T00:00:00Z");
      return (await billed(s)).map((i) => [i.total_amount.value, kinds(i)]);
    },
    // Jan 15 → Feb 15 (set Jan 20, not yet in effect): 200 × 10 = 2,000, no true-up. Feb 15 → Mar 15:
    // 100 × 10 = 1,000 + true-up 4,000. Mar 15 → Apr 15 (removed Mar 20, still in effect): nothing
    // used, true-up 5,000. Apr 15 → May 15: no commitment, nothing used: no line, no invoice shown.
    [
      ["2000", [["usage", "2000"]]],
      [
        "5000",
        [
          ["usage", "1000"],
          ["commitment_true_up", "4000"],
        ],
      ],
      ["5000", [["commitment_true_up", "5000"]]],
    ],
  ],
  [
    "a period's fixed charge in advance counts toward its commitment",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ fixed_rates: [fixedRate(flat(1000), "platform", "Platform")], usage_based_rates: [usageRate(m, flat(10))] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { platform: 1 }, minimum_commitment: money(5000) });
      await use(s, JAN_20, "200");
      await s.advance(FEB);
      return (await billed(s)).map((i) => [i.status, i.total_amount.value, kinds(i).sort()]);
    },
    // Jan 15: platform 1,000 in advance. Jan 15 → Feb 15 charges: 1,000 + 200 × 10 = 3,000: true-up 2,000.
    // Feb 15: usage 2,000 + true-up 2,000 + next period's platform 1,000 = 5,000.
    [
      ["paid", "1000", [["fixed", "1000"]]],
      [
        "paid",
        "5000",
        [
          ["commitment_true_up", "2000"],
          ["fixed", "1000"],
          ["usage", "2000"],
        ],
      ],
    ],
  ],
];

const seatsAndInput: Case[] = [
  [
    "a seat decrease is credited to the balance and spent on the next invoices",
    async (s) => {
      await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [fixedRate(flat(1000))] }), fixed_rate_quantities: { seats: 10 } });
      await s.advance(MAR_1);
      await patch(s, (await s.subscriptions())[0].id, { fixed_rate_quantities: { seats: 1 } });
      await s.advance(APR);
      const invoices = await billed(s);
      const prorationLines = invoices.flatMap((i) => (i.line_items as Json[]).filter((l) => l.kind === "proration").map((l) => String(l.amount.value)));
      const entries = await ledger(s);
      const prorationEntries = entries.filter(([t]) => t === "proration").map(([, v]) => v);
      const last = (await credited(s)).at(-1);
      return [
        invoices.map((i) => [i.status, i.amount_due.value]),
        sumText([...prorationEntries, ...prorationLines.map((v) => (v.startsWith("-") ? v.slice(1) : `-${v}`))]),
        prorationEntries.length > 0,
        last?.[2].map(([, v]) => v),
        ledgerSums(entries).balance,
        await creditState(s),
        await credited(s),
        entries,
      ];
    },
    // Mar 1: 9 seats × 1,000 × 14/28 = 4,500 credited to the balance. Mar 15: 1 × 1,000, paid by
    // the credit, nothing due; Apr 15 the same. Left: 4,500 − 1,000 − 1,000 = 2,500. No credit is
    // counted twice: proration entries plus the credit any negative proration line gave make 4,500.
    [
      [
        ["paid", "10000"],
        ["paid", "10000"],
        ["paid", "0"],
        ["paid", "0"],
      ],
      "4500",
      true,
      ["1000"],
      "2500",
      ["2500", "2500"],
      // As DESIGN §13 has it (a credit never becomes a negative invoice: it goes to the balance),
      // the 4,500 is one proration entry at the change, its grant spent like any credit.
      [
        ["paid", "10000", [], "10000"],
        ["paid", "10000", [], "10000"],
        ["paid", "1000", [["promotional", "1000"]], "0"],
        ["paid", "1000", [["promotional", "1000"]], "0"],
      ],
      [
        ["proration", "4500"],
        ["application", "-1000"],
        ["application", "-1000"],
      ],
    ],
  ],
  [
    "credit settings: defaults, then what was set, per currency",
    async (s) => {
      const path = `/subjects/${s.subjectId}/credit-settings?currency_code=`;
      const before = await s.call("GET", `${path}USD`);
      await settings(s, { low_balance_threshold: money(1000), auto_top_up: { threshold: money(500), amount: money(5000) } });
      const after = await s.call("GET", `${path}USD`);
      const eur = await s.call("GET", `${path}EUR`);
      const strip = (x: Json) => ({ ...x, subject_id: x.subject_id === s.subjectId });
      return [strip(before), strip(after), strip(eur)];
    },
    // Never set: no threshold, no top-up. The top-up's priority defaults to 50. EUR stays unset.
    [
      { subject_id: true, currency_code: "USD", low_balance_threshold: null, auto_top_up: null },
      { subject_id: true, currency_code: "USD", low_balance_threshold: money("1000"), auto_top_up: { threshold: money("500"), amount: money("5000"), priority: 50 } },
      { subject_id: true, currency_code: "EUR", low_balance_threshold: null, auto_top_up: null },
    ],
  ],
  [
    "grants listed by status",
    async (s) => {
      await onUsagePlan(s);
      const spent = await promo(s, "spent", 1000);
      const voided = await promo(s, "voided", 1000, { priority: 90 });
      const kept = await promo(s, "kept", 3000, { priority: 80 });
      await s.call("POST", `/credit-grants/${voided}/void`, {});
      await use(s, JAN_20, "150");
      await s.advance(FEB);
      const ids = async (status: string) => (await grants(s, status)).map((g) => g.id);
      return [(await ids("active")).length, (await ids("depleted"))[0] === spent, (await ids("voided"))[0] === voided, (await ids("active"))[0] === kept, await grantStates(s)];
    },
    // 150 × 10 = 1,500: spent (priority 50) 1,000, then kept (80) 500; voided (90) was voided before.
    [
      1,
      true,
      true,
      true,
      [
        ["spent", "depleted", "1000", "0"],
        ["voided", "voided", "1000", "0"],
        ["kept", "active", "3000", "2500"],
      ],
    ],
  ],
  [
    "bad grants are refused naming the field, and nothing is granted",
    async (s) => {
      const post = (body: Json) => s.raw("POST", "/credit-grants", { subject_id: s.subjectId, amount: money(1000), ...body });
      const results = [
        await post({ priority: 0 }),
        await post({ priority: 101 }),
        await post({ category: "gift" }),
        await post({ effective_at: FEB, expires_at: JAN_20 }),
        await post({ applies_to_rate_codes: ["api", "api"] }),
        await post({ amount: money(1000, "XYZ") }),
      ];
      const missing = await s.raw("POST", "/credit-grants", { subject_id: "subj_nobody", amount: money(1000) });
      return [results.map((r) => [r.status, violatedFields(r.body)]), missing.status, await grants(s), await ledger(s)];
    },
    [
      [
        [400, ["priority"]],
        [400, ["priority"]],
        [400, ["category"]],
        [400, ["expires_at"]],
        [400, ["applies_to_rate_codes[1]"]],
        [400, ["amount.currency_code"]],
      ],
      404,
      [],
      [],
    ],
  ],
  [
    "a grant reads back as created",
    async (s) => {
      const r = await createGrant(s, "promo", "1234", { priority: 7, expires_at: APR, applies_to_rate_codes: ["api"] });
      const g = await s.call("GET", `/credit-grants/${r.credit_grant.id}`);
      const { id, created_at, subject_id, ...rest } = g;
      return [/^cg_[0-9A-Za-z]{22}$/.test(id), subject_id === s.subjectId, created_at, rest, r.checkout_url ?? null];
    },
    // A promotional grant (the default category) is active at once, effective now (the clock's Jan 15).
    [
      true,
      true,
      JAN,
      {
        amount: money("1234"),
        remaining_amount: money("1234"),
        category: "promotional",
        priority: 7,
        effective_at: JAN,
        expires_at: APR,
        applies_to_rate_codes: ["api"],
        metadata: { name: "promo" },
        status: "active",
        invoice_id: null,
        voided_at: null,
        expired_at: null,
      },
      null,
    ],
  ],
];

const cases: Case[] = [...applying, ...expiryAndVoid, ...paidGrants, ...realTime, ...commitments, ...seatsAndInput];

for (const store of STORES) {
  const server = useServer(store);
  for (const [title, run, expected] of cases) {
    test(`${store}: ${title}`, async (t) => {
      const s = await Scenario.start(server, JAN);
      const got = await run(s, t);
      if (process.env.GOLDEN_LOG) t.log(JSON.stringify(got));
      t.deepEqual(got, expected);
    });
  }
}
