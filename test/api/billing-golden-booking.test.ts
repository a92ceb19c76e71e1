/**
 * The golden table for DESIGN §15 (invoices finance can book), written from the contract
 * (coupon*.proto, tax_rate*.proto, billing_details.proto, credit_note*.proto, invoice.proto's
 * booked fields, invoice_service.proto's invoice settings): coupons of each duration, percent
 * and amount, on the whole invoice or on one rate; exclusive, inclusive and several tax rates,
 * rates of another country, exempt and reverse-charge buyers; discount then tax then credits;
 * credit notes refunding, crediting the balance and reducing what is due, whole, in part or per
 * line; rounding in USD, JPY and KWD; invoice and credit note numbers; the other paths that make
 * an invoice open (a checkout, a seat increase's proration, a credit purchase, late usage's
 * adjustment, a draft's grace period) and the buyer read at finalization. Driven only through the public API (REST) on test
 * clocks, on MariaDB and SQLite; every number is worked out by hand in the comment beside it.
 *
 * Amounts are in the currency's smallest unit (cents for USD, yen for JPY, fils for KWD). The
 * order (DESIGN §15): line amounts → discounts (each coupon in order on what earlier ones left,
 * a percent rounded half-up, an amount capped; split over its lines in proportion) → subtotal →
 * tax per line on the discounted amount (exclusive p: + amount × p / 100; inclusive: amount ×
 * p / (100 + Σp), inside) → total → credits (§14) → amount_due; each step rounded half-up.
 * The API plan bills "API calls" at 10 per unit, in arrears, and has no fixed price: no card is
 * on file unless a case puts one there (a hosted checkout), so an invoice with something due
 * stays "open". Scenarios start on 2026-01-15T00:00:00Z: invoices on Feb 15, Mar 15, Apr 15.
 * An invoice reads as booking-bodies.ts's Booked (want() fills in the plain values: no discount,
 * no tax, no note, no credit, amount_due = total, USD, open). GOLDEN_LOG=1 logs each result.
 */
import test from "ava";
import {
  amountOff,
  apiPlan,
  type Booked,
  billed,
  booked,
  bookedOf,
  buyer,
  coupon,
  creditNote,
  discount,
  GERMAN_BUYER,
  noteOf,
  percentOff,
  plain,
  subscribe,
  taxRate,
  twoRatePlan,
  use,
  want,
} from "../helpers/booking-bodies.js";
import { reasonOf, violatedFields } from "../helpers/clients.js";
import { checkoutWithCard, ledger, paid, promo } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { fixedRate, flat, usageRate } from "../helpers/price-bodies.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
const JAN_20 = "2026-01-20T00:00:00Z";
const FEB = "2026-02-15T00:00:00Z";
const FEB_20 = "2026-02-20T00:00:00Z";
const MAR = "2026-03-15T00:00:00Z";
const MAR_20 = "2026-03-20T00:00:00Z";
const APR = "2026-04-15T00:00:00Z";

const REVERSE_NOTE = "Reverse charge: VAT to be accounted for by the recipient (Article 196, Council Directive 2006/112/EC).";

/** The discounts of a subscription as [status, invoices_discounted]. */
async function discountStates(s: Scenario, subscriptionId: string): Promise<[string, number][]> {
  const r = await s.call("GET", `/discounts?subscription_id=${subscriptionId}`);
  return (r.discounts as Json[]).map((d) => [d.status, d.invoices_discounted]);
}

/** Usage of `units` in each of the first `cycles` periods (Jan 20, Feb 20, Mar 20), then the clock at the end of them. */
async function cycles(s: Scenario, units: string[]): Promise<void> {
  const at = [JAN_20, FEB_20, MAR_20];
  const ends = [FEB, MAR, APR];
  for (const [k, n] of units.entries()) {
    await use(s, at[k] as string, n);
    await s.advance(ends[k] as string);
  }
}

/** The expected invoice of one API calls line of `amount` taxed by one exclusive rate [name, percent]; `more` sets the other fields. */
function taxedApi(number: string, [name, percent]: [string, string], amount: string, tax: string, total: string, more: Partial<Booked> = {}): Booked {
  return want({
    number,
    lines: [["API calls", amount, [], [[name, amount, tax]]]],
    subtotal: amount,
    total_tax: tax,
    tax_amounts: [[name, percent, false, amount, tax]],
    total,
    ...more,
  });
}

/** A subscription to card A (VAT 20%) with 1,000 units on Jan 20, changed on Jan 25 (prorated) to card B (GST 5%); its ID. */
async function changedToGst(s: Scenario): Promise<string> {
  const a = await apiPlan(s, { taxes: [await taxRate(s, "VAT", "20")] });
  const b = await apiPlan(s, { taxes: [await taxRate(s, "GST", "5")] });
  const sub = await subscribe(s, a);
  await use(s, JAN_20, "1000");
  await s.advance("2026-01-25T00:00:00Z");
  await s.call("POST", `/subscriptions/${sub}/change-rate-card`, { rate_card_id: b, upgrade_behavior: "prorate" });
  return sub;
}

/** The same environment and clock, another subject. */
async function another(s: Scenario, name: string): Promise<Scenario> {
  const other = new Scenario(s.server);
  other.key = s.key;
  other.clockId = s.clockId;
  other.subjectId = (await s.call("POST", "/subjects", { name, test_clock_id: s.clockId })).id;
  return other;
}

type Case = [string, (s: Scenario, t: import("ava").ExecutionContext) => Promise<unknown>, unknown];

const coupons: Case[] = [
  [
    "percent coupon once (coupon_id on create): the first invoice only",
    async (s) => {
      const c = await coupon(s, "Launch 20%", percentOff("20", "once"));
      const sub = await subscribe(s, await apiPlan(s), { coupon_id: c });
      await cycles(s, ["1000", "1000"]);
      return [await booked(s), await discountStates(s, sub)];
    },
    // Feb 15: 1,000 × 10 = 10,000; 20% = 2,000; subtotal 8,000. Mar 15: 10,000, no discount (used up: ended after 1).
    [
      [
        want({ number: "INV-000001", lines: [["API calls", "10000", [["Launch 20%", "2000"]], []]], subtotal: "8000", total_discount: "2000", discounts: [["Launch 20%", "2000"]], total: "8000" }),
        want({ number: "INV-000002", lines: [plain("API calls", "10000")], subtotal: "10000", total: "10000" }),
      ],
      [["ended", 1]],
    ],
  ],
  [
    "percent coupon repeating 2 months: two invoices, not the third",
    async (s) => {
      const sub = await subscribe(s, await apiPlan(s));
      await s.advance(JAN_20);
      await discount(s, sub, await coupon(s, "Two months 10%", percentOff("10", "repeating", 2)));
      await cycles(s, ["1000", "1000", "1000"]);
      return [await booked(s), await discountStates(s, sub)];
    },
    // Applied Jan 20: it discounts invoices finalized until Mar 20. Feb 15 and Mar 15: 10% of 10,000 = 1,000,
    // subtotal 9,000. Apr 15: 10,000 (ended after 2).
    [
      [
        want({
          number: "INV-000001",
          lines: [["API calls", "10000", [["Two months 10%", "1000"]], []]],
          subtotal: "9000",
          total_discount: "1000",
          discounts: [["Two months 10%", "1000"]],
          total: "9000",
        }),
        want({
          number: "INV-000002",
          lines: [["API calls", "10000", [["Two months 10%", "1000"]], []]],
          subtotal: "9000",
          total_discount: "1000",
          discounts: [["Two months 10%", "1000"]],
          total: "9000",
        }),
        want({ number: "INV-000003", lines: [plain("API calls", "10000")], subtotal: "10000", total: "10000" }),
      ],
      [["ended", 2]],
    ],
  ],
  [
    "percent coupon forever: every cycle, rounded half-up each time",
    async (s) => {
      const sub = await subscribe(s, await apiPlan(s), { coupon_id: await coupon(s, "Quarter off", percentOff("25")) });
      await cycles(s, ["1000", "400", "333"]);
      return [await booked(s), await discountStates(s, sub)];
    },
    // Feb: 10,000 × 25% = 2,500 → 7,500. Mar: 400 × 10 = 4,000 × 25% = 1,000 → 3,000.
    // Apr: 333 × 10 = 3,330 × 25% = 832.5 → 833 (half-up) → 2,497. Still active after 3.
    [
      [
        want({ number: "INV-000001", lines: [["API calls", "10000", [["Quarter off", "2500"]], []]], subtotal: "7500", total_discount: "2500", discounts: [["Quarter off", "2500"]], total: "7500" }),
        want({ number: "INV-000002", lines: [["API calls", "4000", [["Quarter off", "1000"]], []]], subtotal: "3000", total_discount: "1000", discounts: [["Quarter off", "1000"]], total: "3000" }),
        want({ number: "INV-000003", lines: [["API calls", "3330", [["Quarter off", "833"]], []]], subtotal: "2497", total_discount: "833", discounts: [["Quarter off", "833"]], total: "2497" }),
      ],
      [["active", 3]],
    ],
  ],
  [
    "amount coupon once: 25.00 off the first invoice only",
    async (s) => {
      await subscribe(s, await apiPlan(s), { coupon_id: await coupon(s, "Welcome 25", amountOff(2500, "once")) });
      await cycles(s, ["1000", "1000"]);
      return booked(s);
    },
    // Feb: 10,000 − 2,500 = 7,500. Mar: 10,000.
    [
      want({ number: "INV-000001", lines: [["API calls", "10000", [["Welcome 25", "2500"]], []]], subtotal: "7500", total_discount: "2500", discounts: [["Welcome 25", "2500"]], total: "7500" }),
      want({ number: "INV-000002", lines: [plain("API calls", "10000")], subtotal: "10000", total: "10000" }),
    ],
  ],
  [
    "amount coupon repeating 2 months: 15.00 off two invoices, not the third",
    async (s) => {
      const sub = await subscribe(s, await apiPlan(s));
      await s.advance(JAN_20);
      await discount(s, sub, await coupon(s, "Fifteen off", amountOff(1500, "repeating", 2)));
      await cycles(s, ["1000", "1000", "1000"]);
      return [await booked(s), await discountStates(s, sub)];
    },
    // Applied Jan 20, until Mar 20. Feb, Mar: 10,000 − 1,500 = 8,500. Apr: 10,000.
    [
      [
        want({ number: "INV-000001", lines: [["API calls", "10000", [["Fifteen off", "1500"]], []]], subtotal: "8500", total_discount: "1500", discounts: [["Fifteen off", "1500"]], total: "8500" }),
        want({ number: "INV-000002", lines: [["API calls", "10000", [["Fifteen off", "1500"]], []]], subtotal: "8500", total_discount: "1500", discounts: [["Fifteen off", "1500"]], total: "8500" }),
        want({ number: "INV-000003", lines: [plain("API calls", "10000")], subtotal: "10000", total: "10000" }),
      ],
      [["ended", 2]],
    ],
  ],
  [
    "amount coupon forever, capped at the invoice: a zero invoice is paid, the next is discounted in full",
    async (s) => {
      await subscribe(s, await apiPlan(s), { coupon_id: await coupon(s, "Fifty off", amountOff(5000)) });
      await cycles(s, ["300", "800"]);
      return booked(s);
    },
    // Feb: 300 × 10 = 3,000; 5,000 off capped at 3,000 → subtotal 0, total 0, nothing due: paid.
    // Mar: 800 × 10 = 8,000 − 5,000 = 3,000.
    [
      want({
        number: "INV-000001",
        status: "paid",
        lines: [["API calls", "3000", [["Fifty off", "3000"]], []]],
        subtotal: "0",
        total_discount: "3000",
        discounts: [["Fifty off", "3000"]],
        total: "0",
      }),
      want({ number: "INV-000002", lines: [["API calls", "8000", [["Fifty off", "5000"]], []]], subtotal: "3000", total_discount: "5000", discounts: [["Fifty off", "5000"]], total: "3000" }),
    ],
  ],
  [
    "a coupon limited to one rate (applies_to_rate_codes) on a card with two rates, each line taxed on what is left",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      const c = await coupon(s, "Storage 10%", { ...percentOff("10"), applies_to_rate_codes: ["storage"] });
      await subscribe(s, await twoRatePlan(s, [vat]), { coupon_id: c });
      await use(s, JAN_20, "400");
      await use(s, JAN_20, "1200", "store");
      await s.advance(FEB);
      return booked(s);
    },
    // API calls 400 × 10 = 4,000 (not covered); Storage 1,200 × 5 = 6,000, 10% = 600 → 5,400.
    // Subtotal 4,000 + 5,400 = 9,400. VAT per line: 4,000 × 19% = 760; 5,400 × 19% = 1,026; 1,786 in all.
    // Total 9,400 + 1,786 = 11,186.
    [
      want({
        number: "INV-000001",
        lines: [
          ["API calls", "4000", [], [["VAT", "4000", "760"]]],
          ["Storage", "6000", [["Storage 10%", "600"]], [["VAT", "5400", "1026"]]],
        ],
        subtotal: "9400",
        total_discount: "600",
        discounts: [["Storage 10%", "600"]],
        total_tax: "1786",
        tax_amounts: [["VAT", "19", false, "9400", "1786"]],
        total: "11186",
      }),
    ],
  ],
  [
    "an amount coupon split over two lines in proportion, the unit left over to the largest remainder",
    async (s) => {
      await subscribe(s, await twoRatePlan(s), { coupon_id: await coupon(s, "Ten off", amountOff(1000, "once")) });
      await use(s, JAN_20, "333");
      await use(s, JAN_20, "1333", "store");
      await s.advance(FEB);
      return booked(s);
    },
    // API calls 333 × 10 = 3,330; Storage 1,333 × 5 = 6,665; 9,995 in all. 1,000 × 3,330 / 9,995 = 333.17 → 333;
    // 1,000 × 6,665 / 9,995 = 666.83 → 666; the unit left goes to the larger remainder (.83): 667.
    // Subtotal 9,995 − 1,000 = 8,995.
    [
      want({
        number: "INV-000001",
        lines: [
          ["API calls", "3330", [["Ten off", "333"]], []],
          ["Storage", "6665", [["Ten off", "667"]], []],
        ],
        subtotal: "8995",
        total_discount: "1000",
        discounts: [["Ten off", "1000"]],
        total: "8995",
      }),
    ],
  ],
  [
    "two coupons apply in order, the second on what the first left",
    async (s) => {
      const sub = await subscribe(s, await apiPlan(s));
      await discount(s, sub, await coupon(s, "Ten percent", percentOff("10")));
      await s.advance(JAN_20);
      await discount(s, sub, await coupon(s, "Five dollars", amountOff(500)));
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // 10,000 × 10% = 1,000 → 9,000; then 500 off → 8,500. Total discount 1,500.
    [
      want({
        number: "INV-000001",
        lines: [
          [
            "API calls",
            "10000",
            [
              ["Ten percent", "1000"],
              ["Five dollars", "500"],
            ],
            [],
          ],
        ],
        subtotal: "8500",
        total_discount: "1500",
        discounts: [
          ["Ten percent", "1000"],
          ["Five dollars", "500"],
        ],
        total: "8500",
      }),
    ],
  ],
  [
    "a coupon applied to the subject discounts its subscription",
    async (s) => {
      await subscribe(s, await apiPlan(s));
      await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: await coupon(s, "Loyal 15%", percentOff("15")) });
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // 10,000 × 15% = 1,500 → 8,500.
    [want({ number: "INV-000001", lines: [["API calls", "10000", [["Loyal 15%", "1500"]], []]], subtotal: "8500", total_discount: "1500", discounts: [["Loyal 15%", "1500"]], total: "8500" })],
  ],
];

const taxes: Case[] = [
  [
    "exclusive tax: added on top",
    async (s) => {
      await subscribe(s, await apiPlan(s, { taxes: [await taxRate(s, "VAT", "19")] }));
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // 10,000 × 19% = 1,900; total 11,900.
    [taxedApi("INV-000001", ["VAT", "19"], "10000", "1900", "11900")],
  ],
  [
    "inclusive tax: inside the amount, the total unchanged",
    async (s) => {
      await subscribe(s, await apiPlan(s, { taxes: [await taxRate(s, "VAT incl.", "20", { inclusive: true })] }));
      await cycles(s, ["1200"]);
      return booked(s);
    },
    // 1,200 × 10 = 12,000 includes 20%: 12,000 × 20 / 120 = 2,000; taxable 10,000; total 12,000.
    [
      want({
        number: "INV-000001",
        lines: [["API calls", "12000", [], [["VAT incl.", "10000", "2000"]]]],
        subtotal: "12000",
        total_tax: "2000",
        tax_amounts: [["VAT incl.", "20", true, "10000", "2000"]],
        total: "12000",
      }),
    ],
  ],
  [
    "inclusive tax on a discounted line: inside what the discount left",
    async (s) => {
      const incl = await taxRate(s, "VAT incl.", "20", { inclusive: true });
      await subscribe(s, await apiPlan(s, { taxes: [incl] }), { coupon_id: await coupon(s, "Ten percent", percentOff("10")) });
      await cycles(s, ["1200"]);
      return booked(s);
    },
    // 12,000 × 10% = 1,200 → 10,800; tax inside: 10,800 × 20 / 120 = 1,800; taxable 9,000; total 10,800.
    [
      want({
        number: "INV-000001",
        lines: [["API calls", "12000", [["Ten percent", "1200"]], [["VAT incl.", "9000", "1800"]]]],
        subtotal: "10800",
        total_discount: "1200",
        discounts: [["Ten percent", "1200"]],
        total_tax: "1800",
        tax_amounts: [["VAT incl.", "20", true, "9000", "1800"]],
        total: "10800",
      }),
    ],
  ],
  [
    "two inclusive rates on one line: each amount × p / (100 + Σp)",
    async (s) => {
      const a = await taxRate(s, "VAT incl.", "19", { inclusive: true });
      const b = await taxRate(s, "Levy incl.", "7", { inclusive: true });
      await subscribe(s, await apiPlan(s, { taxes: [a, b] }));
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // 10,000 includes 19% and 7% (Σ 26): 10,000 × 19 / 126 = 1,507.94 → 1,508; 10,000 × 7 / 126 = 555.56 → 556;
    // taxable 10,000 − 2,064 = 7,936; tax 2,064; the total stays 10,000.
    [
      want({
        number: "INV-000001",
        lines: [
          [
            "API calls",
            "10000",
            [],
            [
              ["VAT incl.", "7936", "1508"],
              ["Levy incl.", "7936", "556"],
            ],
          ],
        ],
        subtotal: "10000",
        total_tax: "2064",
        tax_amounts: [
          ["VAT incl.", "19", true, "7936", "1508"],
          ["Levy incl.", "7", true, "7936", "556"],
        ],
        total: "10000",
      }),
    ],
  ],
  [
    "an inclusive and an exclusive rate on one line: the exclusive one on the amount without the inclusive tax",
    async (s) => {
      const incl = await taxRate(s, "VAT incl.", "20", { inclusive: true });
      const excl = await taxRate(s, "Surcharge", "5");
      await subscribe(s, await apiPlan(s, { taxes: [incl, excl] }));
      await cycles(s, ["1200"]);
      return booked(s);
    },
    // 12,000 includes 20%: 12,000 × 20 / 120 = 2,000, taxable 10,000; Surcharge 10,000 × 5% = 500 on top.
    // Tax 2,500; total 12,000 + 500 = 12,500.
    [
      want({
        number: "INV-000001",
        lines: [
          [
            "API calls",
            "12000",
            [],
            [
              ["VAT incl.", "10000", "2000"],
              ["Surcharge", "10000", "500"],
            ],
          ],
        ],
        subtotal: "12000",
        total_tax: "2500",
        tax_amounts: [
          ["VAT incl.", "20", true, "10000", "2000"],
          ["Surcharge", "5", false, "10000", "500"],
        ],
        total: "12500",
      }),
    ],
  ],
  [
    "two tax rates on one line, the subject's own rates instead of the card's",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      const state = await taxRate(s, "State tax", "6.25");
      const city = await taxRate(s, "City tax", "2.5");
      await buyer(s, { legal_name: "Buyer Inc.", address: { country: "US", state: "CA" }, tax_rate_ids: [state, city] });
      await subscribe(s, await apiPlan(s, { taxes: [vat] }));
      await cycles(s, ["999"]);
      return booked(s);
    },
    // 999 × 10 = 9,990 (no VAT: the subject's rates replace the card's). 9,990 × 6.25% = 624.375 → 624;
    // 9,990 × 2.5% = 249.75 → 250; tax 874; total 10,864.
    [
      want({
        number: "INV-000001",
        lines: [
          [
            "API calls",
            "9990",
            [],
            [
              ["State tax", "9990", "624"],
              ["City tax", "9990", "250"],
            ],
          ],
        ],
        subtotal: "9990",
        total_tax: "874",
        tax_amounts: [
          ["State tax", "6.25", false, "9990", "624"],
          ["City tax", "2.5", false, "9990", "250"],
        ],
        total: "10864",
      }),
    ],
  ],
  [
    "a tax rate of another country than the buyer's is not applied",
    async (s) => {
      const de = await taxRate(s, "USt", "19", { country: "DE" });
      const tx = await taxRate(s, "Texas sales tax", "8.25", { country: "US", region: "TX" });
      await buyer(s, GERMAN_BUYER);
      await subscribe(s, await apiPlan(s, { taxes: [de, tx] }));
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // The buyer is in DE: USt 10,000 × 19% = 1,900; the US rate does not apply. Total 11,900.
    [taxedApi("INV-000001", ["USt", "19"], "10000", "1900", "11900")],
  ],
  [
    "a rate with a country is not applied to a buyer whose address is unknown",
    async (s) => {
      const de = await taxRate(s, "VAT DE", "19", { country: "DE" });
      const fr = await taxRate(s, "VAT FR", "20", { country: "FR" });
      await subscribe(s, await apiPlan(s, { taxes: [de, fr] }));
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // No billing details: neither rate applies (not 1,900 + 2,000 = 3,900 of both countries). 1,000 × 10 = 10,000, total 10,000.
    [want({ number: "INV-000001", lines: [plain("API calls", "10000")], subtotal: "10000", total: "10000" })],
  ],
  [
    "a rate with a region applies only to a buyer whose state is known to be that region",
    async (s) => {
      const us = await taxRate(s, "US tax", "5", { country: "US" });
      const tx = await taxRate(s, "Texas sales tax", "8.25", { country: "US", region: "TX" });
      const plan = await apiPlan(s, { taxes: [us, tx] });
      await buyer(s, { legal_name: "No State Inc.", address: { country: "US" } });
      await subscribe(s, plan);
      const texan = await another(s, "Texan");
      await buyer(texan, { legal_name: "Lone Star LLC", address: { country: "US", state: "TX" } });
      await subscribe(texan, plan);
      await use(texan, JAN_20, "1000");
      await cycles(s, ["1000"]);
      // Both close at once: which takes INV-000001 is not fixed, so the numbers are left out.
      const taxed = async (x: Scenario) => (await booked(x)).map((b) => [b.lines, b.total_tax, b.tax_amounts, b.total]);
      return [await taxed(s), await taxed(texan)];
    },
    // Both 1,000 × 10 = 10,000. Without a state: US tax 5% = 500 only (not the Texan 825), total 10,500.
    // In TX: 500 + 10,000 × 8.25% = 825, tax 1,325, total 11,325.
    [
      [[[["API calls", "10000", [], [["US tax", "10000", "500"]]]], "500", [["US tax", "5", false, "10000", "500"]], "10500"]],
      [
        [
          [
            [
              "API calls",
              "10000",
              [],
              [
                ["US tax", "10000", "500"],
                ["Texas sales tax", "10000", "825"],
              ],
            ],
          ],
          "1325",
          [
            ["US tax", "5", false, "10000", "500"],
            ["Texas sales tax", "8.25", false, "10000", "825"],
          ],
          "11325",
        ],
      ],
    ],
  ],
  [
    "tax is rounded per line, then summed",
    async (s) => {
      await subscribe(s, await twoRatePlan(s, [await taxRate(s, "VAT", "19")]));
      await use(s, JAN_20, "333");
      await use(s, JAN_20, "67", "store");
      await s.advance(FEB);
      return booked(s);
    },
    // 333 × 10 = 3,330 × 19% = 632.7 → 633; 67 × 5 = 335 × 19% = 63.65 → 64; tax 697 (not
    // round(3,665 × 19%) = round(696.35) = 696). Total 3,665 + 697 = 4,362.
    [
      want({
        number: "INV-000001",
        lines: [
          ["API calls", "3330", [], [["VAT", "3330", "633"]]],
          ["Storage", "335", [], [["VAT", "335", "64"]]],
        ],
        subtotal: "3665",
        total_tax: "697",
        tax_amounts: [["VAT", "19", false, "3665", "697"]],
        total: "4362",
      }),
    ],
  ],
  [
    "an exempt buyer pays no tax; the invoice says so",
    async (s) => {
      await buyer(s, { ...GERMAN_BUYER, tax_exempt: "exempt" });
      await subscribe(s, await apiPlan(s, { taxes: [await taxRate(s, "VAT", "19")] }));
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // No tax on 10,000; the note "Tax exempt.".
    [want({ number: "INV-000001", lines: [plain("API calls", "10000")], subtotal: "10000", notes: ["Tax exempt."], total: "10000" })],
  ],
  [
    "reverse charge: no tax, the legal note, the buyer's VAT ID on the invoice",
    async (s) => {
      await buyer(s, { ...GERMAN_BUYER, tax_exempt: "reverse" });
      await subscribe(s, await apiPlan(s, { taxes: [await taxRate(s, "VAT", "19")] }));
      await cycles(s, ["1000"]);
      const inv = (await billed(s))[0] as Json;
      return [bookedOf(inv), inv.customer?.legal_name, inv.customer?.tax_ids, inv.customer?.tax_exempt];
    },
    // No tax on 10,000; the reverse-charge note.
    [
      want({ number: "INV-000001", lines: [plain("API calls", "10000")], subtotal: "10000", notes: [REVERSE_NOTE], total: "10000" }),
      "Kunde GmbH",
      [{ type: "eu_vat", value: "DE123456789" }],
      "reverse",
    ],
  ],
];

const together: Case[] = [
  [
    "discount, then tax, then credits in one invoice",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      await subscribe(s, await apiPlan(s, { taxes: [vat] }), { coupon_id: await coupon(s, "Ten percent", percentOff("10")) });
      await promo(s, "promo", 2000);
      await cycles(s, ["1000"]);
      return [await booked(s), await ledger(s)];
    },
    // 1,000 × 10 = 10,000; 10% = 1,000 → subtotal 9,000; VAT 9,000 × 19% = 1,710; total 10,710;
    // the 2,000 credit → 8,710 due (no card: open).
    [
      [
        want({
          number: "INV-000001",
          lines: [["API calls", "10000", [["Ten percent", "1000"]], [["VAT", "9000", "1710"]]]],
          subtotal: "9000",
          total_discount: "1000",
          discounts: [["Ten percent", "1000"]],
          total_tax: "1710",
          tax_amounts: [["VAT", "19", false, "9000", "1710"]],
          total: "10710",
          credits: ["2000"],
          due: "8710",
        }),
      ],
      [
        ["grant", "2000"],
        ["application", "-2000"],
      ],
    ],
  ],
];

/** A taxed invoice of 10,000 + 19% VAT = 11,900 on Feb 15, paid by a card on file when `card`. */
async function taxedInvoice(s: Scenario, card: boolean): Promise<Json> {
  const plan = await apiPlan(s, { taxes: [await taxRate(s, "VAT", "19")] });
  if (card) await checkoutWithCard(s, plan, CARD_OK);
  else await subscribe(s, plan);
  await cycles(s, ["1000"]);
  return (await billed(s))[0] as Json;
}

const creditNotes: Case[] = [
  [
    "credit note refund: part, then the whole rest, then nothing more",
    async (s) => {
      const inv = await taxedInvoice(s, true);
      const part = await creditNote(s, inv.id, "refund", { amount: "5950" });
      const rest = await creditNote(s, inv.id, "refund");
      const more = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund", amount: "100" });
      const after = bookedOf(await s.call("GET", `/invoices/${inv.id}`));
      return [noteOf(part), part.invoice_number, part.refund_id !== null && part.refund_id !== undefined, noteOf(rest), [more.status, reasonOf(more.body)], after];
    },
    // Paid 11,900 (10,000 + 1,900 VAT). 5,950 back, its tax in proportion: 5,950 × 1,900 / 11,900 = 950,
    // subtotal 5,000. The rest: 11,900 − 5,950 = 5,950 (950 tax). Nothing is left: CREDIT_EXCEEDS_INVOICE.
    // The invoice shows 11,900 credited; it was paid, and stays so.
    [
      ["INV-CN-000001", "refund", "5000", "950", "5950", [[0, "5950", "950"]]],
      "INV-000001",
      true,
      ["INV-CN-000002", "refund", "5000", "950", "5950", [[0, "5950", "950"]]],
      [400, "CREDIT_EXCEEDS_INVOICE"],
      taxedApi("INV-000001", ["VAT", "19"], "10000", "1900", "11900", { status: "paid", credited: "11900" }),
    ],
  ],
  [
    "credit note to the balance, part: a grant the next invoice spends",
    async (s) => {
      const inv = await taxedInvoice(s, true);
      const note = await creditNote(s, inv.id, "credit_balance", { amount: "2380" });
      await use(s, FEB_20, "1000");
      await s.advance(MAR);
      const [, next] = await booked(s);
      return [noteOf(note), typeof note.credit_grant_id, [next?.total, next?.credits, next?.due, next?.status], await ledger(s)];
    },
    // 2,380 of the paid 11,900: tax 2,380 × 1,900 / 11,900 = 380, subtotal 2,000; a grant of 2,380.
    // Mar 15: 11,900, 2,380 of it paid by the credit, 9,520 charged to the card. The ledger: the credit
    // note's entry, then its application.
    [
      ["INV-CN-000001", "credit_balance", "2000", "380", "2380", [[0, "2380", "380"]]],
      "string",
      ["11900", ["2380"], "9520", "paid"],
      [
        ["credit_note", "2380"],
        ["application", "-2380"],
      ],
    ],
  ],
  [
    "credit note to the balance, whole: the next invoice is paid by it",
    async (s) => {
      const inv = await taxedInvoice(s, true);
      const note = await creditNote(s, inv.id, "credit_balance");
      await use(s, FEB_20, "1000");
      await s.advance(MAR);
      const [first, next] = await booked(s);
      return [noteOf(note).slice(0, 5), first?.credited, [next?.total, next?.credits, next?.due, next?.status], await ledger(s)];
    },
    // All 11,900 (10,000 + 1,900 tax) to the balance; Mar 15's 11,900 is paid by it, nothing due.
    [
      ["INV-CN-000001", "credit_balance", "10000", "1900", "11900"],
      "11900",
      ["11900", ["11900"], "0", "paid"],
      [
        ["credit_note", "11900"],
        ["application", "-11900"],
      ],
    ],
  ],
  [
    "credit note reducing an open invoice's amount due: part, then the whole rest",
    async (s) => {
      const inv = await taxedInvoice(s, false);
      const part = await creditNote(s, inv.id, "reduce_amount_due", { amount: "1190" });
      const mid = bookedOf(await s.call("GET", `/invoices/${inv.id}`));
      const rest = await creditNote(s, inv.id, "reduce_amount_due");
      const end = bookedOf(await s.call("GET", `/invoices/${inv.id}`));
      return [noteOf(part), [mid.status, mid.total, mid.credited, mid.due], noteOf(rest).slice(0, 5), [end.status, end.total, end.credited, end.due], await ledger(s)];
    },
    // Open 11,900. 1,190 off: tax 1,190 × 1,900 / 11,900 = 190, subtotal 1,000; due 11,900 − 1,190 = 10,710.
    // The rest, 10,710 (tax 1,710): due 0, so paid (nothing charged). The total stays 11,900; no credit on the balance.
    [
      ["INV-CN-000001", "reduce_amount_due", "1000", "190", "1190", [[0, "1190", "190"]]],
      ["open", "11900", "1190", "10710"],
      ["INV-CN-000002", "reduce_amount_due", "9000", "1710", "10710"],
      ["paid", "11900", "11900", "0"],
      [],
    ],
  ],
];

const perLine: Case[] = [
  [
    "credit note per line: a whole line, then part of another, never beyond what is left of a line",
    async (s) => {
      await subscribe(s, await twoRatePlan(s, [await taxRate(s, "VAT", "19")]));
      await use(s, JAN_20, "400");
      await use(s, JAN_20, "1200", "store");
      await s.advance(FEB);
      const inv = (await billed(s))[0] as Json;
      const storage = await creditNote(s, inv.id, "reduce_amount_due", { lines: [{ invoice_line_index: 1 }] });
      const calls = await creditNote(s, inv.id, "reduce_amount_due", { lines: [{ invoice_line_index: 0, amount: "1190" }] });
      const beyond = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due", lines: [{ invoice_line_index: 0, amount: "3571" }] });
      const after = bookedOf(await s.call("GET", `/invoices/${inv.id}`));
      return [noteOf(storage), noteOf(calls), [beyond.status, violatedFields(beyond.body)], [after.status, after.total, after.credited, after.due]];
    },
    // API calls 400 × 10 = 4,000 + 19% 760 = 4,760; Storage 1,200 × 5 = 6,000 + 1,140 = 7,140; total 11,900.
    // Storage whole: 7,140, its tax 1,140, subtotal 6,000. API calls 1,190: tax 1,190 × 760 / 4,760 = 190,
    // subtotal 1,000. Left of API calls: 4,760 − 1,190 = 3,570, so 3,571 is refused naming the field.
    // Due 11,900 − 7,140 − 1,190 = 3,570; credited 8,330.
    [
      ["INV-CN-000001", "reduce_amount_due", "6000", "1140", "7140", [[1, "7140", "1140"]]],
      ["INV-CN-000002", "reduce_amount_due", "1000", "190", "1190", [[0, "1190", "190"]]],
      [400, ["lines[0].amount"]],
      ["open", "11900", "8330", "3570"],
    ],
  ],
];

const more: Case[] = [
  [
    "a fixed plan bought through a checkout: coupon_id and tax on the first invoice, paid by the card",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      const card = await s.card({ fixed_rates: [fixedRate(flat(10000), "base", "Base")], default_tax_rate_ids: [vat] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { base: 1 }, coupon_id: await coupon(s, "First month 10%", percentOff("10", "once")) });
      await s.advance(FEB);
      return (await booked(s)).map((b) => [b.number, b.status, b.subtotal, b.total_discount, b.total_tax, b.total, b.due]);
    },
    // Jan 15, in advance: 10,000 − 10% = 9,000; VAT 1,710; 10,710 charged to the card at the checkout.
    // Feb 15: 10,000 + 1,900 = 11,900 (the coupon was once), charged.
    [
      ["INV-000001", "paid", "9000", "1000", "1710", "10710", "10710"],
      ["INV-000002", "paid", "10000", "0", "1900", "11900", "11900"],
    ],
  ],
  [
    "a draft shows the discount it would take; only the finalized invoice uses a once coupon",
    async (s0) => {
      const s = await Scenario.start(s0.server, JAN, { invoiceGraceSeconds: 3600 });
      const sub = await subscribe(s, await apiPlan(s), { coupon_id: await coupon(s, "Once 20%", percentOff("20", "once")) });
      await cycles(s, ["1000"]);
      const draft = [await booked(s), await discountStates(s, sub)];
      await s.advance("2026-02-15T02:00:00Z");
      return [draft, await booked(s), await discountStates(s, sub)];
    },
    // The draft: 10,000 − 20% = 8,000, the discount still unused (0 invoices). Final: the same, the discount ended after 1.
    [
      [
        [
          want({
            number: "",
            status: "draft",
            lines: [["API calls", "10000", [["Once 20%", "2000"]], []]],
            subtotal: "8000",
            total_discount: "2000",
            discounts: [["Once 20%", "2000"]],
            total: "8000",
          }),
        ],
        [["active", 0]],
      ],
      [want({ number: "INV-000001", lines: [["API calls", "10000", [["Once 20%", "2000"]], []]], subtotal: "8000", total_discount: "2000", discounts: [["Once 20%", "2000"]], total: "8000" })],
      [["ended", 1]],
    ],
  ],
  [
    "a removed discount no longer discounts; an amount coupon of another currency is refused",
    async (s) => {
      const sub = await subscribe(s, await apiPlan(s));
      const d = await discount(s, sub, await coupon(s, "Ten percent", percentOff("10")));
      const eur = await s.raw("POST", `/subscriptions/${sub}/discounts`, { coupon_id: await coupon(s, "Five euros", amountOff(500, "forever", undefined, "EUR")) });
      await cycles(s, ["1000"]);
      await s.call("DELETE", `/discounts/${d.id}`);
      await use(s, FEB_20, "1000");
      await s.advance(MAR);
      return [[eur.status, reasonOf(eur.body)], (await booked(s)).map((b) => [b.number, b.total_discount, b.total]), await discountStates(s, sub)];
    },
    // Feb 15: 10,000 − 1,000 = 9,000. Removed on Feb 15: Mar 15 10,000. The EUR coupon never applied to a USD subscription.
    [
      [400, "CURRENCY_MISMATCH"],
      [
        ["INV-000001", "1000", "9000"],
        ["INV-000002", "0", "10000"],
      ],
      [["removed", 1]],
    ],
  ],
  [
    "credit notes on a discounted invoice partly paid by credit: what is due, then the rest to the balance",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      await subscribe(s, await apiPlan(s, { taxes: [vat] }), { coupon_id: await coupon(s, "Ten percent", percentOff("10")) });
      await promo(s, "promo", 2000);
      await cycles(s, ["1000"]);
      const inv = (await billed(s))[0] as Json;
      const whole = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "reduce_amount_due" });
      const due = await creditNote(s, inv.id, "reduce_amount_due", { amount: "8710" });
      const rest = await creditNote(s, inv.id, "credit_balance");
      const after = bookedOf(await s.call("GET", `/invoices/${inv.id}`));
      return [[whole.status, reasonOf(whole.body)], noteOf(due), noteOf(rest), [after.status, after.total, after.credits, after.credited, after.due], await ledger(s)];
    },
    // The invoice: 10,000 − 1,000 = 9,000 + 1,710 VAT = 10,710; 2,000 credit; 8,710 due. Reducing all of
    // 10,710 is more than is due: refused. 8,710: tax 8,710 × 1,710 / 10,710 = 1,390.72 → 1,391, subtotal
    // 7,319; due 0 (paid). The rest, 10,710 − 8,710 = 2,000: tax 2,000 × 1,710 / 10,710 = 319.33 → 319,
    // subtotal 1,681, to the balance: the 2,000 of credit it took comes back.
    [
      [400, "CREDIT_EXCEEDS_AMOUNT_DUE"],
      ["INV-CN-000001", "reduce_amount_due", "7319", "1391", "8710", [[0, "8710", "1391"]]],
      ["INV-CN-000002", "credit_balance", "1681", "319", "2000", [[0, "2000", "319"]]],
      ["paid", "10710", ["2000"], "10710", "0"],
      [
        ["grant", "2000"],
        ["application", "-2000"],
        ["credit_note", "2000"],
      ],
    ],
  ],
];

/** A seats plan (1,000 per seat, VAT 19%) bought through a checkout with 2 seats and `coupon`; at Mar 1, 4 seats. */
async function seatIncrease(s: Scenario, couponBody: Json): Promise<unknown> {
  const vat = await taxRate(s, "VAT", "19");
  const card = await s.card({ fixed_rates: [fixedRate(flat(1000))], default_tax_rate_ids: [vat] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 }, coupon_id: await coupon(s, "Seats 10%", couponBody) });
  await s.advance(FEB);
  await s.advance("2026-03-01T00:00:00Z");
  const sub = (await s.subscriptions())[0] as Json;
  await s.call("PATCH", `/subscriptions/${sub.id}`, { fixed_rate_quantities: { seats: 4 } });
  await s.advance(MAR);
  return (await booked(s)).map((b) => [b.number, b.lines.map((l) => [l[1], l[2].map((d) => d[1]), l[3].map((t) => t[2])]), b.total, b.due]);
}

/** What seatIncrease reads with a 10% coupon on the whole invoice and VAT 19%. */
const SEAT_INCREASE = [
  // Jan 15 and Feb 15: 2 × 1,000 = 2,000 − 10% = 1,800 + 19% 342 = 2,142.
  ["INV-000001", [["2000", ["200"], ["342"]]], "2142", "2142"],
  ["INV-000002", [["2000", ["200"], ["342"]]], "2142", "2142"],
  // Mar 1, 14 of 28 days left: 2 more seats × 1,000 × 14/28 = 1,000 − 10% = 900 + 171 = 1,071, at once.
  ["INV-000003", [["1000", ["100"], ["171"]]], "1071", "1071"],
  // Mar 15: 4 × 1,000 = 4,000 − 400 = 3,600 + 684 = 4,284.
  ["INV-000004", [["4000", ["400"], ["684"]]], "4284", "4284"],
];

const changes: Case[] = [
  ["a seat increase's proration invoice is discounted and taxed like any other", (s) => seatIncrease(s, percentOff("10")), SEAT_INCREASE],
  // The proration line is keyed by its rate: a coupon limited to the seats rate discounts it too (same figures).
  ["a coupon on the seats rate discounts a seat increase's proration too", (s) => seatIncrease(s, { ...percentOff("10"), applies_to_rate_codes: ["seats"] }), SEAT_INCREASE],
  [
    "a credit purchase is neither discounted nor taxed; the credit is spent after discount and tax",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      await checkoutWithCard(s, await apiPlan(s, { taxes: [vat] }), CARD_OK);
      await discount(s, ((await s.subscriptions())[0] as Json).id, await coupon(s, "Ten percent", percentOff("10")));
      await paid(s, "bought", 5000);
      await cycles(s, ["1000"]);
      return (await booked(s)).map((b) => [b.number, b.status, b.subtotal, b.total_discount, b.total_tax, b.total, b.credits, b.due]);
    },
    // The purchase: 5,000, charged. Feb 15: 10,000 − 1,000 = 9,000 + 1,710 = 10,710; the 5,000 credit; 5,710 charged.
    [
      ["INV-000001", "paid", "5000", "0", "0", "5000", [], "5000"],
      ["INV-000002", "paid", "9000", "1000", "1710", "10710", ["5000"], "5710"],
    ],
  ],
  [
    "a subject's amount coupon takes its amount off each subscription's invoice",
    async (s) => {
      await subscribe(s, await apiPlan(s));
      const stored = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "store");
      await subscribe(s, await s.card({ usage_based_rates: [usageRate(stored, flat(5), { code: "storage", name: "Storage" })] }));
      await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: await coupon(s, "Five off", amountOff(500)) });
      await use(s, JAN_20, "1000");
      await use(s, JAN_20, "1000", "store");
      await s.advance(FEB);
      const list = await booked(s);
      return [list.map((b) => b.number).sort(), list.map((b) => [b.lines[0]?.[0], b.total_discount, b.total]).sort()];
    },
    // API calls 1,000 × 10 = 10,000 − 500 = 9,500; Storage 1,000 × 5 = 5,000 − 500 = 4,500; two numbers.
    [
      ["INV-000001", "INV-000002"],
      [
        ["API calls", "500", "9500"],
        ["Storage", "500", "4500"],
      ],
    ],
  ],
  [
    "late usage's adjustment line is discounted by a coupon on its rate and taxed",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      await subscribe(s, await apiPlan(s, { taxes: [vat] }), { coupon_id: await coupon(s, "API 10%", { ...percentOff("10"), applies_to_rate_codes: ["api"] }) });
      await cycles(s, ["1000"]);
      await use(s, "2026-02-10T00:00:00Z", "100");
      await use(s, FEB_20, "1000");
      await s.advance(MAR);
      return (await booked(s)).map((b) => [b.number, b.lines, b.subtotal, b.total_tax, b.total]);
    },
    // Feb 15: 10,000 − 1,000 = 9,000 + 1,710 = 10,710. Mar 15: API calls 10,000 and the late 100 × 10 = 1,000
    // of Jan 15 → Feb 15; 10% of each: 1,000 and 100; VAT 9,000 × 19% = 1,710 and 900 × 19% = 171;
    // subtotal 9,900, tax 1,881, total 11,781.
    [
      ["INV-000001", [["API calls", "10000", [["API 10%", "1000"]], [["VAT", "9000", "1710"]]]], "9000", "1710", "10710"],
      [
        "INV-000002",
        [
          ["API calls", "10000", [["API 10%", "1000"]], [["VAT", "9000", "1710"]]],
          ["API calls", "1000", [["API 10%", "100"]], [["VAT", "900", "171"]]],
        ],
        "9900",
        "1881",
        "11781",
      ],
    ],
  ],
];

const parties: Case[] = [
  [
    "a rate-card change's draft is taxed by the card it priced, not the card the subscription moved to",
    async (s0) => {
      const s = await Scenario.start(s0.server, JAN, { invoiceGraceSeconds: 3600 });
      const a = await apiPlan(s, { taxes: [await taxRate(s, "VAT", "20")] });
      const b = await apiPlan(s);
      const sub = await subscribe(s, a);
      await use(s, JAN_20, "1000");
      await s.advance("2026-01-25T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub}/change-rate-card`, { rate_card_id: b, upgrade_behavior: "prorate" });
      const draft = await booked(s);
      await s.advance("2026-01-25T02:00:00Z");
      return [draft, await booked(s)];
    },
    // Card A (VAT 20%) billed 1,000 × 10 = 10,000 of usage up to the change on Jan 25; card B has
    // no tax rates. The draft and the invoice it finalizes to: 10,000 + 2,000 VAT = 12,000.
    [[taxedApi("", ["VAT", "20"], "10000", "2000", "12000", { status: "draft" })], [taxedApi("INV-000001", ["VAT", "20"], "10000", "2000", "12000")]],
  ],
  [
    "late usage of a card left by a change is taxed by that card, on the next card's invoice",
    async (s) => {
      await changedToGst(s);
      await use(s, "2026-01-21T00:00:00Z", "100");
      await use(s, "2026-02-01T00:00:00Z", "500");
      await s.advance(FEB);
      return (await booked(s)).map((x) => [x.number, x.lines, x.total_tax, x.total]);
    },
    // Jan 25, the change: card A's 1,000 × 10 = 10,000 + 20% VAT 2,000 = 12,000. Feb 15, card B's
    // invoice: its own 500 × 10 = 5,000 + 5% GST 250, and the late 100 × 10 = 1,000 of A's window
    // (Jan 15 → Jan 25) taxed as A says, VAT 200 (not GST 50); tax 450, total 6,450.
    [
      ["INV-000001", [["API calls", "10000", [], [["VAT", "10000", "2000"]]]], "2000", "12000"],
      [
        "INV-000002",
        [
          ["API calls", "5000", [], [["GST", "5000", "250"]]],
          ["API calls", "1000", [], [["VAT", "1000", "200"]]],
        ],
        "450",
        "6450",
      ],
    ],
  ],
  [
    "late usage of a card left by a change, after the subscription ended: its adjustment invoice is taxed by that card",
    async (s) => {
      const sub = await changedToGst(s);
      await s.advance("2026-01-28T00:00:00Z");
      await s.call("POST", `/subscriptions/${sub}/cancel`, {});
      await use(s, "2026-01-21T00:00:00Z", "100");
      await s.advance("2026-01-29T00:00:00Z");
      return (await booked(s)).map((x) => [x.number, x.lines, x.total_tax, x.total]);
    },
    // Jan 25, the change: card A's 10,000 + 20% VAT 2,000 = 12,000. Jan 28, the cancel: no usage of
    // card B (an empty invoice, internal). The late 100 × 10 = 1,000 of A's window (Jan 15 → Jan 25),
    // billed on its own once the subscription ended: VAT 200 (not B's GST 50), total 1,200.
    [
      ["INV-000001", [["API calls", "10000", [], [["VAT", "10000", "2000"]]]], "2000", "12000"],
      ["INV-000002", [["API calls", "1000", [], [["VAT", "1000", "200"]]]], "200", "1200"],
    ],
  ],
  [
    "the buyer is read when the invoice finalizes: a draft follows new billing details, a final invoice keeps its own",
    async (s0) => {
      const s = await Scenario.start(s0.server, JAN, { invoiceGraceSeconds: 3600 });
      await buyer(s, GERMAN_BUYER);
      await subscribe(s, await apiPlan(s, { taxes: [await taxRate(s, "USt", "19", { country: "DE" })] }));
      await cycles(s, ["1000"]);
      const read = async () => {
        const i = (await billed(s))[0] as Json;
        return [i.status, i.customer?.legal_name, i.customer?.tax_exempt, i.total_tax.value, i.total_amount.value, i.notes];
      };
      const taxed = await read();
      await buyer(s, { ...GERMAN_BUYER, tax_exempt: "exempt" });
      const exempt = await read();
      await s.advance("2026-02-15T02:00:00Z");
      const final = await read();
      await buyer(s, { ...GERMAN_BUYER, legal_name: "Renamed GmbH" });
      return [taxed, exempt, final, await read()];
    },
    // The draft: 10,000 + 1,900 USt = 11,900. The buyer becomes exempt: the draft shows no tax and the note.
    // It finalizes exempt; the buyer's later change (taxed again, renamed) leaves the final invoice as it was.
    [
      ["draft", "Kunde GmbH", "none", "1900", "11900", []],
      ["draft", "Kunde GmbH", "exempt", "0", "10000", ["Tax exempt."]],
      ["open", "Kunde GmbH", "exempt", "0", "10000", ["Tax exempt."]],
      ["open", "Kunde GmbH", "exempt", "0", "10000", ["Tax exempt."]],
    ],
  ],
  [
    "an archived tax rate still applies where it was set",
    async (s) => {
      const vat = await taxRate(s, "VAT", "19");
      await subscribe(s, await apiPlan(s, { taxes: [vat] }));
      await s.call("POST", `/tax-rates/${vat}/archive`, {});
      await cycles(s, ["1000"]);
      return (await booked(s)).map((b) => [b.number, b.total_tax, b.total]);
    },
    // 10,000 × 19% = 1,900: the card keeps its rate though it can no longer be set anywhere new.
    [["INV-000001", "1900", "11900"]],
  ],
  [
    "a bad prefix is refused naming the field, and the numbers go on unchanged",
    async (s) => {
      const bad = await Promise.all(["acme", "", "ABCDEFGHIJKLM", "AC ME"].map((p) => s.raw("PATCH", "/invoice-settings", { number_prefix: p })));
      await subscribe(s, await apiPlan(s));
      await cycles(s, ["100"]);
      const settings = await s.call("GET", "/invoice-settings");
      return [bad.map((r) => [r.status, violatedFields(r.body)]), (await booked(s)).map((b) => b.number), [settings.number_prefix, settings.next_invoice_sequence]];
    },
    // Lower case, empty, 13 characters, a space: each 400 on number_prefix. The invoice is INV-000001; next 2.
    [
      [
        [400, ["number_prefix"]],
        [400, ["number_prefix"]],
        [400, ["number_prefix"]],
        [400, ["number_prefix"]],
      ],
      ["INV-000001"],
      ["INV", "2"],
    ],
  ],
];

const edges: Case[] = [
  [
    "a 100% coupon: a zero invoice with lines is numbered and paid, not kept internal",
    async (s) => {
      await subscribe(s, await apiPlan(s, { taxes: [await taxRate(s, "VAT", "19")] }), { coupon_id: await coupon(s, "Free", percentOff("100")) });
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // 10,000 − 100% = 0; VAT 0 × 19% = 0; total 0: paid with nothing charged, and numbered (it has a line).
    [
      want({
        number: "INV-000001",
        status: "paid",
        lines: [["API calls", "10000", [["Free", "10000"]], [["VAT", "0", "0"]]]],
        subtotal: "0",
        total_discount: "10000",
        discounts: [["Free", "10000"]],
        tax_amounts: [["VAT", "19", false, "0", "0"]],
        total: "0",
      }),
    ],
  ],
  [
    "JPY inclusive tax: whole yen inside the amount",
    async (s) => {
      await subscribe(s, await apiPlan(s, { price: 1, currency: "JPY", taxes: [await taxRate(s, "Consumption tax incl.", "10", { inclusive: true })] }));
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // ¥1,000 includes 10%: 1,000 × 10 / 110 = 90.91 → 91; taxable 909; total 1,000.
    [
      want({
        number: "INV-000001",
        currency: "JPY",
        lines: [["API calls", "1000", [], [["Consumption tax incl.", "909", "91"]]]],
        subtotal: "1000",
        total_tax: "91",
        tax_amounts: [["Consumption tax incl.", "10", true, "909", "91"]],
        total: "1000",
      }),
    ],
  ],
  [
    "a percent coupon on a rate capped by its maximum: the discount on what is billed, split over the usage and the maximum lines",
    async (s) => {
      const m = await s.metric();
      const card = await s.card({ usage_based_rates: [usageRate(m, flat(10), { max: 5000 })], default_tax_rate_ids: [await taxRate(s, "VAT", "19")] });
      await subscribe(s, card, { coupon_id: await coupon(s, "Ten percent", percentOff("10")) });
      await cycles(s, ["1000"]);
      return booked(s);
    },
    // Usage 1,000 × 10 = 10,000; maximum −5,000; billed 5,000; 10% = 500, split 1,000 and −500.
    // VAT per line: 9,000 × 19% = 1,710; −4,500 × 19% = −855; tax 855. Subtotal 4,500; total 5,355.
    [
      want({
        number: "INV-000001",
        lines: [
          ["API calls", "10000", [["Ten percent", "1000"]], [["VAT", "9000", "1710"]]],
          ["API calls", "-5000", [["Ten percent", "-500"]], [["VAT", "-4500", "-855"]]],
        ],
        subtotal: "4500",
        total_discount: "500",
        discounts: [["Ten percent", "500"]],
        total_tax: "855",
        tax_amounts: [["VAT", "19", false, "4500", "855"]],
        total: "5355",
      }),
    ],
  ],
  [
    "a refund of an invoice partly paid by credit: no more than the card paid, the rest to the balance",
    async (s) => {
      await checkoutWithCard(s, await apiPlan(s, { taxes: [await taxRate(s, "VAT", "19")] }), CARD_OK);
      await promo(s, "promo", 2000);
      await cycles(s, ["1000"]);
      const inv = (await billed(s))[0] as Json;
      const whole = await s.raw("POST", "/credit-notes", { invoice_id: inv.id, reason: "other", outcome: "refund" });
      const untouched = bookedOf(await s.call("GET", `/invoices/${inv.id}`)).credited;
      const refund = await creditNote(s, inv.id, "refund", { amount: "9900" });
      const rest = await creditNote(s, inv.id, "credit_balance");
      const after = bookedOf(await s.call("GET", `/invoices/${inv.id}`));
      return [[bookedOf(inv).credits, bookedOf(inv).due], [whole.status, reasonOf(whole.body), untouched], noteOf(refund), noteOf(rest), [after.status, after.credited, after.due], await ledger(s)];
    },
    // 11,900 (10,000 + 1,900 VAT): 2,000 credit, 9,900 charged. All 11,900 back to the card is more than it
    // paid: refused, nothing credited. 9,900: tax 9,900 × 1,900 / 11,900 = 1,580.67 → 1,581, subtotal 8,319.
    // The rest, 2,000 (tax 319.33 → 319, subtotal 1,681), to the balance: the credit it took comes back.
    [
      [["2000"], "9900"],
      [400, "REFUND_FAILED", "0"],
      ["INV-CN-000001", "refund", "8319", "1581", "9900", [[0, "9900", "1581"]]],
      ["INV-CN-000002", "credit_balance", "1681", "319", "2000", [[0, "2000", "319"]]],
      ["paid", "11900", "9900"],
      [
        ["grant", "2000"],
        ["application", "-2000"],
        ["credit_note", "2000"],
      ],
    ],
  ],
];

const rounding: Case[] = [
  [
    "USD rounding at each step: 15% coupon and 6.25% tax over three cycles",
    async (s) => {
      const tax = await taxRate(s, "Sales tax", "6.25");
      await subscribe(s, await apiPlan(s, { price: 1, taxes: [tax] }), { coupon_id: await coupon(s, "Fifteen", percentOff("15")) });
      await cycles(s, ["999", "1030", "1064"]);
      return (await booked(s)).map((b) => [b.number, b.subtotal, b.total_discount, b.total_tax, b.total, b.due]);
    },
    // 999 × 15% = 149.85 → 150; subtotal 849; 849 × 6.25% = 53.0625 → 53; total 902.
    // 1,030 × 15% = 154.5 → 155 (half-up); 875; × 6.25% = 54.6875 → 55; 930.
    // 1,064 × 15% = 159.6 → 160; 904; × 6.25% = 56.5 → 57 (half-up); 961.
    [
      ["INV-000001", "849", "150", "53", "902", "902"],
      ["INV-000002", "875", "155", "55", "930", "930"],
      ["INV-000003", "904", "160", "57", "961", "961"],
    ],
  ],
  [
    "JPY rounding: whole yen at each step",
    async (s) => {
      const tax = await taxRate(s, "Consumption tax", "10");
      await subscribe(s, await apiPlan(s, { price: 1, currency: "JPY", taxes: [tax] }), { coupon_id: await coupon(s, "Ten percent", percentOff("10")) });
      await cycles(s, ["999", "1005"]);
      return booked(s);
    },
    // ¥999 × 10% = 99.9 → 100; subtotal 899; 899 × 10% = 89.9 → 90; total 989.
    // ¥1,005 × 10% = 100.5 → 101 (half-up); 904; × 10% = 90.4 → 90; total 994.
    [
      want({
        number: "INV-000001",
        currency: "JPY",
        lines: [["API calls", "999", [["Ten percent", "100"]], [["Consumption tax", "899", "90"]]]],
        subtotal: "899",
        total_discount: "100",
        discounts: [["Ten percent", "100"]],
        total_tax: "90",
        tax_amounts: [["Consumption tax", "10", false, "899", "90"]],
        total: "989",
      }),
      want({
        number: "INV-000002",
        currency: "JPY",
        lines: [["API calls", "1005", [["Ten percent", "101"]], [["Consumption tax", "904", "90"]]]],
        subtotal: "904",
        total_discount: "101",
        discounts: [["Ten percent", "101"]],
        total_tax: "90",
        tax_amounts: [["Consumption tax", "10", false, "904", "90"]],
        total: "994",
      }),
    ],
  ],
  [
    "KWD rounding in fils, with the seller and the buyer on the invoice",
    async (s) => {
      await s.call("PATCH", "/invoice-settings", { seller: { legal_name: "Seller W.L.L.", address: { city: "Kuwait City", country: "KW" }, tax_id: "KW-300001" } });
      await buyer(s, { legal_name: "Buyer K.S.C.", address: { country: "KW" } });
      const vat = await taxRate(s, "VAT", "5", { country: "KW" });
      const sub = await subscribe(s, await apiPlan(s, { price: 1, currency: "KWD", taxes: [vat] }));
      await use(s, JAN_20, "1234");
      await s.advance(FEB);
      await s.advance(FEB_20);
      await discount(s, sub, await coupon(s, "Quarter off", percentOff("25")));
      await use(s, "2026-02-21T00:00:00Z", "1234");
      await s.advance(MAR);
      const invoices = await billed(s);
      return [invoices.map(bookedOf), invoices.map((i) => [i.seller?.legal_name, i.seller?.tax_id, i.customer?.legal_name, i.customer?.address?.country])];
    },
    // Feb: 1,234 fils × 5% = 61.7 → 62; total 1,296. Mar: 1,234 × 25% = 308.5 → 309 (half-up); 925;
    // × 5% = 46.25 → 46; total 971.
    [
      [
        want({
          number: "INV-000001",
          currency: "KWD",
          lines: [["API calls", "1234", [], [["VAT", "1234", "62"]]]],
          subtotal: "1234",
          total_tax: "62",
          tax_amounts: [["VAT", "5", false, "1234", "62"]],
          total: "1296",
        }),
        want({
          number: "INV-000002",
          currency: "KWD",
          lines: [["API calls", "1234", [["Quarter off", "309"]], [["VAT", "925", "46"]]]],
          subtotal: "925",
          total_discount: "309",
          discounts: [["Quarter off", "309"]],
          total_tax: "46",
          tax_amounts: [["VAT", "5", false, "925", "46"]],
          total: "971",
        }),
      ],
      [
        ["Seller W.L.L.", "KW-300001", "Buyer K.S.C.", "KW"],
        ["Seller W.L.L.", "KW-300001", "Buyer K.S.C.", "KW"],
      ],
    ],
  ],
];

const numbers: Case[] = [
  [
    "numbers: consecutive across subjects, a new prefix continues the sequence, credit notes their own",
    async (s) => {
      const plan = await apiPlan(s);
      await subscribe(s, plan);
      await s.advance(JAN_20);
      const b = await another(s, "Second");
      await subscribe(b, plan);
      await use(s, JAN_20, "100");
      await use(b, "2026-01-21T00:00:00Z", "200");
      await s.advance(FEB);
      await s.advance(FEB_20);
      const settings = await s.call("PATCH", "/invoice-settings", { number_prefix: "ACME" });
      await use(s, FEB_20, "300");
      await s.advance(MAR);
      const [first] = await billed(s);
      const note = await creditNote(s, (first as Json).id, "reduce_amount_due");
      const read = await s.call("GET", "/invoice-settings");
      const num = (list: Json[]) => list.map((i) => i.number);
      return [
        num(await billed(s)),
        num(await billed(b)),
        [settings.number_prefix, settings.next_invoice_sequence],
        [note.number, note.invoice_number],
        [read.number_prefix, read.next_invoice_sequence],
      ];
    },
    // A's period ends Feb 15: INV-000001; B's (from Jan 20) Feb 20: INV-000002. The prefix becomes
    // ACME, the next number still 3: A's Mar 15 invoice is ACME-000003. A credit note: ACME-CN-000001,
    // against INV-000001 (an invoice keeps its number). Next invoice: 4.
    [["INV-000001", "ACME-000003"], ["INV-000002"], ["ACME", "3"], ["ACME-CN-000001", "INV-000001"], ["ACME", "4"]],
  ],
  [
    "a draft has no number yet (it shows its tax); an empty invoice takes none",
    async (s0) => {
      const s = await Scenario.start(s0.server, JAN, { invoiceGraceSeconds: 3600 });
      await subscribe(s, await apiPlan(s, { taxes: [await taxRate(s, "VAT", "19")] }));
      await s.advance(FEB);
      await use(s, FEB_20, "500");
      await s.advance(MAR);
      const draft = await booked(s);
      await s.advance("2026-03-15T02:00:00Z");
      return [draft, await booked(s)];
    },
    // Feb 15: no usage, an empty invoice kept internal (no number). Mar 15: 500 × 10 = 5,000 + 950
    // VAT = 5,950, a draft without a number; once final, the first number: INV-000001.
    [[taxedApi("", ["VAT", "19"], "5000", "950", "5950", { status: "draft" })], [taxedApi("INV-000001", ["VAT", "19"], "5000", "950", "5950")]],
  ],
  [
    "GET /invoices?number= finds one invoice across subjects",
    async (s) => {
      const plan = await apiPlan(s);
      await subscribe(s, plan);
      await s.advance(JAN_20);
      const b = await another(s, "Second");
      await subscribe(b, plan);
      await use(s, JAN_20, "100");
      await use(b, "2026-01-21T00:00:00Z", "200");
      await s.advance(FEB_20);
      const found = (await s.call("GET", "/invoices?number=INV-000002")).invoices as Json[];
      return found.map((i) => [i.number, i.subject_id === b.subjectId, i.total_amount.value]);
    },
    // A: INV-000001 (Feb 15, 1,000); B: INV-000002 (Feb 20, 200 × 10 = 2,000).
    [["INV-000002", true, "2000"]],
  ],
];

const cases: Case[] = [...coupons, ...taxes, ...together, ...creditNotes, ...perLine, ...more, ...changes, ...parties, ...edges, ...rounding, ...numbers];

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
