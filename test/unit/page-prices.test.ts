/**
 * How the pages write prices and invoice lines (src/pages/prices.ts, hosted/invoice.ts), pure:
 * every amount with its currency's exponent (JPY 0 decimals, USD 2, KWD 3), a tiered price as a
 * table with "and above" for its last tier, a percentage price with its fee per event, a usage
 * rate's minimum and maximum, and invoice lines of kind minimum, maximum and proration with a
 * negative amount shown as such.
 */
import test from "ava";
import type { Money, Price, UsageRate } from "../../src/billing/catalog/types.js";
import { displayMoney } from "../../src/billing/money.js";
import type { Invoice, InvoiceLine } from "../../src/billing/subscriptions/types.js";
import { invoiceHtml } from "../../src/pages/hosted/invoice.js";
import { lineAmountHtml, priceHtml, usageRateHtml } from "../../src/pages/prices.js";

/** The text a reader sees: tags dropped, white space collapsed. */
const text = (h: { text: string }) =>
  h.text
    .replace(/<[^>]+>/g, " ")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();
const m = (value: string, currency = "USD"): Money => ({ value, currency });

const moneyCases: [string, string, string][] = [
  ["100000", "JPY", "JPY 100000"],
  ["1", "JPY", "JPY 1"],
  ["1250", "KWD", "KWD 1.250"],
  ["1", "KWD", "KWD 0.001"],
  ["4900", "USD", "USD 49.00"],
  ["0.5", "USD", "USD 0.005"],
  ["-150", "USD", "USD -1.50"],
  ["-1250", "KWD", "KWD -1.250"],
  ["-700", "JPY", "JPY -700"],
  ["0", "USD", "USD 0.00"],
];
for (const [value, currency, shown] of moneyCases) {
  test(`displayMoney(${value}, ${currency}) is ${shown}`, (t) => {
    t.is(displayMoney(value, currency), shown);
  });
}

const priceCases: [string, Price, string][] = [
  ["flat JPY", { kind: "flat", amount: m("1000", "JPY") }, "JPY 1000"],
  ["flat KWD", { kind: "flat", amount: m("1250", "KWD") }, "KWD 1.250"],
  ["package", { kind: "package", amount: m("500"), packageUnits: "100", rounding: "round_up" }, "USD 5.00 per 100 units (round up)"],
  ["percentage with a fee per event", { kind: "percentage", currency: "USD", percent: "2.9", fixedPerEvent: m("30") }, "2.9% + USD 0.30 per event"],
  ["percentage alone", { kind: "percentage", currency: "KWD", percent: "1.5", fixedPerEvent: null }, "1.5%"],
  [
    "graduated tiers",
    {
      kind: "tiered",
      currency: "USD",
      mode: "graduated",
      tiers: [
        { upTo: "1000", unitAmount: m("2"), flatAmount: m("500") },
        { upTo: "5000", unitAmount: m("1.5"), flatAmount: null },
        { upTo: null, unitAmount: m("1"), flatAmount: null },
      ],
    },
    "Graduated: each unit at the price of the tier it falls in (graduated) Up to Per unit Flat fee 1000 USD 0.02 USD 5.00 5000 USD 0.015 — and above USD 0.01 —",
  ],
  [
    "volume tiers in JPY",
    {
      kind: "tiered",
      currency: "JPY",
      mode: "volume",
      tiers: [
        { upTo: "10", unitAmount: m("1000", "JPY"), flatAmount: null },
        { upTo: null, unitAmount: m("800", "JPY"), flatAmount: m("2000", "JPY") },
      ],
    },
    "Volume: every unit at the price of the tier the total reaches (volume) Up to Per unit Flat fee 10 JPY 1000 — and above JPY 800 JPY 2000",
  ],
];
for (const [title, price, shown] of priceCases) {
  test(`priceHtml: ${title}`, (t) => {
    t.is(text(priceHtml(price)), shown);
  });
}

test("priceHtml: a tiered price is a table with a row per tier", (t) => {
  const h = priceHtml(priceCases[5]?.[1] as Price).text;
  t.regex(h, /^<table class="tiers">/);
  t.is(h.match(/<tr>/g)?.length, 4, "a head row and three tiers");
});

test("usageRateHtml: a rate's minimum and maximum per period, in the rate's currency", (t) => {
  const rate: UsageRate = {
    id: "rate_1",
    code: "api",
    name: "API calls",
    description: null,
    pricingMetricId: "pm_1",
    includedUnits: "0",
    minimumAmount: m("10000", "KWD"),
    maximumAmount: m("250000", "KWD"),
    type: "simple",
    price: { kind: "flat", amount: m("5", "KWD") },
  };
  t.is(text(usageRateHtml(rate)), "KWD 0.005 Minimum KWD 10.000 per period Maximum KWD 250.000 per period");
  t.is(text(usageRateHtml({ ...rate, minimumAmount: null, maximumAmount: null })), "KWD 0.005");
});

test("lineAmountHtml: a negative amount is a credit, marked", (t) => {
  t.is(lineAmountHtml("-1250", "KWD").text, '<span class="credit">KWD -1.250</span>');
  t.is(lineAmountHtml("1250", "KWD").text, "KWD 1.250");
});

const line = (description: string, kind: InvoiceLine["kind"], quantity: string, unitAmount: string, amount: string): InvoiceLine => ({
  description,
  kind,
  quantity,
  unitAmount,
  amount,
  key: null,
  windowInvoiceId: null,
});

function invoice(currency: string, lines: InvoiceLine[], total: string): Invoice {
  const at = new Date("2026-02-15T00:00:00Z");
  return {
    id: "inv_1",
    environmentId: "env_1",
    subjectId: "subj_1",
    subscriptionId: "sub_1",
    periodKey: "cycle:1",
    status: "open",
    currency,
    total,
    lines,
    hostedToken: "tok",
    periodStart: at,
    periodEnd: new Date("2026-03-15T00:00:00Z"),
    createdAt: at,
    window: null,
    finalizesAt: null,
    clockId: null,
    finalizedAt: at,
  };
}

test("the hosted invoice: minimum, maximum and proration lines named, negative amounts as such, the currency's decimals", (t) => {
  const inv = invoice(
    "KWD",
    [
      line("API calls", "usage", "3", "0.3335", "1"),
      line("API calls", "minimum", "1", "9999", "9999"),
      line("Storage", "usage", "10", "30000", "300000"),
      line("Storage: maximum for the period", "maximum", "1", "-50000", "-50000"),
      line("Seats: 2 → 1 for the rest of the period", "proration", "-0.5", "4000", "-2000"),
    ],
    "257999",
  );
  const shown = text(invoiceHtml(inv));
  t.regex(shown, /API calls 3 KWD 0\.0003335 KWD 0\.001 /);
  t.regex(shown, /API calls \(minimum for the period\) 1 KWD 9\.999 KWD 9\.999 /);
  t.regex(shown, /Storage: maximum for the period 1 KWD -50\.000 KWD -50\.000 /, "a description that names its kind is not labelled again");
  t.regex(shown, /Seats: 2 → 1 for the rest of the period \(proration\) -0\.5 KWD 4\.000 KWD -2\.000 /);
  t.regex(shown, /Total KWD 257\.999 A negative amount is a credit\./);
  t.is(invoiceHtml(inv).text.match(/class="credit"/g)?.length, 3, "two negative amounts on the maximum line, one on the proration line");
});

test("the hosted invoice in JPY: whole yen, no note about credits without a negative line", (t) => {
  const shown = text(invoiceHtml(invoice("JPY", [line("Seats", "fixed", "2", "1500", "3000")], "3000")));
  t.regex(shown, /Seats 2 JPY 1500 JPY 3000 Total JPY 3000 Print/);
  t.false(shown.includes("credit"));
});
