/** The REST bridge's JSON checks, table-driven over the contract's own messages. */
import { equals, fromJson } from "@bufbuild/protobuf";
import test from "ava";
import { CreateSubjectRequestSchema, ListSubjectsRequestSchema, UpdateSubjectRequestSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { CreateUsageEventBatchRequestSchema, CreateUsageEventRequestSchema } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { checkJson, findField, fromText, readJsonMessage } from "../../src/rpc/json.js";
import { parseJson } from "../../src/rpc/json-parse.js";
import { InvalidArgumentError } from "../../src/billing/errors.js";
import { fastRequestReaders } from "../../src/rpc/convert/usage.js";

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
  ["update metadata is a map of strings", UpdateSubjectRequestSchema, '{"metadata":{"a":1.5}}', ["metadata.a"]],
  ["update metadata must be an object", UpdateSubjectRequestSchema, '{"metadata":"x"}', ["metadata"]],
  [
    "a left-out update_mask is the body's keys, a null one named but not set (cleared)",
    UpdateSubjectRequestSchema,
    '{"metadata":{},"name":"n","email":null}',
    { metadata: {}, name: "n", update_mask: "metadata,name,email" },
  ],
  ["a null update_mask is left out: the body's keys", UpdateSubjectRequestSchema, '{"update_mask":null,"name":null,"unknown":null}', { update_mask: "name" }],
  ["an update_mask given is kept (snake_case read as camelCase)", UpdateSubjectRequestSchema, '{"name":"n","update_mask":"name,external_id"}', { name: "n", update_mask: "name,externalId" }],
  ["an update_mask must be a string of names", UpdateSubjectRequestSchema, '{"update_mask":["name"]}', ["update_mask"]],
  ["an update_mask path must be a name", UpdateSubjectRequestSchema, '{"update_mask":"name,Bad-Path"}', ["update_mask"]],
];
for (const [title, schema, text, expected] of cases) {
  test(title, (t) => {
    const { json, violations } = checkJson(schema, parseJson(text));
    if (Array.isArray(expected))
      t.deepEqual(
        violations.map((v) => v.field),
        expected,
      );
    else {
      t.deepEqual(violations, []);
      t.deepEqual(json, expected);
    }
  });
}

test("a body that is not an object is one violation on the body", (t) => {
  for (const text of ["[]", '"x"', "1", "true"]) {
    t.deepEqual(
      checkJson(CreateSubjectRequestSchema, parseJson(text)).violations.map((v) => v.field),
      [""],
    );
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
  ["[0, -0, 1e400, -2.5E-3, 10]", ["N:0", "N:-0", "N:1e400", "N:-2.5E-3", "N:10"]],
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

test("a usage event's timestamp that does not read is left out and deferred to its event, with the parser's words", (t) => {
  const batch = checkJson(
    CreateUsageEventBatchRequestSchema,
    parseJson('{"events":[{"event_name":"a","timestamp":"2026-01-31T12:00:00+02:00"},{"event_name":"b","timestamp":"2026-02-30T00:00:00Z"}]}'),
  );
  t.deepEqual(batch.violations, []);
  t.deepEqual(batch.json, { events: [{ event_name: "a", timestamp: "2026-01-31T10:00:00.000Z" }, { event_name: "b" }] });
  t.deepEqual(
    batch.deferred.map((d) => d.field),
    ["events[1].timestamp"],
  );
  t.regex(batch.deferred[0]?.description ?? "", /2026-02-30 is not a calendar date/);
  // Not a string: a wrong JSON type, refused with the request like any other.
  t.deepEqual(
    checkJson(CreateUsageEventRequestSchema, parseJson('{"timestamp":5}')).violations.map((v) => v.field),
    ["timestamp"],
  );
});

test("readJsonMessage: bytes that are not UTF-8, malformed JSON and an empty body", (t) => {
  const notUtf8 = t.throws(() => readJsonMessage(CreateSubjectRequestSchema, new Uint8Array([0x7b, 0xff, 0x7d])));
  t.true(notUtf8 instanceof InvalidArgumentError);
  t.is((notUtf8 as InvalidArgumentError).reason, "INVALID_UTF8");
  const malformed = t.throws(() => readJsonMessage(CreateSubjectRequestSchema, new TextEncoder().encode('{"name":')));
  t.is((malformed as InvalidArgumentError).reason, "MALFORMED_JSON");
  t.deepEqual(
    (malformed as InvalidArgumentError).violations.map((v) => v.field),
    [""],
  );
  t.deepEqual(readJsonMessage(CreateSubjectRequestSchema, new Uint8Array()).json, {});
});

/**
 * The ingest bodies' fast readers (rpc/convert/usage.ts) must give exactly the message the general
 * way gives (checkJson, then fromJson) for a body they take, and must leave every other body (one
 * the general way rejects, defers or reads differently) to it.
 */
const ev = (extra: Record<string, unknown> = {}) => ({
  idempotency_key: "k",
  subject_id: "s",
  event_name: "api",
  data: { n: "1.5", region: "eu" },
  timestamp: "2026-03-01T10:00:00.123+02:00",
  ...extra,
});
const fastCases: [string, typeof CreateUsageEventRequestSchema | typeof CreateUsageEventBatchRequestSchema, string, "taken" | "left"][] = [
  ["a plain event", CreateUsageEventRequestSchema, JSON.stringify(ev()), "taken"],
  ["camelCase names, no timestamp, empty data", CreateUsageEventRequestSchema, '{"idempotencyKey":"k","subjectId":"s","eventName":"e","data":{}}', "taken"],
  ["a duplicate key: the last wins", CreateUsageEventRequestSchema, '{"subject_id":"a","subjectId":"b","event_name":"e"}', "taken"],
  ["a time out of range (before 2000)", CreateUsageEventRequestSchema, JSON.stringify(ev({ timestamp: "1999-12-31T23:59:59.999Z" })), "left"],
  ["a plain batch", CreateUsageEventBatchRequestSchema, JSON.stringify({ events: [ev(), ev({ idempotency_key: "k2", data: { 'a"b': "x\\y\u2028" } })] }), "taken"],
  ["an empty batch", CreateUsageEventBatchRequestSchema, '{"events":[]}', "taken"],
  ["a number in data", CreateUsageEventRequestSchema, JSON.stringify(ev()).replace('"1.5"', "1.5"), "left"],
  ["a null field", CreateUsageEventRequestSchema, JSON.stringify(ev({ event_name: null })), "left"],
  ["an unknown field", CreateUsageEventRequestSchema, JSON.stringify(ev({ zzz: "1" })), "left"],
  ["a timestamp that does not read", CreateUsageEventRequestSchema, JSON.stringify(ev({ timestamp: "2026-02-30T00:00:00Z" })), "left"],
  ["a lone surrogate", CreateUsageEventRequestSchema, JSON.stringify(ev({ subject_id: "\ud800" })), "left"],
  ["a __proto__ key in data", CreateUsageEventRequestSchema, '{"event_name":"e","data":{"__proto__":"x"}}', "left"],
  ["a batch with one bad event", CreateUsageEventBatchRequestSchema, JSON.stringify({ events: [ev(), ev({ data: [] })] }), "left"],
  ["a batch that is no list", CreateUsageEventBatchRequestSchema, '{"events":{}}', "left"],
];
for (const [title, schema, text, expected] of fastCases) {
  test(`fast reader: ${title}`, (t) => {
    const fast = fastRequestReaders.get(schema.typeName);
    if (!fast) return t.fail("no fast reader");
    const message = fast(parseJson(text));
    if (expected === "left") return t.is(message, undefined);
    const checked = checkJson(schema, parseJson(text));
    t.deepEqual(checked.violations, []);
    t.deepEqual(checked.deferred, []);
    t.truthy(message);
    t.true(equals(schema, message as never, fromJson(schema, checked.json)), JSON.stringify(checked.json));
  });
}
