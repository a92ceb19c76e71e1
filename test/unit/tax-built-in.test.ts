/**
 * The built-in tax engine (DESIGN §15) as a table: which of the rates set apply to a buyer, by
 * the rate's country and region against the buyer's address. A rate with a country (or region)
 * applies only to a buyer known to be there: not to one of another, nor to one whose address (or
 * state) is unknown. A rate without a country applies to every buyer.
 */
import test from "ava";
import { BuiltInTaxProvider } from "../../src/billing/taxes/built-in.js";
import type { BillingDetails, TaxRate } from "../../src/billing/taxes/types.js";

const rate = (id: string, country: string | null, region: string | null = null): TaxRate => ({
  id,
  environmentId: "env_1",
  displayName: id,
  percentage: "10",
  inclusive: false,
  country,
  region,
  description: null,
  archived: false,
  createdAt: new Date(0),
  metadata: {},
});

const RATES = [rate("any", null), rate("de", "DE"), rate("fr", "FR"), rate("us", "US"), rate("tx", "US", "TX"), rate("ny", "US", "NY")];
const engine = new BuiltInTaxProvider(async (_env, ids) => RATES.filter((r) => ids.includes(r.id)));

const buyer = (address: { country: string; state?: string } | null): BillingDetails => ({
  legalName: null,
  email: null,
  address: address && { line1: null, line2: null, city: null, postalCode: null, state: address.state ?? null, country: address.country },
  taxIds: [],
  taxExempt: "none",
  taxRateIds: [],
});

/** [case, the buyer (null: no billing details), the rates that apply of the card's any, de, fr, us, tx, ny]. */
const CASES: [string, BillingDetails | null, string[]][] = [
  ["no billing details: only the rate of no country", null, ["any"]],
  ["billing details without an address: likewise", buyer(null), ["any"]],
  ["a buyer in DE: DE's, not FR's nor the US's", buyer({ country: "DE" }), ["any", "de"]],
  ["a buyer in the US without a state: the country's, no state's", buyer({ country: "US" }), ["any", "us"]],
  ["a buyer in TX: the country's and TX's, not NY's", buyer({ country: "US", state: "TX" }), ["any", "us", "tx"]],
  ["a buyer in a state of another country: no US region's", buyer({ country: "CA", state: "TX" }), ["any"]],
];

for (const [title, customer, want] of CASES) {
  test(`built-in tax rates: ${title}`, async (t) => {
    const answer = await engine.taxesFor({
      environmentId: "env_1",
      subjectId: "sub_1",
      currency: "USD",
      customer,
      cardTaxRateIds: RATES.map((r) => r.id),
      lines: [{ rateCode: null, amount: "1000" }],
    });
    t.deepEqual(
      answer.ratesPerLine.map((rs) => rs.map((r) => r.id)),
      [want],
    );
  });
}

/** [case, the buyer's own rates, each line's card's rates (undefined: the invoice's card's: any, de), the rates that apply per line], for a buyer in DE. */
const PER_LINE: [string, string[], (string[] | undefined)[], string[][]][] = [
  [
    "lines of the invoice's card",
    [],
    [undefined, undefined],
    [
      ["any", "de"],
      ["any", "de"],
    ],
  ],
  ["a line of another card (late usage of a card left by a change): that card's", [], [undefined, ["fr", "any"]], [["any", "de"], ["any"]]],
  ["a line of another card without rates: none", [], [[], undefined], [[], ["any", "de"]]],
  ["the buyer's own rates: on every line, whichever card priced it", ["de"], [undefined, ["any"]], [["de"], ["de"]]],
];

for (const [title, own, cards, want] of PER_LINE) {
  test(`built-in tax rates per line: ${title}`, async (t) => {
    const answer = await engine.taxesFor({
      environmentId: "env_1",
      subjectId: "sub_1",
      currency: "USD",
      customer: { ...buyer({ country: "DE" }), taxRateIds: own },
      cardTaxRateIds: ["any", "de"],
      lines: cards.map((c) => ({ rateCode: null, amount: "1000", ...(c ? { cardTaxRateIds: c } : {}) })),
    });
    t.deepEqual(
      answer.ratesPerLine.map((rs) => rs.map((r) => r.id)),
      want,
    );
  });
}
