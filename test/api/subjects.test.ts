/**
 * Subjects end to end: the same scenarios over REST, Connect, gRPC and gRPC-Web, on MariaDB and
 * on SQLite, against the real server on a port.
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";
import { APIS, type Json, ok, subjectsApi } from "../helpers/subjects-api.js";

const uid = () => Math.random().toString(36).slice(2, 10);

for (const store of STORES) {
  const server = useServer(store);

  for (const api of APIS) {
    const t0 = `${store} ${api}`;

    test(`${t0}: the largest metadata the rules allow (50 entries, three-byte characters) is kept whole`, async (t) => {
      const s = subjectsApi(api, server.url, server.keys.a);
      const metadata: Record<string, string> = {};
      for (let i = 0; i < 50; i++) metadata[`${String(i).padStart(2, "0")}${"語".repeat(38)}`] = "語".repeat(500);
      const created = ok(await s.create({ name: "Large", metadata }));
      t.deepEqual(created.metadata, metadata);
      t.deepEqual(ok(await s.get(created.id)).metadata, metadata);
    });

    test(`${t0}: create, get by ID and by external ID, update in part, delete`, async (t) => {
      const s = subjectsApi(api, server.url, server.keys.a);
      const ext = `ext-${uid()}`;
      const created = ok(await s.create({ name: "Ada Lovelace", email: "ada@example.com", external_id: ext, metadata: { plan: "pro" } }));
      t.regex(created.id, /^subj_[0-9A-Za-z]{22}$/);
      t.deepEqual(
        { ...created, id: undefined, created_at: undefined },
        {
          id: undefined,
          created_at: undefined,
          name: "Ada Lovelace",
          email: "ada@example.com",
          external_id: ext,
          metadata: { plan: "pro" },
          test_clock_id: null,
          has_payment_method: false,
          billing_details: null,
        },
      );
      t.regex(created.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
      t.deepEqual(ok(await s.get(created.id)), created);
      t.deepEqual(ok(await s.get(ext)), created);

      // Partial update: only the name changes; email, metadata and external_id stay.
      const renamed = ok(await s.update(ext, { name: "Ada King" }));
      t.is(renamed.name, "Ada King");
      t.is(renamed.email, "ada@example.com");
      t.deepEqual(renamed.metadata, { plan: "pro" });
      t.is(renamed.external_id, ext);
      // Metadata replaces the map; email "" clears it (absent: null).
      const updated = ok(await s.update(created.id, { metadata: { tier: "2" }, email: "" }));
      t.deepEqual(updated.metadata, { tier: "2" });
      t.is(updated.email, null);
      t.is(updated.name, "Ada King");
      t.deepEqual(ok(await s.get(created.id)), updated);
      // null clears too (null means absent, DESIGN §4); a key left out stays unchanged.
      const withEmail = ok(await s.update(created.id, { email: "ada@example.org" }));
      t.is(withEmail.email, "ada@example.org");
      const cleared = ok(await s.update(created.id, { name: null, metadata: null }));
      t.is(cleared.name, null);
      t.deepEqual(cleared.metadata, {});
      t.is(cleared.email, "ada@example.org");
      t.is(cleared.external_id, ext);
      t.deepEqual(ok(await s.get(created.id)), cleared);

      const deleted = ok(await s.delete(ext));
      t.is(deleted.id, created.id);
      t.is(deleted.deleted, true);
      t.deepEqual(await s.get(created.id), { error: "not_found" });
      t.deepEqual(await s.get(ext), { error: "not_found" });
      t.deepEqual(await s.update(created.id, { name: "x" }), { error: "not_found" });
      t.deepEqual(await s.delete(created.id), { error: "not_found" });
    });

    test(`${t0}: a subject with no fields is valid and emits every field`, async (t) => {
      const s = subjectsApi(api, server.url, server.keys.a);
      const created = ok(await s.create({}));
      t.deepEqual(Object.keys(created).sort(), ["billing_details", "created_at", "email", "external_id", "has_payment_method", "id", "metadata", "name", "test_clock_id"]);
      t.deepEqual(
        { email: created.email, external_id: created.external_id, name: created.name, test_clock_id: created.test_clock_id },
        { email: null, external_id: null, name: null, test_clock_id: null },
      );
      t.deepEqual(created.metadata, {});
      // null on input means absent, as leaving the key out does.
      const nulls = ok(await s.create({ email: null, external_id: null, name: null }));
      t.deepEqual([nulls.email, nulls.external_id, nulls.name], [null, null, null]);
    });

    test(`${t0}: external_id is unique among live subjects, and free again after delete`, async (t) => {
      const s = subjectsApi(api, server.url, server.keys.a);
      const ext = `dup-${uid()}`;
      const first = ok(await s.create({ external_id: ext }));
      t.deepEqual(await s.create({ external_id: ext, name: "again" }), { error: "already_exists" });
      ok(await s.delete(first.id));
      const second = ok(await s.create({ external_id: ext }));
      t.not(second.id, first.id);
      t.is(ok(await s.get(ext)).id, second.id);
    });

    test(`${t0}: pagination: stable order, exact has_more, no overlap`, async (t) => {
      const s = subjectsApi(api, server.url, await server.freshKey());
      const empty = ok(await s.list());
      t.deepEqual(empty, { has_more: false, subjects: [] });
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) ids.push(ok(await s.create({ name: `p${i}` })).id);

      const seen: string[] = [];
      for (let offset = 0; offset < 7; offset += 3) {
        const page = ok(await s.list(3, offset));
        seen.push(...page.subjects.map((x: Json) => x.id));
        t.is(page.has_more, offset + 3 < 7, `has_more at offset ${offset}`);
      }
      t.deepEqual(seen, ids);
      // Exactly filling the last page leaves has_more false; one more makes it true.
      t.false(ok(await s.list(7, 0)).has_more);
      t.true(ok(await s.list(6, 0)).has_more);
      t.deepEqual(ok(await s.list(100, 7)), { has_more: false, subjects: [] });
      t.deepEqual(
        ok(await s.list(1, 6)).subjects.map((x: Json) => x.id),
        [ids[6]],
      );
      // Default limit is 20: all seven in one page.
      t.is(ok(await s.list()).subjects.length, 7);
      // Deleted subjects leave the listing and the order of the rest.
      ok(await s.delete(ids[2] as string));
      t.deepEqual(
        ok(await s.list(100)).subjects.map((x: Json) => x.id),
        ids.filter((_, i) => i !== 2),
      );
    });

    test(`${t0}: search matches name or email, ignoring case, as a substring`, async (t) => {
      const s = subjectsApi(api, server.url, await server.freshKey());
      const grace = ok(await s.create({ name: "Grace Hopper", email: "grace@navy.example" }));
      const alan = ok(await s.create({ name: "Alan Turing", email: "alan@BLETCHLEY.example" }));
      const percent = ok(await s.create({ name: "100% Ümlaut", email: "x_y@example.com" }));
      const ids = async (q: string, limit?: number, offset?: number) => ok(await s.search(q, limit, offset)).subjects.map((x: Json) => x.id);
      t.deepEqual(await ids("HOPPER"), [grace.id]);
      t.deepEqual(await ids("bletchley"), [alan.id]);
      t.deepEqual(await ids("example"), [grace.id, alan.id, percent.id]);
      t.deepEqual(await ids("100%"), [percent.id]);
      t.deepEqual(await ids("%"), [percent.id], "% is literal, not a wildcard");
      t.deepEqual(await ids("x_y"), [percent.id]);
      t.deepEqual(await ids("_"), [percent.id], "_ is literal, not a wildcard");
      t.deepEqual(await ids("ümlaut"), [percent.id], "case folding beyond ASCII");
      t.deepEqual(await ids("nobody"), []);
      const page = ok(await s.search("example", 2, 0));
      t.is(page.subjects.length, 2);
      t.true(page.has_more);
      const rest = ok(await s.search("example", 2, 2));
      t.deepEqual(
        rest.subjects.map((x: Json) => x.id),
        [percent.id],
      );
      t.false(rest.has_more);
      ok(await s.delete(grace.id));
      t.deepEqual(await ids("grace"), []);
    });
  }

  test(`${store}: many lookups at once (one batch) each find their own subject, by the same rule as one alone`, async (t) => {
    // The server looks subjects up in batches (the lookups of one event-loop turn together): ID
    // matches first, then external IDs for the keys still unfound, each environment apart.
    const a = subjectsApi("rest", server.url, server.keys.a);
    const b = subjectsApi("rest", server.url, server.keys.b);
    const u = uid();
    const plain = await Promise.all(Array.from({ length: 20 }, (_, i) => a.create({ name: `P${i}`, external_id: `p-${u}-${i}` }).then(ok)));
    const noExternal = ok(await a.create({ name: "No external ID" }));
    // A key that is one subject's ID and another's external ID names the first.
    const twin = ok(await a.create({ name: "Twin", external_id: (plain[0] as Json).id }));
    // An external ID shaped like an ID that is no subject's.
    const idShaped = ok(await a.create({ name: "ID-shaped", external_id: `subj_${u}notAnId0000000` }));
    const gone = ok(await a.create({ name: "Deleted", external_id: `gone-${u}` }));
    ok(await a.delete(gone.id));
    const inB = ok(await b.create({ name: "Other environment", external_id: `p-${u}-0` }));

    const cases: [api: typeof a, key: string, expected: string | "not_found"][] = [
      ...plain.flatMap((p: Json) => [[a, p.id, p.id] as [typeof a, string, string], [a, p.external_id, p.id] as [typeof a, string, string]]),
      [a, noExternal.id, noExternal.id],
      [a, (plain[0] as Json).id, (plain[0] as Json).id],
      [a, twin.id, twin.id],
      [a, idShaped.external_id, idShaped.id],
      [a, gone.id, "not_found"],
      [a, `gone-${u}`, "not_found"],
      [a, `subj_${u}missing00000000`, "not_found"],
      [a, `nobody-${u}`, "not_found"],
      [a, inB.id, "not_found"],
      [b, `p-${u}-0`, inB.id],
      [b, (plain[1] as Json).id, "not_found"],
      [b, `p-${u}-1`, "not_found"],
    ];
    // Each case three times over, all at once, in a shuffled order.
    const calls = [...cases, ...cases, ...cases].sort(() => Math.random() - 0.5);
    const answers = await Promise.all(calls.map(([api, key]) => api.get(key)));
    calls.forEach(([, key, expected], i) => {
      const r = answers[i] as { ok?: Json; error?: string };
      t.is(r.ok ? r.ok.id : r.error, expected, `GET /subjects/${key}`);
    });
  });
}
