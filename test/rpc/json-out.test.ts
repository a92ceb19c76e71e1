/** The JSON response writer (src/rpc/json-out.ts): nulls for unset optional fields, REST numbers. */
import { type DescMessage, type JsonObject, create, toJson } from "@bufbuild/protobuf";
import test from "ava";
import { InvoiceSchema } from "../../src/gen/billing/v1/invoice_pb.js";
import { SubjectSchema } from "../../src/gen/billing/v1/subject_pb.js";
import { nullsEncoder, restJson, stringifyRest, withNulls } from "../../src/rpc/json-out.js";

const J = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;
// biome-ignore lint: test helper
const proto = (desc: DescMessage, m: any) => toJson(desc, m, J) as JsonObject;

test("an unset optional field is null, in field order; a set one is kept", (t) => {
  const s = create(SubjectSchema, { id: "subj_1", name: "Ada", metadata: {} });
  const json = withNulls(SubjectSchema, proto(SubjectSchema, s));
  t.deepEqual(Object.keys(json), ["id", "created_at", "email", "external_id", "metadata", "name", "test_clock_id", "has_payment_method"]);
  t.deepEqual([json.created_at, json.email, json.name, json.test_clock_id], [null, null, "Ada", null]);
  t.is(create(SubjectSchema, { email: "" }).email, "", "an empty string set stays set (the converters never set one)");
});

test("nested messages and lists get their nulls; REST writes a line quantity as a number with its exact digits", (t) => {
  const inv = create(InvoiceSchema, {
    id: "inv_1",
    lineItems: [
      { description: "a", quantity: "12345678901234567890.123456789012", amount: { currencyCode: "USD", value: "1" } },
      { description: "b", quantity: ".5" },
    ],
  });
  const out = restJson(InvoiceSchema, proto(InvoiceSchema, inv));
  t.true(out.rawNumbers);
  const text = stringifyRest(out.json, out.rawNumbers);
  t.regex(text, /"quantity":12345678901234567890\.123456789012,/);
  t.regex(text, /"quantity":0\.5,/, "a text that is no JSON number is written canonically");
  t.regex(text, /"price_in_unit_amount":null/);
  t.regex(text, /"created_at":null/);
  // Proto3 JSON (Connect) keeps the quantity a string, with the same nulls.
  const connect = JSON.parse(new TextDecoder().decode(nullsEncoder(InvoiceSchema).encode(JSON.stringify(proto(InvoiceSchema, inv)))));
  t.is(connect.line_items[0].quantity, "12345678901234567890.123456789012");
  t.is(connect.line_items[0].price_in_unit_amount, null);
  t.is(connect.total_amount, null);
});

test("a body without raw numbers is written by JSON.stringify", (t) => {
  const out = restJson(SubjectSchema, proto(SubjectSchema, create(SubjectSchema, { id: "x" })));
  t.false(out.rawNumbers);
  t.is(stringifyRest(out.json, false), JSON.stringify(out.json));
});
