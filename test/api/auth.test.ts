/**
 * Authentication and tenancy (DESIGN §3) over every protocol: missing, unknown and revoked keys
 * are 401; a publishable key is 403 outside billing state; one environment can neither read,
 * search, update, delete nor collide with another's subjects.
 */
import test from "ava";
import { reasonOf, rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";
import { APIS, type Json, ok, subjectsApi } from "../helpers/subjects-api.js";

for (const store of STORES) {
  const server = useServer(store);

  for (const api of APIS) {
    test(`${store} ${api}: missing, unknown and revoked keys are unauthenticated; publishable keys are denied`, async (t) => {
      const bad: [string | undefined, string][] = [
        [undefined, "unauthenticated"],
        ["sk_test_doesnotexist000000000000000", "unauthenticated"],
        [server.keys.aRevoked, "unauthenticated"],
        [server.keys.aPublishable, "permission_denied"],
      ];
      for (const [key, code] of bad) {
        const s = subjectsApi(api, server.url, key);
        t.deepEqual(await s.create({ name: "nope" }), { error: code }, `create with ${key ?? "no key"}`);
        t.deepEqual(await s.list(), { error: code }, `list with ${key ?? "no key"}`);
      }
      // Nothing was written by any refused call.
      const listed = ok(await subjectsApi(api, server.url, server.keys.a).search("nope"));
      t.deepEqual(listed.subjects, []);
    });

    test(`${store} ${api}: environments are isolated`, async (t) => {
      const a = subjectsApi(api, server.url, server.keys.a);
      const b = subjectsApi(api, server.url, server.keys.b);
      const ext = `shared-${Math.random().toString(36).slice(2)}`;
      const inA = ok(await a.create({ name: `Isolated ${ext}`, email: `${ext}@a.example`, external_id: ext }));
      // The same external_id in another environment does not collide.
      const inB = ok(await b.create({ name: `Other ${ext}`, external_id: ext }));
      t.not(inA.id, inB.id);

      t.deepEqual(await b.get(inA.id), { error: "not_found" });
      t.is(ok(await b.get(ext)).id, inB.id, "external ID resolves within the caller's environment");
      t.deepEqual(await b.update(inA.id, { name: "hijack" }), { error: "not_found" });
      t.deepEqual(await b.delete(inA.id), { error: "not_found" });
      t.deepEqual(ok(await b.search(`Isolated ${ext}`)).subjects, []);
      t.false(ok(await b.list(100)).subjects.some((x: Json) => x.id === inA.id));

      // A's subject is untouched.
      t.deepEqual(ok(await a.get(inA.id)), inA);
      t.is(ok(await a.get(ext)).id, inA.id);
    });
  }

  test(`${store} rest: 401 and 403 bodies say what is wrong without echoing the key`, async (t) => {
    const missing = await rest(server.url, "GET", "/subjects");
    t.is(missing.status, 401);
    t.is(missing.body.code, "unauthenticated");
    t.is(reasonOf(missing.body), "API_KEY_MISSING");
    const secret = "sk_test_unknownunknownunknown0000";
    const unknown = await rest(server.url, "GET", "/subjects", secret);
    t.is(unknown.status, 401);
    t.is(reasonOf(unknown.body), "API_KEY_INVALID");
    t.false(JSON.stringify(unknown.body).includes(secret));
    const revoked = await rest(server.url, "GET", "/subjects", server.keys.aRevoked);
    t.is(revoked.status, 401);
    const publishable = await rest(server.url, "POST", "/subjects", server.keys.aPublishable, { name: "x" });
    t.is(publishable.status, 403);
    t.is(publishable.body.code, "permission_denied");
    t.is(reasonOf(publishable.body), "PUBLISHABLE_KEY_NOT_ALLOWED");
  });

  test(`${store}: 20 concurrent creates with one external_id make exactly one subject`, async (t) => {
    const ext = `race-${Math.random().toString(36).slice(2)}`;
    const results = await Promise.all(Array.from({ length: 20 }, () => rest(server.url, "POST", "/subjects", server.keys.a, { external_id: ext })));
    t.is(results.filter((r) => r.status === 200).length, 1);
    t.is(results.filter((r) => r.status === 409).length, 19);
    const all = await rest(server.url, "GET", "/subjects?limit=100", server.keys.a);
    t.is(all.body.subjects.filter((s: Json) => s.external_id === ext).length, 1);
  });
}
