/**
 * Request text must be Unicode, the same on REST and Connect: a JSON body that is not valid UTF-8
 * is a 400 `invalid_argument` (reason INVALID_UTF8), never read with U+FFFD in place of the bad
 * bytes; a JSON string escaping a lone UTF-16 surrogate (`"\ud800"`) is a 400 naming the field;
 * a query-string value whose percent-encoding is not UTF-8 is a 400 naming the parameter. None
 * of them writes anything.
 */
import test from "ava";
import { reasonOf, rest, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";

/** Bytes sent as they are, with a JSON content type. */
async function post(url: string, key: string, body: Uint8Array | string) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key },
    body: typeof body === "string" ? body : (new Uint8Array(body).buffer as ArrayBuffer),
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) };
}

const utf8 = (s: string) => new Uint8Array(Buffer.from(s, "utf8"));
const concat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

/** Bodies that are not UTF-8: a lone continuation byte, an overlong "/", a CESU-8 surrogate, a truncated sequence. */
const NOT_UTF8: [string, Uint8Array][] = [
  ["a lone 0xFF byte in a string", concat(utf8('{"name": "Ada'), new Uint8Array([0xff]), utf8('"}'))],
  ["an overlong encoding", concat(utf8('{"name": "a'), new Uint8Array([0xc0, 0xaf]), utf8('"}'))],
  ["an encoded surrogate (CESU-8)", concat(utf8('{"name": "a'), new Uint8Array([0xed, 0xa0, 0x80]), utf8('"}'))],
  ["a truncated sequence in a map key", concat(utf8('{"name": "a", "metadata": {"k'), new Uint8Array([0xe2, 0x82]), utf8('": "v"}}'))],
];

for (const store of STORES) {
  const server = useServer(store);

  const count = async (key: string) => (await rest(server.url, "GET", "/subjects?limit=100", key)).body.subjects.length;

  for (const [title, body] of NOT_UTF8) {
    test(`${store}: ${title} is a 400 invalid_argument on REST and Connect, and writes nothing`, async (t) => {
      const key = await server.freshKey();
      const r = await post(`${server.url}/subjects`, key, body);
      t.is(r.status, 400, JSON.stringify(r.body));
      t.is(r.body.code, "invalid_argument");
      t.is(r.body.message, "the request body is not valid UTF-8");
      t.is(reasonOf(r.body), "INVALID_UTF8");

      const c = await post(`${server.url}/billing.v1.SubjectService/CreateSubject`, key, body);
      t.is(c.status, 400, JSON.stringify(c.body));
      t.is(c.body.code, "invalid_argument");
      t.is(c.body.message, "the request body is not valid UTF-8");
      t.is(await count(key), 0);
    });
  }

  test(`${store}: a body that is not UTF-8 is refused too on a method whose input holds a Timestamp (read before the method)`, async (t) => {
    const key = await server.freshKey();
    const body = concat(utf8('{"name": "a'), new Uint8Array([0xff]), utf8('b", "frozen_time": "2026-01-01T00:00:00Z"}'));
    for (const path of ["/test-clocks", "/billing.v1.TestClockService/CreateTestClock"]) {
      const r = await post(`${server.url}${path}`, key, body);
      t.is(r.status, 400, `${path}: ${JSON.stringify(r.body)}`);
      t.is(r.body.message, "the request body is not valid UTF-8", path);
    }
  });

  test(`${store}: valid UTF-8 beyond ASCII (and a surrogate pair escaped) is read as sent`, async (t) => {
    const key = await server.freshKey();
    const r = await post(`${server.url}/subjects`, key, utf8('{"name": "Zoë 😀 \\ud83d\\ude00", "external_id": "ü"}'));
    t.is(r.status, 200);
    t.is(r.body.name, "Zoë 😀 😀");
    const c = await post(`${server.url}/billing.v1.SubjectService/CreateSubject`, key, utf8('{"name": "Zoë \\ud83d\\ude00", "external_id": "ö"}'));
    t.is(c.status, 200);
    t.is(c.body.subject.name, "Zoë 😀");
  });

  const surrogates: [string, string, string][] = [
    ["external_id", '{"name": "a", "external_id": "user_\\ud800"}', "external_id"],
    ["name (low half)", '{"name": "a\\udc00b"}', "name"],
    ["a metadata value", '{"name": "a", "metadata": {"k": "\\uD800"}}', "metadata.k"],
  ];
  for (const [title, body, field] of surrogates) {
    test(`${store}: a lone surrogate in ${title} is a 400 naming ${field} on REST and Connect, and writes nothing`, async (t) => {
      const key = await server.freshKey();
      const r = await post(`${server.url}/subjects`, key, body);
      t.is(r.status, 400, JSON.stringify(r.body));
      t.is(r.body.code, "invalid_argument");
      t.deepEqual(violatedFields(r.body), [field]);
      const c = await post(`${server.url}/billing.v1.SubjectService/CreateSubject`, key, body);
      t.is(c.status, 400, JSON.stringify(c.body));
      t.is(c.body.code, "invalid_argument");
      t.regex(c.body.message, new RegExp(`^${field.replace(".", "\\.")}: must be valid Unicode`));
      t.is(await count(key), 0);
    });
  }

  test(`${store}: a lone surrogate in an ID looked up over Connect is a 400 naming subject_id, not a 404 or 500`, async (t) => {
    const key = await server.freshKey();
    const c = await post(`${server.url}/billing.v1.SubjectService/GetSubject`, key, '{"subject_id": "subj_\\ud800"}');
    t.is(c.status, 400, JSON.stringify(c.body));
    t.regex(c.body.message, /^subject_id: /);
  });

  test(`${store}: a query-string value that is not UTF-8 is a 400 naming the parameter`, async (t) => {
    const key = await server.freshKey();
    const r = await rest(server.url, "GET", "/subjects/search?query=%FFada", key);
    t.is(r.status, 400, JSON.stringify(r.body));
    t.deepEqual(violatedFields(r.body), ["query"]);
    // An unknown parameter is still ignored, whatever it holds.
    t.is((await rest(server.url, "GET", "/subjects?limit=5&utm=%FF", key)).status, 200);
  });
}
