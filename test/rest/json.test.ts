/** The REST bridge's JSON checks, table-driven over the contract's own messages. */
import test from "ava";
import { CreateSubjectRequestSchema, ListSubjectsRequestSchema, UpdateSubjectRequestSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { checkJson, findField, fromText, parseJson } from "../../src/rest/json.js";

const cases: [string, typeof CreateSubjectRequestSchema | typeof UpdateSubjectRequestSchema, string, Record<string, unknown> | string[]][] = [
  ["plain fields pass", CreateSubjectRequestSchema, '{"name":"a","email":"b@c.de"}', { name: "a", email: "b@c.de" }],
  ["camelCase names are read too", CreateSubjectRequestSchema, '{"externalId":"x"}', { external_id: "x" }],
  ["unknown fields are dropped", CreateSubjectRequestSchema, '{"name":"a","zzz":1}', { name: "a" }],
  ["null means not set", CreateSubjectRequestSchema, '{"name":null}', {}],
  ["a number for a string", CreateSubjectRequestSchema, '{"name":1}', ["name"]],
  ["a bool for a string", CreateSubjectRequestSchema, '{"email":true}', ["email"]],
  ["an array for a map", CreateSubjectRequestSchema, '{"metadata":[]}', ["metadata"]],
  ["a non-string map value", CreateSubjectRequestSchema, '{"metadata":{"a":"x","b":2}}', ["metadata.b"]],
  ["a null map value", CreateSubjectRequestSchema, '{"metadata":{"a":null}}', ["metadata.a"]],
  ["several errors at once", CreateSubjectRequestSchema, '{"name":1,"email":2}', ["name", "email"]],
  ["Struct keeps numbers as JSON numbers", UpdateSubjectRequestSchema, '{"metadata":{"a":1.5}}', { metadata: { a: 1.5 } }],
  ["Struct must be an object", UpdateSubjectRequestSchema, '{"metadata":"x"}', ["metadata"]],
];
for (const [title, schema, text, expected] of cases) {
  test(title, (t) => {
    const { json, violations } = checkJson(schema, parseJson(text));
    if (Array.isArray(expected)) t.deepEqual(violations.map((v) => v.field), expected);
    else {
      t.deepEqual(violations, []);
      t.deepEqual(json, expected);
    }
  });
}

test("a body that is not an object is one violation on the body", (t) => {
  for (const text of ["[]", '"x"', "1", "true"]) {
    t.deepEqual(checkJson(CreateSubjectRequestSchema, parseJson(text)).violations.map((v) => v.field), [""]);
  }
});

test("malformed JSON throws", (t) => {
  t.throws(() => parseJson('{"a":'));
});

const queryCases: [string, string, number | undefined, boolean][] = [
  ["limit", "10", 10, true],
  ["limit", "-3", -3, true],
  ["limit", "abc", undefined, false],
  ["limit", "1.5", undefined, false],
  ["limit", "", undefined, false],
  ["limit", "3000000000", undefined, false],
];
for (const [name, raw, value, ok] of queryCases) {
  test(`query ${name}=${raw}`, (t) => {
    const field = findField(ListSubjectsRequestSchema, name);
    if (!field) return t.fail();
    const violations: { field: string; description: string }[] = [];
    t.is(fromText(field, raw, name, violations), value);
    t.is(violations.length === 0, ok);
  });
}

/** parseJson's result with each number shown as N:<literal>, to compare as plain JSON. */
const shown = (text: string) => JSON.parse(JSON.stringify(parseJson(text), (_k, v) => (v && typeof v === "object" && v.constructor?.name === "NumberLiteral" ? `N:${v.text}` : v)));

const parseCases: [string, unknown][] = [
  ['{"a": 12345678901234567890.123456789012}', { a: "N:12345678901234567890.123456789012" }],
  ['[0, -0, 1e400, -2.5E-3, 10]', ["N:0", "N:-0", "N:1e400", "N:-2.5E-3", "N:10"]],
  ['{"s": "12, 3.5 and -7", "t": "a \\"quoted 1\\" b", "u": "ends with a backslash \\\\", "v": 4}', { s: "12, 3.5 and -7", t: 'a "quoted 1" b', u: "ends with a backslash \\", v: "N:4" }],
  ['{"k1": {"k2": [true, null, "x", 3]}}', { k1: { k2: [true, null, "x", "N:3"] } }],
  ['{"\\u0000#": "5"}', "N:5"], // the wrapper's own shape, written by a client: that number
  ['{"\\u0000#": "abc"}', { "\u0000#": "abc" }], // not a number: left as it is
  ['{"a": 1, "a": 2}', { a: "N:2" }], // duplicate keys: the last wins, as with JSON.parse
];
for (const [text, expected] of parseCases) {
  test(`parseJson keeps every number's literal: ${text}`, (t) => {
    t.deepEqual(shown(text), expected);
  });
}

for (const bad of ['{"a":01}', '{"a": 1.}', '{"a": .5}', '{"a": +1}', '{"a":', '{"a": "b}', '{"a": 1} x', "", '{"a": 0x10}', '{"a": NaN}']) {
  test(`parseJson refuses malformed JSON: ${JSON.stringify(bad)}`, (t) => {
    const err = t.throws(() => parseJson(bad));
    t.is(err?.constructor.name, "JsonSyntaxError");
  });
}
