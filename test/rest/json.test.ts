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
