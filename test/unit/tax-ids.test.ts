/**
 * Tax IDs (DESIGN §15), as a table: each type's good and bad values, normalization (spaces and
 * dots removed, upper-cased), the ABN checksum; and billing details' checks with their paths.
 */
import test from "ava";
import { Violations } from "../../src/billing/errors.js";
import { COUNTRIES, isCountry } from "../../src/billing/taxes/countries.js";
import { checkBillingDetails } from "../../src/billing/taxes/details.js";
import { normalizeTaxId, taxIdProblem } from "../../src/billing/taxes/tax-ids.js";

/** [type, value as written, good?] */
const CASES: [string, string, boolean][] = [
  ["eu_vat", "ATU12345678", true],
  ["eu_vat", "AT12345678", false],
  ["eu_vat", "BE0123456789", true],
  ["eu_vat", "BE2123456789", false],
  ["eu_vat", "de 123 456 789", true],
  ["eu_vat", "DE12345678", false],
  ["eu_vat", "DE1234567890", false],
  ["eu_vat", "DK12345678", true],
  ["eu_vat", "ESX1234567X", true],
  ["eu_vat", "ES12345678", false],
  ["eu_vat", "FI12345678", true],
  ["eu_vat", "FRXX123456789", true],
  ["eu_vat", "FR12345678901", true],
  ["eu_vat", "FR1234567890", false],
  ["eu_vat", "IE1234567T", true],
  ["eu_vat", "IE1234567WH", true],
  ["eu_vat", "IE1S12345L", true],
  ["eu_vat", "IE12345678", false],
  ["eu_vat", "IT12345678901", true],
  ["eu_vat", "IT1234567890", false],
  ["eu_vat", "NL123456789B01", true],
  ["eu_vat", "nl.123.456.789.b01", true],
  ["eu_vat", "NL123456789", false],
  ["eu_vat", "PL1234567890", true],
  ["eu_vat", "PT123456789", true],
  ["eu_vat", "PT12345678", false],
  ["eu_vat", "SE123456789001", true],
  ["eu_vat", "SE123456789012", false],
  ["eu_vat", "EL123456789", true],
  ["eu_vat", "GR123456789", false],
  ["eu_vat", "CZ12345678", true],
  ["eu_vat", "HU12345678", true],
  ["eu_vat", "RO1234", true],
  ["eu_vat", "XI123456789", true],
  ["eu_vat", "GB123456789", false],
  ["eu_vat", "US123456789", false],
  ["eu_vat", "", false],
  ["gb_vat", "GB123456789", true],
  ["gb_vat", "GB 123 4567 89 012", true],
  ["gb_vat", "GBGD123", true],
  ["gb_vat", "GBHA123", true],
  ["gb_vat", "GB12345678", false],
  ["gb_vat", "123456789", false],
  ["us_ein", "12-3456789", true],
  ["us_ein", "123456789", false],
  ["us_ein", "12-345678", false],
  ["au_abn", "51 824 753 556", true],
  ["au_abn", "51824753557", false],
  ["au_abn", "5182475355", false],
  ["ch_vat", "CHE-123.456.789 MWST", true],
  ["ch_vat", "CHE123456789", true],
  ["ch_vat", "CHE-123.456.78", false],
  ["no_vat", "123456789MVA", true],
  ["no_vat", "NO 123 456 789 MVA", true],
  ["no_vat", "12345678MVA", false],
  ["ca_bn", "123456789", true],
  ["ca_bn", "123456789RT0001", true],
  ["ca_bn", "12345678", false],
  ["in_gst", "22AAAAA0000A1Z5", true],
  ["in_gst", "22AAAAA0000A1Y5", false],
  ["other", "anything at all", true],
  ["other", "x".repeat(64), true],
  ["other", "x".repeat(65), false],
  ["other", " ", false],
];

for (const [type, written, good] of CASES) {
  test(`${type} ${JSON.stringify(written)} is ${good ? "accepted" : "refused"}`, (t) => {
    const problem = taxIdProblem(type, normalizeTaxId(written));
    if (good) t.is(problem, undefined);
    else t.is(typeof problem, "string");
  });
}

test("normalized: spaces (any white space) and dots removed, upper-cased", (t) => {
  t.is(normalizeTaxId(" de 123.456\t789 "), "DE123456789");
  t.is(normalizeTaxId("che-123.456.789 mwst"), "CHE-123456789MWST");
});

test("an unknown type has no problem of its own (billing details name the type instead)", (t) => {
  t.is(taxIdProblem("vat", "1"), undefined);
});

test("countries: the 249 ISO 3166-1 alpha-2 codes, any case", (t) => {
  t.is(COUNTRIES.size, 249);
  t.true(isCountry("de"));
  t.true(isCountry("GB"));
  t.false(isCountry("UK"));
  t.false(isCountry("EU"));
  t.false(isCountry("D"));
});

test("billing details: normalized, defaults filled in, every violation named by its path", (t) => {
  const v = new Violations("billing_details");
  const ok = checkBillingDetails({ address: { country: "fr", state: "idf" }, taxIds: [{ type: "eu_vat", value: "fr 12 345678901" }], taxExempt: "", taxRateIds: [] }, v);
  t.true(v.empty);
  t.deepEqual(ok, {
    legalName: null,
    email: null,
    address: { line1: null, line2: null, city: null, postalCode: null, state: "IDF", country: "FR" },
    taxIds: [{ type: "eu_vat", value: "FR12345678901" }],
    taxExempt: "none",
    taxRateIds: [],
  });
  const bad = new Violations("billing_details");
  checkBillingDetails(
    {
      email: "x",
      address: { country: "" },
      taxIds: [
        { type: "other", value: "" },
        { type: "nope", value: "1" },
      ],
      taxExempt: "sometimes",
      taxRateIds: [],
    },
    bad,
  );
  t.throws(() => bad.throwIfAny(), {
    message:
      "billing_details.tax_ids[0].value: is required; billing_details.tax_ids[1].type: must be one of eu_vat, gb_vat, us_ein, au_abn, ch_vat, no_vat, ca_bn, in_gst, other; billing_details.tax_exempt: must be one of none, exempt, reverse; billing_details.email: must be a valid email address; billing_details.address.country: is required",
  });
});
