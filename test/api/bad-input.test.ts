/**
 * Bad input over REST (where JSON and query strings are parsed) and over RPC: each gets a 400
 * naming the field, and writes nothing. No input produces a 500.
 */
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { PROTOCOLS, reasonOf, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";

for (const store of STORES) {
  const server = useServer(store);

  /** Number of subjects in a fresh environment's listing, to prove nothing was written. */
  const count = async (key: string) => (await rest(server.url, "GET", "/subjects?limit=100", key)).body.subjects.length;

  const cases: { title: string; method: string; path: string; body?: unknown; fields: string[]; reason?: string }[] = [
    { title: "malformed JSON", method: "POST", path: "/subjects", body: '{"name": "x",', fields: [""], reason: "MALFORMED_JSON" },
    { title: "a JSON array body", method: "POST", path: "/subjects", body: "[1,2]", fields: [""] },
    { title: "a wrong JSON type (number for name)", method: "POST", path: "/subjects", body: { name: 42 }, fields: ["name"] },
    { title: "a wrong JSON type (string for metadata)", method: "POST", path: "/subjects", body: { metadata: "x" }, fields: ["metadata"] },
    { title: "a non-string metadata value", method: "POST", path: "/subjects", body: { metadata: { a: 1 } }, fields: ["metadata.a"] },
    { title: "an invalid email", method: "POST", path: "/subjects", body: { email: "not-an-email" }, fields: ["email"] },
    { title: "an email without a domain dot", method: "POST", path: "/subjects", body: { email: "a@b" }, fields: ["email"] },
    { title: "an empty external_id", method: "POST", path: "/subjects", body: { external_id: "" }, fields: ["external_id"] },
    { title: "an over-long name", method: "POST", path: "/subjects", body: { name: "x".repeat(256) }, fields: ["name"] },
    { title: "a lone UTF-16 surrogate in a string", method: "POST", path: "/subjects", body: '{"name": "a\\ud800b"}', fields: ["name"] },
    { title: "a lone UTF-16 surrogate in a map key", method: "POST", path: "/subjects", body: '{"metadata": {"k\\udc00": "v"}}', fields: ["metadata.k\\udc00"] },
    { title: "several problems at once", method: "POST", path: "/subjects", body: { email: "nope", external_id: "" }, fields: ["email", "external_id"] },
    { title: "limit 0", method: "GET", path: "/subjects?limit=0", fields: ["limit"] },
    { title: "limit 101", method: "GET", path: "/subjects?limit=101", fields: ["limit"] },
    { title: "limit abc", method: "GET", path: "/subjects?limit=abc", fields: ["limit"] },
    { title: "limit 1.5", method: "GET", path: "/subjects?limit=1.5", fields: ["limit"] },
    { title: "limit beyond int32", method: "GET", path: "/subjects?limit=99999999999", fields: ["limit"] },
    { title: "offset -1", method: "GET", path: "/subjects?offset=-1", fields: ["offset"] },
    { title: "search without query", method: "GET", path: "/subjects/search", fields: ["query"] },
    { title: "search with an empty query", method: "GET", path: "/subjects/search?query=", fields: ["query"] },
    { title: "search with a bad limit", method: "GET", path: "/subjects/search?query=a&limit=0", fields: ["limit"] },
    { title: "update with an invalid email", method: "PUT", path: "/subjects/whatever", body: { email: "x@" }, fields: ["email"] },
    { title: "update with a lone surrogate in metadata", method: "PUT", path: "/subjects/whatever", body: '{"metadata": {"k": "a\\ud800b"}}', fields: ["metadata.k"] },
  ];

  for (const c of cases) {
    test(`${store} rest: ${c.title} is a 400 naming ${c.fields.join(", ") || "the body"}, and writes nothing`, async (t) => {
      const key = await server.freshKey();
      const r = await rest(server.url, c.method, c.path, key, c.body);
      t.is(r.status, 400, JSON.stringify(r.body));
      t.is(r.body.code, "invalid_argument");
      t.deepEqual(violatedFields(r.body).sort(), [...c.fields].sort());
      if (c.reason) t.is(reasonOf(r.body), c.reason);
      t.false(JSON.stringify(r.body).includes("    at "), "no stack trace");
      t.is(await count(key), 0);
    });
  }

  test(`${store} rest: an update with bad input changes nothing`, async (t) => {
    const key = await server.freshKey();
    const created = await rest(server.url, "POST", "/subjects", key, { name: "Keep", email: "keep@example.com" });
    const r = await rest(server.url, "PUT", `/subjects/${created.body.id}`, key, { name: "Changed", email: "bad" });
    t.is(r.status, 400);
    t.deepEqual(violatedFields(r.body), ["email"]);
    t.deepEqual((await rest(server.url, "GET", `/subjects/${created.body.id}`, key)).body, created.body);
  });

  test(`${store} rest: unknown fields are ignored; numbers and booleans in query strings are parsed`, async (t) => {
    const key = await server.freshKey();
    const r = await rest(server.url, "POST", "/subjects", key, { name: "Ok", surprise: { deep: [1, 2] } });
    t.is(r.status, 200);
    t.is(r.body.name, "Ok");
    const l = await rest(server.url, "GET", "/subjects?limit=1&offset=0&unknown=1", key);
    t.is(l.status, 200);
    t.is(l.body.subjects.length, 1);
  });

  test(`${store} rest: unknown IDs are 404, unknown routes 404, wrong methods 405`, async (t) => {
    const key = await server.freshKey();
    const missing = await rest(server.url, "GET", "/subjects/subj_doesnotexist0000000000", key);
    t.is(missing.status, 404);
    t.is(missing.body.code, "not_found");
    t.is(reasonOf(missing.body), "SUBJECT_NOT_FOUND");
    const route = await rest(server.url, "GET", "/nothing-here", key);
    t.is(route.status, 404);
    const method = await rest(server.url, "PATCH", "/subjects", key, {});
    t.is(method.status, 405);
    t.regex(method.headers.get("allow") ?? "", /GET/);
  });

  test(`${store} rest: no input produces a 500`, async (t) => {
    const key = await server.freshKey();
    const bodies = ['{"email": null, "name": null}', '{"metadata": null}', '"text"', "null", "true", "1e999", '{"name": "\\u0000"}', `{"external_id": "${"é".repeat(255)}"}`];
    for (const body of bodies) {
      const r = await rest(server.url, "POST", "/subjects", key, body);
      t.true(r.status < 500, `${body} gave ${r.status}`);
    }
    for (const path of ["/subjects/%E0%A4%A", `/subjects/${"x".repeat(5000)}`, "/subjects?limit=%00", `/subjects/search?query=${"%25".repeat(300)}`]) {
      const r = await rest(server.url, "GET", path, key);
      t.true(r.status < 500, `${path} gave ${r.status}`);
    }
  });

  for (const protocol of PROTOCOLS) {
    test(`${store} ${protocol}: bad input is invalid_argument with the field in a BadRequest detail, and writes nothing`, async (t) => {
      const key = await server.freshKey();
      const c = rpcClient(SubjectService, server.url, protocol, key);
      const err = await t.throwsAsync(c.createSubject({ email: "nope", name: "x" }));
      const ce = ConnectError.from(err);
      t.is(ce.code, Code.InvalidArgument);
      t.regex(ce.rawMessage, /email/);
      const { BadRequestSchema } = await import("../../src/gen/google/rpc/error_details_pb.js");
      t.deepEqual(
        ce.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field),
        ["email"],
      );
      for (const [limit, offset] of [
        [0, undefined],
        [101, undefined],
        [undefined, -1],
      ] as const) {
        const e = ConnectError.from(await t.throwsAsync(c.listSubjects({ limit, offset })));
        t.is(e.code, Code.InvalidArgument);
      }
      t.is(await count(key), 0);
    });
  }
}
