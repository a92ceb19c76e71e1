/**
 * Identifiers compare byte for byte on both stores (DESIGN §4): IDs, external IDs, rate codes,
 * event names, idempotency keys, tokens and API keys. One table of variants (case, accents,
 * trailing space, Unicode normalisation forms, full-width letters, ß/ss) goes through the real
 * server over REST on MariaDB and on SQLite; every answer is asserted, and recorded, and the two
 * stores' records must be equal.
 */
import test, { type ExecutionContext } from "ava";
import { AlreadyExistsError } from "../../src/billing/errors.js";
import { newId } from "../../src/billing/ids.js";
import { createDatabase } from "../../src/db/datasource.js";
import { SqlRateCardStore } from "../../src/db/stores/rate-card-store.js";
import { SqlRateCatalogStore } from "../../src/db/stores/rate-catalog-store.js";
import { type RestResponse, rest } from "../helpers/clients.js";
import type { Store } from "../helpers/db.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** Pairs of identifiers that differ byte for byte but that a folding collation takes as one. */
const VARIANTS: [label: string, a: string, b: string][] = [
  ["case", "ext_x", "Ext_x"],
  ["accent", "Muller", "Müller"],
  ["trailing space", "spaced", "spaced "],
  ["NFC/NFD", "caf\u00e9", "cafe\u0301"],
  ["full width", "abc", "\uff41\uff42\uff43"],
  ["sharp s", "strasse", "stra\u00dfe"],
];

/** The letters of `s` after its first `keep` characters with their case flipped. */
function flip(s: string, keep = 0): string {
  const tail = s.slice(keep).replace(/[a-z]/gi, (c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()));
  return s.slice(0, keep) + tail;
}

/** An ID with the case of its random part flipped (the type prefix kept, so it is still ID-shaped). */
function flipId(id: string): string {
  const flipped = flip(id, id.indexOf("_") + 1);
  if (flipped === id) throw new Error(`no letters to flip in ${id}`);
  return flipped;
}

const enc = encodeURIComponent;
const usd = (value: number | string) => ({ amount: { currency_code: "USD", value } });

/** What each store answered, step by step, for the parity test at the end. */
type Transcript = [step: string, answer: unknown][];
const transcripts = new Map<string, Map<Store, Transcript>>();
const finished = new Map<string, Map<Store, Promise<void>>>();

/**
 * Registers `name` for every store: `body` runs against the store's server with a recorder that
 * asserts an answer and writes it down; then one test checks both stores wrote the same.
 */
function scenario(name: string, body: (s: TestServer, check: (step: string, actual: unknown, expected: unknown) => void, t: ExecutionContext) => Promise<void>): void {
  const perStore = new Map<Store, Transcript>();
  const done = new Map<Store, Promise<void>>();
  transcripts.set(name, perStore);
  finished.set(name, done);
  for (const store of STORES) {
    let resolve!: () => void;
    done.set(store, new Promise((r) => (resolve = r)));
    test(`${store}: ${name}`, async (t) => {
      const transcript: Transcript = [];
      perStore.set(store, transcript);
      try {
        const server = await servers.get(store)!;
        await body(
          server,
          (step, actual, expected) => {
            transcript.push([step, actual]);
            t.deepEqual(actual, expected, step);
          },
          t,
        );
      } finally {
        resolve();
      }
    });
  }
  if (STORES.length > 1) {
    test(`both stores: ${name}: the same answers`, async (t) => {
      await Promise.all(done.values());
      const [first, ...others] = STORES;
      for (const other of others) t.deepEqual(perStore.get(other), perStore.get(first!));
    });
  }
}

const servers = new Map<Store, Promise<TestServer>>();
test.before(() => {
  for (const store of STORES) servers.set(store, startTestServer(store));
});
test.after.always(async () => {
  for (const s of servers.values()) await (await s).stop();
});

/** A REST answer as [status, code or the subject's own fields]. */
const status = (r: RestResponse) => r.status;

scenario("subjects: an external ID is found, updated, deleted and refused as a duplicate only byte for byte", async (server, check) => {
  const key = await server.freshKey();
  const call = (method: string, path: string, body?: unknown) => rest(server.url, method, path, key, body);
  const metric = (await call("POST", "/pricing-metrics", { event_name: "calls", name: "Calls", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } })).body.id;
  const total = async (subject: string) => {
    const r = await call("POST", `/pricing-metrics/${metric}/summary`, { subject_id: subject, period: { start: "2026-01-01T00:00:00Z", end: "2026-02-01T00:00:00Z" } });
    return r.status === 200 ? r.body.map((x: Json) => x.value) : r.status;
  };
  const event = (subject: string, idempotencyKey: string) =>
    call("POST", "/usage-events", { idempotency_key: idempotencyKey, subject_id: subject, event_name: "calls", timestamp: "2026-01-15T00:00:00Z", data: { n: 1 } });

  for (const [label, a, b] of VARIANTS) {
    const A = (await call("POST", "/subjects", { external_id: a, name: "A" })).body;
    check(`${label}: created ${JSON.stringify(a)}`, A.external_id, a);
    // Only A exists: B's external ID finds nothing, anywhere a subject is looked up.
    check(`${label}: get b before`, status(await call("GET", `/subjects/${enc(b)}`)), 404);
    check(`${label}: update b before`, status(await call("PUT", `/subjects/${enc(b)}`, { name: "X" })), 404);
    check(`${label}: delete b before`, status(await call("DELETE", `/subjects/${enc(b)}`)), 404);
    check(`${label}: billing state b before`, status(await call("GET", `/customer-access/${enc(b)}/billing-state`)), 404);
    check(`${label}: event for b before`, status(await event(b, `${label}-before`)), 404);
    check(`${label}: summary for b before`, await total(b), 404);
    // B is another subject, not a duplicate of A.
    const B = (await call("POST", "/subjects", { external_id: b, name: "B" })).body;
    check(`${label}: created ${JSON.stringify(b)}`, [B.external_id, B.id !== A.id], [b, true]);
    const dup = await call("POST", "/subjects", { external_id: b });
    check(`${label}: b again is a duplicate`, [dup.status, dup.body.code], [409, "already_exists"]);
    check(`${label}: get a`, (await call("GET", `/subjects/${enc(a)}`)).body.id === A.id, true);
    check(`${label}: get b`, (await call("GET", `/subjects/${enc(b)}`)).body.id === B.id, true);
    check(`${label}: update b`, (await call("PUT", `/subjects/${enc(b)}`, { name: "B2" })).body.id === B.id, true);
    check(`${label}: a untouched`, (await call("GET", `/subjects/${enc(a)}`)).body.name, "A");
    check(`${label}: event for b`, (await event(b, `${label}-b`)).body.status, "accepted");
    check(`${label}: usage of a, of b`, [await total(a), await total(b)], [[null], ["1"]]);
    check(`${label}: billing state b`, status(await call("GET", `/customer-access/${enc(b)}/billing-state`)), 200);
    check(`${label}: delete b`, (await call("DELETE", `/subjects/${enc(b)}`)).body.id === B.id, true);
    check(`${label}: a after b deleted`, (await call("GET", `/subjects/${enc(a)}`)).body.id === A.id, true);
    check(`${label}: b after deleted`, status(await call("GET", `/subjects/${enc(b)}`)), 404);
    // And by ID: the ID with its letters' case flipped is no subject.
    const wrong = flipId(A.id);
    check(`${label}: get flipped id`, status(await call("GET", `/subjects/${wrong}`)), 404);
    check(`${label}: update flipped id`, status(await call("PUT", `/subjects/${wrong}`, { name: "X" })), 404);
    check(`${label}: delete flipped id`, status(await call("DELETE", `/subjects/${wrong}`)), 404);
    check(`${label}: billing state flipped id`, status(await call("GET", `/customer-access/${wrong}/billing-state`)), 404);
    check(`${label}: event for flipped id`, status(await event(wrong, `${label}-flipped`)), 404);
    const batch = await call("POST", "/usage-events/batch", {
      events: [{ idempotency_key: `${label}-batch`, subject_id: wrong, event_name: "calls", timestamp: "2026-01-15T00:00:00Z", data: { n: 1 } }],
    });
    check(
      `${label}: batch event for flipped id`,
      batch.body.results?.map((r: Json) => r.status),
      ["rejected"],
    );
    check(`${label}: a still has no usage`, await total(A.id), [null]);
  }
});

scenario("subjects: search ignores case (beyond ASCII), not accents, and treats % and _ literally", async (server, check) => {
  const key = await server.freshKey();
  const call = (method: string, path: string, body?: unknown) => rest(server.url, method, path, key, body);
  for (const name of ["Jürgen Müller", "Muller", "ÉLODIE Dupont", "Ωmega", "50%_off"]) await call("POST", "/subjects", { name });
  const search = async (query: string) => (await call("GET", `/subjects/search?query=${enc(query)}&limit=100`)).body.subjects.map((s: Json) => s.name).sort();
  check("MÜLLER", await search("MÜLLER"), ["Jürgen Müller"]);
  check("muller", await search("muller"), ["Muller"]);
  check("élodie", await search("élodie"), ["ÉLODIE Dupont"]);
  check("ωMEGA", await search("ωMEGA"), ["Ωmega"]);
  check("%_", await search("%_"), ["50%_off"]);
  check("0%", await search("0_"), []);
});

scenario("rate cards and catalogs: codes are distinct byte for byte; an exact duplicate is a 400 naming it", async (server, check) => {
  const key = await server.freshKey();
  const call = (method: string, path: string, body?: unknown) => rest(server.url, method, path, key, body);
  const metric = (await call("POST", "/pricing-metrics", { event_name: "calls", name: "Calls", unit: "call", aggregation: { aggregation_type: "count" } })).body.id;
  const fixed = (code: string) => ({ code, name: code, price: usd(1) });
  const usage = (code: string) => ({ usage_based_rate_type: "simple", code, name: code, pricing_metric_id: metric, price: usd("0.01") });
  const card = (body: Json) => call("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", ...body });
  const codes = (c: Json) => [...c.fixed_rates, ...c.usage_based_rates].map((r: Json) => r.code);

  for (const [label, a, b] of [["Seats/seats", "Seats", "seats"], ...VARIANTS.map(([l, x, y]) => [l, x, y])] as [string, string, string][]) {
    const two = await card({ fixed_rates: [fixed(a), fixed(b)] });
    check(`${label}: two fixed codes`, [two.status, two.status === 200 ? codes(two.body) : two.body], [200, [a, b]]);
    const mixed = await card({ fixed_rates: [fixed(a)], usage_based_rates: [usage(b)] });
    check(`${label}: fixed and usage`, [mixed.status, mixed.status === 200 ? codes(mixed.body) : mixed.body], [200, [a, b]]);
    const same = await card({ fixed_rates: [fixed(a)], usage_based_rates: [usage(a)] });
    check(`${label}: the same code twice`, [same.status, same.body.message], [400, `usage_based_rates[0].code: duplicates the code ${JSON.stringify(a)} of fixed_rates[0]`]);
    check(`${label}: get card`, codes((await call("GET", `/rate-cards/${two.body.id}`)).body), [a, b]);
    check(`${label}: get flipped card id`, status(await call("GET", `/rate-cards/${flipId(two.body.id)}`)), 404);

    const cat = (await call("POST", "/rate-catalogs", { name: label, description: "" })).body;
    const add = (rates: Json) => call("POST", `/rate-catalogs/${cat.id}/add_rates`, { billing_interval: "monthly", ...rates });
    check(`${label}: catalog add a`, (await add({ fixed_rates: [fixed(a)] })).status, 200);
    check(`${label}: catalog add b`, (await add({ usage_based_rates: [usage(b)] })).status, 200);
    const again = await add({ fixed_rates: [fixed(a)] });
    check(`${label}: catalog add a again`, [again.status, again.body.message], [400, `fixed_rates[0].code: ${JSON.stringify(a)} is already used by a rate of this rate catalog for the interval`]);
    const listed = (await call("GET", `/rate-catalogs/${cat.id}/rates?limit=100`)).body.rates;
    check(
      `${label}: catalog rates`,
      listed.map((r: Json) => [r.type, (r.fixed ?? r.usage_based).code]),
      [
        ["fixed", a],
        ["usage_based", b],
      ],
    );
    check(`${label}: catalog rate count`, (await call("GET", `/rate-catalogs/${cat.id}`)).body.rate_count, 2);
    check(`${label}: get flipped catalog id`, status(await call("GET", `/rate-catalogs/${flipId(cat.id)}`)), 404);
  }
  check("get flipped metric id", status(await call("GET", `/pricing-metrics/${flipId(metric)}`)), 404);
});

scenario("usage: idempotency keys and event names are distinct byte for byte", async (server, check) => {
  const key = await server.freshKey();
  const call = (method: string, path: string, body?: unknown) => rest(server.url, method, path, key, body);
  const subject = (await call("POST", "/subjects", { name: "S" })).body.id;
  const metric = async (eventName: string) =>
    (await call("POST", "/pricing-metrics", { event_name: eventName, name: eventName, unit: "u", aggregation: { aggregation_type: "sum", value_field: "n" } })).body;
  const total = async (id: string) =>
    (await call("POST", `/pricing-metrics/${id}/summary`, { subject_id: subject, period: { start: "2026-01-01T00:00:00Z", end: "2026-02-01T00:00:00Z" } })).body.map((x: Json) => x.value);
  const event = (idempotencyKey: string, eventName: string, n: number) =>
    call("POST", "/usage-events", { idempotency_key: idempotencyKey, subject_id: subject, event_name: eventName, timestamp: "2026-01-15T00:00:00Z", data: { n } });
  for (const [label, a, b] of VARIANTS) {
    const ma = await metric(a);
    const mb = await metric(b);
    check(`${label}: metric event names`, [ma.event_name, mb.event_name], [a, b]);
    check(`${label}: key a`, (await event(a, a, 1)).body.status, "accepted");
    check(`${label}: key b`, (await event(b, a, 2)).body.status, "accepted");
    check(`${label}: key a again`, (await event(a, a, 1)).body.status, "duplicate");
    const conflict = await event(b, a, 5);
    check(`${label}: key b with another payload`, [conflict.status, conflict.body.code], [409, "already_exists"]);
    check(`${label}: event named b`, (await event(`${a}/${label}`, b, 4)).body.status, "accepted");
    check(`${label}: totals of a and of b`, [await total(ma.id), await total(mb.id)], [["3"], ["4"]]);
  }
});

scenario("billing: case-flipped IDs and hosted tokens are not found and cannot pay", async (server, check) => {
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(1234) }] });
  const flippedCode = await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { Seats: 1 } });
  check("quantity for code Seats on a card with seats", flippedCode.status, 400);

  const started = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null);
  const url = new URL(started.action.checkout_url).pathname;
  const token = url.split("/").pop()!;
  const wrongUrl = url.replace(token, flip(token));
  check("checkout page, flipped token", (await fetch(`${server.url}${wrongUrl}`)).status, 404);
  check("pay, flipped token", (await s.payCheckout(`${server.url}${wrongUrl}`, CARD_OK)).status, 404);
  check("cancel, flipped token", (await fetch(`${server.url}${wrongUrl}/cancel`, { redirect: "manual" })).status, 404);
  check("nothing subscribed", await s.subscriptions(), []);
  check("checkout page", (await fetch(`${server.url}${url}`)).status, 200);
  check("pay", (await s.payCheckout(`${server.url}${url}`, CARD_OK)).status, 303);

  const [sub] = await s.subscriptions();
  const [inv] = await s.invoices();
  const hosted = new URL(inv.hosted_url).pathname;
  const invoiceToken = hosted.split("/").pop()!;
  check("hosted invoice, flipped token", (await fetch(`${server.url}${hosted.replace(invoiceToken, flip(invoiceToken))}`)).status, 404);
  check("hosted invoice", (await fetch(`${server.url}${hosted}`)).status, 200);

  const tl = await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
  const notFound: [string, string, string, unknown?][] = [
    ["subscription", "GET", `/subscriptions/${flipId(sub.id)}`],
    ["cancel subscription", "POST", `/subscriptions/${flipId(sub.id)}/cancel`, {}],
    ["invoice", "GET", `/invoices/${flipId(inv.id)}`],
    ["void invoice", "POST", `/invoices/${flipId(inv.id)}/void`, {}],
    ["timeline", "GET", `/subscription-timelines/${flipId(tl.id)}`],
    ["timeline items", "GET", `/subscription-timelines/${flipId(tl.id)}/items`],
    ["test clock", "GET", `/test-clocks/${flipId(s.clockId)}`],
    ["advance test clock", "POST", `/test-clocks/${flipId(s.clockId)}/advance`, { frozen_time: "2026-01-16T00:00:00Z" }],
    ["subscriptions of a flipped subject", "POST", "/subscriptions", { subject_id: flipId(s.subjectId), rate_card_id: card, fixed_rate_quantities: { seats: 1 } }],
    ["subscribe to a flipped card", "POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: flipId(card), fixed_rate_quantities: { seats: 1 } }],
  ];
  for (const [what, method, path, body] of notFound) {
    const r = await s.raw(method, path, body);
    check(`${what}: flipped id`, [r.status, r.body.code], [r.status === 400 ? 400 : 404, r.status === 400 ? "invalid_argument" : "not_found"]);
  }
  // Unchanged by all of the above.
  check("subscription", (await s.call("GET", `/subscriptions/${sub.id}`)).status, "active");
  check("invoice", (await s.call("GET", `/invoices/${inv.id}`)).status, inv.status);
  check("clock", (await s.call("GET", `/test-clocks/${s.clockId}`)).frozen_time, "2026-01-15T00:00:00Z");
});

scenario("API keys: a case-flipped key is unauthenticated", async (server, check) => {
  const key = await server.freshKey();
  const r = await rest(server.url, "GET", "/subjects", flip(key, "sk_test_".length));
  check("flipped key", [r.status, r.body.code], [401, "unauthenticated"]);
  check("the key", (await rest(server.url, "GET", "/subjects", key)).status, 200);
});

/**
 * Below the domain's checks, the database still decides: a unique-key violation writing rates is
 * a 409 naming the codes, never a 500.
 */
for (const store of STORES) {
  test(`${store}: a unique-key violation writing rates is already_exists naming the code`, async (t) => {
    const server = await servers.get(store)!;
    const db = await createDatabase(server.db.url, { poolSize: 1 });
    await db.dataSource.initialize();
    try {
      const env = newId("env");
      const now = new Date();
      const rate = (code: string) => ({ id: newId("rate"), code, name: code, description: null, price: { kind: "flat" as const, amount: { currency: "USD", value: "1" } } });
      const cards = new SqlRateCardStore(db.sql, db.entities);
      const card = {
        id: newId("rc"),
        environmentId: env,
        name: "x",
        description: null,
        billingInterval: "monthly" as const,
        metadata: {},
        rateCatalogId: null,
        usageRates: [],
        currency: "USD",
        createdAt: now,
        updatedAt: now,
        archivedAt: null,
      };
      const err = await t.throwsAsync(() => cards.insert({ ...card, fixedRates: [rate("seats"), rate("seats")] }), { instanceOf: AlreadyExistsError });
      t.regex(err?.message ?? "", /"seats"/);
      await cards.insert({ ...card, id: newId("rc"), fixedRates: [rate("Seats"), rate("seats")] });

      const catalogs = new SqlRateCatalogStore(db.sql, db.entities);
      const cat = { id: newId("rcat"), environmentId: env, name: "c", description: "", rateCount: 0, currency: null, createdAt: now };
      await catalogs.insert(cat);
      await catalogs.addRates(env, cat.id, "monthly", { fixed: [rate("support")], usage: [], currency: "USD" });
      const raced = await t.throwsAsync(() => catalogs.addRates(env, cat.id, "monthly", { fixed: [rate("extra"), rate("support")], usage: [], currency: "USD" }), { instanceOf: AlreadyExistsError });
      t.is(raced?.message, 'the rate catalog already has a rate with the code "support" for this interval');
      t.is((await catalogs.get(env, cat.id))?.rateCount, 1, "nothing written");
    } finally {
      await db.dataSource.destroy();
    }
  });
}
