/** The JSON response writer (src/rpc/json-out.ts): nulls for unset optional fields, always-set fields never null, REST numbers. */
import { type DescMessage, type JsonObject, create, toJson } from "@bufbuild/protobuf";
import test from "ava";
import { InvoiceSchema } from "../../src/gen/billing/v1/invoice_pb.js";
import { SubjectSchema } from "../../src/gen/billing/v1/subject_pb.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { nullsEncoder, restJson, stringifyRest, withNulls } from "../../src/rpc/json-out.js";

const J = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;
// biome-ignore lint: test helper
const proto = (desc: DescMessage, m: any) => toJson(desc, m, J) as JsonObject;
const at = timestampFromDate(new Date("2026-01-01T00:00:00Z"));
const usd = (value: string) => ({ currencyCode: "USD", value });

test("an unset optional field is null, in field order; a set one is kept", (t) => {
  const s = create(SubjectSchema, { id: "subj_1", name: "Ada", metadata: {}, createdAt: at });
  const json = withNulls(SubjectSchema, proto(SubjectSchema, s));
  t.deepEqual(Object.keys(json), ["id", "created_at", "email", "external_id", "metadata", "name", "test_clock_id", "has_payment_method", "billing_details"]);
  t.deepEqual([json.created_at, json.email, json.name, json.test_clock_id], ["2026-01-01T00:00:00Z", null, "Ada", null]);
  t.is(create(SubjectSchema, { email: "" }).email, "", "an empty string set stays set (the converters never set one)");
});

test("nested messages and lists get their nulls; REST writes a line quantity as a number with its exact digits", (t) => {
  const inv = create(InvoiceSchema, {
    id: "inv_1",
    createdAt: at,
    periodStart: at,
    periodEnd: at,
    totalAmount: usd("1"),
    amountDue: usd("1"),
    // DESIGN §15: the booked totals are always set like the total.
    subtotal: usd("1"),
    totalDiscount: usd("0"),
    totalTax: usd("0"),
    amountCredited: usd("0"),
    // Amounts below the provider's minimum charge carried out of and into the invoice (payments/carries.ts).
    amountCarried: usd("0"),
    amountCarriedIn: usd("0"),
    lineItems: [
      { description: "a", quantity: "12345678901234567890.123456789012", amount: usd("1"), priceInUnitAmount: usd("1") },
      { description: "b", quantity: ".5", amount: usd("0"), priceInUnitAmount: usd("0") },
    ],
  });
  const out = restJson(InvoiceSchema, proto(InvoiceSchema, inv));
  t.true(out.rawNumbers);
  const text = stringifyRest(out.json, out.rawNumbers);
  t.regex(text, /"quantity":12345678901234567890\.123456789012,/);
  t.regex(text, /"quantity":0\.5,/, "a text that is no JSON number is written canonically");
  t.regex(text, /"finalized_at":null/);
  t.regex(text, /"usage_period_start":null/);
  // Proto3 JSON (Connect) keeps the quantity a string, with the same nulls.
  const connect = JSON.parse(new TextDecoder().decode(nullsEncoder(InvoiceSchema).encode(JSON.stringify(proto(InvoiceSchema, inv)))));
  t.is(connect.line_items[0].quantity, "12345678901234567890.123456789012");
  t.is(connect.finalizes_at, null);
  t.deepEqual(connect.total_amount, { currency_code: "USD", value: "1" });
});

test("a field marked (billing.v1.always_set) is never written as null: a response that leaves it out is refused", (t) => {
  const subject = proto(SubjectSchema, create(SubjectSchema, { id: "subj_1" }));
  t.throws(() => restJson(SubjectSchema, subject), { message: /billing\.v1\.Subject\.created_at is always set/ });
  t.throws(() => withNulls(SubjectSchema, subject), { message: /created_at/ });
  t.throws(() => nullsEncoder(SubjectSchema).encode(JSON.stringify(subject)), { message: /created_at/ });
  // At any depth: a line item without its amount.
  const inv = create(InvoiceSchema, {
    id: "inv_1",
    createdAt: at,
    periodStart: at,
    periodEnd: at,
    totalAmount: usd("1"),
    amountDue: usd("1"),
    subtotal: usd("1"),
    totalDiscount: usd("0"),
    totalTax: usd("0"),
    amountCredited: usd("0"),
    lineItems: [{ description: "a", quantity: "1", priceInUnitAmount: usd("1") }],
  });
  t.throws(() => restJson(InvoiceSchema, proto(InvoiceSchema, inv)), { message: /billing\.v1\.InvoiceLineItem\.amount is always set/ });
});

test("a body without raw numbers is written by JSON.stringify", (t) => {
  const out = restJson(SubjectSchema, proto(SubjectSchema, create(SubjectSchema, { id: "x", createdAt: at })));
  t.false(out.rawNumbers);
  t.is(stringifyRest(out.json, false), JSON.stringify(out.json));
});
