/**
 * unique_count pricing metrics (DESIGN §13) through the public API, on MariaDB and SQLite: the
 * distinct values of value_field in a period, exact at period edges to the millisecond, per
 * bucket and per combination of dimensions, never a sum of smaller buckets' counts; checked
 * against a brute-force count over the same events for random periods; billing state and an
 * invoice on a test clock.
 */
import test from "ava";
import { type Range, buckets } from "../../src/billing/metering/periods.js";
import { usd } from "../helpers/catalog-bodies.js";
import { ok, rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** A fresh environment, a subject, and a unique_count metric of `user` over event "visit" (dimensions region, plan). */
async function setup(server: TestServer) {
  const key = await server.freshKey();
  const subject = await ok(server, key, "POST", "/subjects", {});
  const metric = await ok(server, key, "POST", "/pricing-metrics", {
    event_name: "visit",
    name: "Visitors",
    unit: "user",
    dimensions: ["region", "plan"],
    aggregation: { aggregation_type: "unique_count", value_field: "user" },
  });
  let seq = 0;
  const send = async (list: [string, unknown, Json?][], eventName = "visit") => {
    const events = list.map(([timestamp, user, extra]) => ({
      idempotency_key: `e${seq++}`,
      subject_id: subject.id,
      event_name: eventName,
      timestamp,
      data: { ...(user === undefined ? {} : { user }), region: "eu", plan: "pro", ...extra },
    }));
    for (let i = 0; i < events.length; i += 1000) {
      const r = await ok(server, key, "POST", "/usage-events/batch", { events: events.slice(i, i + 1000) });
      if (r.rejected > 0) throw new Error(JSON.stringify(r.results.filter((x: Json) => x.status === "rejected")));
    }
  };
  const summary = async (period: Json, extra: Json = {}, m: Json = metric) => ok(server, key, "POST", `/pricing-metrics/${m.id}/summary`, { subject_id: subject.id, period, ...extra });
  /** [bucket start, coordinates, value] per summary. */
  const rows = async (period: Json, extra: Json = {}): Promise<[string, string, string | null][]> =>
    (await summary(period, extra)).map((x: Json) => [x.period.start, JSON.stringify(x.dimension_coordinates), x.value] as [string, string, string | null]);
  const value = async (start: string, end: string, extra: Json = {}) => (await summary({ start, end, ...extra }))[0].value;
  return { key, subject, metric, send, summary, rows, value };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a value seen on both sides of a period boundary counts once in each; a month is not the sum of its days`, async (t) => {
    const s = await setup(server);
    await s.send([
      ["2026-01-10T08:00:00Z", "ann"],
      ["2026-01-10T09:00:00Z", "ann"],
      ["2026-01-11T09:00:00Z", "ann"],
      ["2026-01-11T10:00:00Z", "bob"],
      ["2026-01-31T23:59:59.999Z", "cat"],
      ["2026-02-01T00:00:00Z", "cat"],
      ["2026-02-03T00:00:00Z", "ann"],
    ]);
    t.is(await s.value("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"), "3");
    t.is(await s.value("2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"), "2");
    t.is(await s.value("2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z"), "3");
    const daily = await s.rows({ start: "2026-01-10T00:00:00Z", end: "2026-01-12T00:00:00Z" }, { period_granularity: "day" });
    t.deepEqual(
      daily.map((r) => [r[0], r[2]]),
      [
        ["2026-01-10T00:00:00Z", "1"],
        ["2026-01-11T00:00:00Z", "2"],
      ],
    );
    t.is(await s.value("2026-01-10T00:00:00Z", "2026-01-12T00:00:00Z"), "2", "ann on both days counts once");
    // Weeks (Monday) over the month: each week's own distinct count.
    const weekly = await s.rows({ start: "2026-01-26T00:00:00Z", end: "2026-02-09T00:00:00Z" }, { period_granularity: "week" });
    t.deepEqual(
      weekly.map((r) => [r[0], r[2]]),
      [
        ["2026-01-26T00:00:00Z", "1"],
        ["2026-02-02T00:00:00Z", "1"],
      ],
    );
  });

  test(`${store}: hour buckets count each hour's values, the whole period its own`, async (t) => {
    const s = await setup(server);
    await s.send([
      ["2026-03-02T10:15:00Z", "a"],
      ["2026-03-02T10:30:00Z", "b"],
      ["2026-03-02T11:20:00Z", "a"],
      ["2026-03-02T11:40:00Z", "a"],
    ]);
    const period = { start: "2026-03-02T10:00:00Z", end: "2026-03-02T13:00:00Z" };
    t.deepEqual(
      (await s.rows(period, { period_granularity: "hour" })).map((r) => [r[0], r[2]]),
      [
        ["2026-03-02T10:00:00Z", "2"],
        ["2026-03-02T11:00:00Z", "1"],
        ["2026-03-02T12:00:00Z", null],
      ],
    );
    t.is((await s.summary(period))[0].value, "2");
    t.is(await s.value("2026-03-01T00:00:00Z", "2026-03-05T00:00:00Z"), "2", "over days too");
  });

  test(`${store}: period edges are exact to the millisecond, within a day and across days`, async (t) => {
    const s = await setup(server);
    // Within one day: a at .000, c at .002, b at .005.
    await s.send([
      ["2026-05-04T10:00:00.000Z", "a"],
      ["2026-05-04T10:00:00.002Z", "c"],
      ["2026-05-04T10:00:00.005Z", "b"],
    ]);
    const near = (inclusive_start: boolean, inclusive_end: boolean) => s.value("2026-05-04T10:00:00.000Z", "2026-05-04T10:00:00.005Z", { inclusive_start, inclusive_end });
    t.deepEqual([await near(true, false), await near(false, false), await near(true, true), await near(false, true)], ["2", "1", "3", "2"]);
    // Across days: x on the 10th at 12:00 (and 01:00, before the start), y only at 01:00,
    // z on the 15th, w on the 20th at 12:00 exactly (and 23:00, after the end).
    await s.send([
      ["2026-06-10T01:00:00Z", "x"],
      ["2026-06-10T01:00:00Z", "y"],
      ["2026-06-10T12:00:00Z", "x"],
      ["2026-06-15T00:00:00Z", "z"],
      ["2026-06-20T12:00:00Z", "w"],
      ["2026-06-20T23:00:00Z", "w"],
    ]);
    const far = (inclusive_start: boolean, inclusive_end: boolean) => s.value("2026-06-10T12:00:00Z", "2026-06-20T12:00:00Z", { inclusive_start, inclusive_end });
    t.deepEqual([await far(true, false), await far(false, false), await far(true, true), await far(false, true)], ["2", "1", "3", "2"]);
    t.is(await s.value("2026-06-10T12:00:00.001Z", "2026-06-20T12:00:00.001Z"), "2", "z and w");
    t.is(await s.value("2026-06-10T01:00:00.001Z", "2026-06-20T11:59:59.999Z"), "2", "x (its last) and z; w's first is after the end");
  });

  test(`${store}: dimensions group the distinct values, by all, some or none of them`, async (t) => {
    const s = await setup(server);
    await s.send([
      ["2026-07-01T10:00:00Z", "ann", { region: "eu", plan: "pro" }],
      ["2026-07-02T10:00:00Z", "ann", { region: "eu", plan: "free" }],
      ["2026-07-03T10:00:00Z", "bob", { region: "us", plan: "pro" }],
      ["2026-07-03T11:00:00Z", "ann", { region: "us", plan: "pro" }],
      ["2026-07-03T12:00:00Z", "cat", { region: "eu", plan: "pro" }],
    ]);
    for (const [start, end, label] of [
      ["2026-07-01T00:00:00Z", "2026-08-01T00:00:00Z", "days"],
      ["2026-07-01T09:00:00Z", "2026-07-03T23:00:00Z", "edges"],
    ]) {
      const period = { start, end };
      t.deepEqual(
        (await s.rows(period, { dimensions: ["region"] })).map((r) => [r[1], r[2]]),
        [
          ['{"region":"eu"}', "2"],
          ['{"region":"us"}', "2"],
        ],
        label,
      );
      t.deepEqual(
        (await s.rows(period, { dimensions: ["plan", "region"] })).map((r) => [r[1], r[2]]),
        [
          ['{"plan":"free","region":"eu"}', "1"],
          ['{"plan":"pro","region":"eu"}', "2"],
          ['{"plan":"pro","region":"us"}', "2"],
        ],
        label,
      );
      t.deepEqual(
        (await s.rows(period)).map((r) => [r[1], r[2]]),
        [["{}", "3"]],
        label,
      );
    }
    // Within one day (the raw events): the 3rd.
    t.deepEqual(
      (await s.rows({ start: "2026-07-03T00:00:00Z", end: "2026-07-04T00:00:00Z" }, { dimensions: ["region"] })).map((r) => [r[1], r[2]]),
      [
        ['{"region":"eu"}', "1"],
        ['{"region":"us"}', "2"],
      ],
    );
  });

  test(`${store}: values are texts: a number and a string of the same text are one value; long values; duplicates count once`, async (t) => {
    const s = await setup(server);
    const long = "x".repeat(200);
    await s.send([
      ["2026-08-01T10:00:00Z", 5],
      ["2026-08-02T10:00:00Z", "5"],
      ["2026-08-02T10:00:00Z", "5.0"],
      ["2026-08-02T11:00:00Z", "Ann"],
      ["2026-08-02T11:00:00Z", "ann"],
      ["2026-08-02T11:00:00Z", "ann "],
      ["2026-08-02T11:00:00Z", `${long}1`],
      ["2026-08-02T11:00:00Z", `${long}2`],
      ["2026-08-03T11:00:00Z", `${long}1`],
      ["2026-08-03T11:00:00Z", ""],
    ]);
    // 5, 5.0, Ann, ann, "ann ", long1, long2, "": 8.
    t.is(await s.value("2026-08-01T00:00:00Z", "2026-09-01T00:00:00Z"), "8");
    t.is(await s.value("2026-08-03T00:00:00Z", "2026-08-04T00:00:00Z"), "2", "long1 and the empty text, from the raw events");
    const event = { idempotency_key: "dup", subject_id: s.subject.id, event_name: "visit", timestamp: "2026-08-20T10:00:00Z", data: { user: "zed", region: "eu", plan: "pro" } };
    t.is((await ok(server, s.key, "POST", "/usage-events", event)).status, "accepted");
    t.is((await ok(server, s.key, "POST", "/usage-events", event)).status, "duplicate");
    t.is(await s.value("2026-08-01T00:00:00Z", "2026-09-01T00:00:00Z"), "9");
    t.is(await s.value("2026-08-20T00:00:00Z", "2026-08-21T00:00:00Z"), "1");
  });

  test(`${store}: an event without the field is a 400 naming it; any text is a value; a metric made after its events counts them`, async (t) => {
    const s = await setup(server);
    const missing = await rest(server.url, "POST", "/usage-events", s.key, { idempotency_key: "m1", subject_id: s.subject.id, event_name: "visit", data: { region: "eu" } });
    t.is(missing.status, 400);
    t.regex(missing.body.message, /data\.user: is required: read by pricing metric pm_\w+ \(unique_count\)/);
    // Events of another name before its metric exists, one without the field.
    await s.send(
      [
        ["2026-09-01T10:00:00Z", "p"],
        ["2026-09-05T10:00:00Z", "q"],
        ["2026-09-05T11:00:00Z", "p"],
        ["2026-09-06T11:00:00Z", undefined],
      ],
      "login",
    );
    const later = await ok(server, s.key, "POST", "/pricing-metrics", { event_name: "login", name: "Logins", unit: "user", aggregation: { aggregation_type: "unique_count", value_field: "user" } });
    const v = async (start: string, end: string) => (await s.summary({ start, end }, {}, later))[0].value;
    t.is(await v("2026-09-01T00:00:00Z", "2026-10-01T00:00:00Z"), "2");
    t.is(await v("2026-09-02T00:00:00Z", "2026-10-01T00:00:00Z"), "2");
    t.is(await v("2026-09-05T10:30:00Z", "2026-09-05T12:00:00Z"), "1");
    t.is(await v("2026-09-06T00:00:00Z", "2026-09-07T00:00:00Z"), null, "an event without the field does not count");
    // A sum metric beside a unique_count one on the same field: the field must then be a decimal.
    await ok(server, s.key, "POST", "/pricing-metrics", { event_name: "login", name: "Sum", unit: "u", aggregation: { aggregation_type: "sum", value_field: "user" } });
    const bad = await rest(server.url, "POST", "/usage-events", s.key, { idempotency_key: "m2", subject_id: s.subject.id, event_name: "login", data: { user: "p" } });
    t.is(bad.status, 400);
    t.regex(bad.body.message, /data\.user: must be a decimal number/);
  });

  test(`${store}: summaries equal a brute-force distinct count over the same events, for random periods and granularities`, async (t) => {
    const s = await setup(server);
    let seed = 7;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const DAY = 86_400_000;
    const base = Date.parse("2026-01-20T00:00:00Z");
    const events = Array.from({ length: 600 }, () => ({
      ts: base + Math.floor(rand() * 90 * DAY),
      user: `u${Math.floor(rand() * 40)}`,
      region: rand() < 0.5 ? "eu" : "us",
    }));
    await s.send(events.map((e) => [new Date(e.ts).toISOString(), e.user, { region: e.region }]));
    const distinct = (from: Range, region?: string) =>
      new Set(
        events
          .filter((e) => (from.inclusiveStart ? e.ts >= from.start : e.ts > from.start) && (from.inclusiveEnd ? e.ts <= from.end : e.ts < from.end) && (region === undefined || e.region === region))
          .map((e) => e.user),
      ).size;
    for (let trial = 0; trial < 14; trial++) {
      const a = base - 5 * DAY + Math.floor(rand() * 100 * DAY) + (rand() < 0.3 ? 0 : Math.floor(rand() * DAY));
      const long = rand() < 0.6;
      const b = a + (long ? Math.floor(rand() * 80 * DAY) : Math.floor(rand() * DAY));
      const r: Range = { start: a, end: b, inclusiveStart: rand() < 0.5, inclusiveEnd: rand() < 0.5 };
      const granularity = long ? (["", "day", "week"] as const)[trial % 3] : (["", "hour"] as const)[trial % 2];
      const period = { start: new Date(a).toISOString(), end: new Date(b).toISOString(), inclusive_start: r.inclusiveStart, inclusive_end: r.inclusiveEnd };
      const label = `${JSON.stringify(period)} ${granularity}`;
      const got = await s.summary(period, granularity ? { period_granularity: granularity } : {});
      const expected = buckets(r, granularity || undefined).map((bucket) => distinct(bucket));
      t.deepEqual(
        got.map((x: Json) => x.value),
        expected.map((n) => (n === 0 ? null : String(n))),
        label,
      );
      const byRegion = await s.summary(period, { dimensions: ["region"] });
      for (const row of byRegion.filter((x: Json) => x.value !== null)) t.is(row.value, String(distinct(r, row.dimension_coordinates.region)), `${label} ${row.dimension_coordinates.region}`);
    }
  });

  test(`${store}: concurrent batches naming the same values all commit, each value counted once`, async (t) => {
    const s = await setup(server);
    const HOUR = 3_600_000;
    const base = Date.parse("2026-10-01T00:00:00Z");
    const batches = Array.from({ length: 10 }, (_, b) => Array.from({ length: 200 }, (_, i) => ({ ts: base + ((b * 200 + i) % 72) * HOUR + b, user: `u${(b * 7 + i) % 50}`, key: `c${b}-${i}` })));
    const results = await Promise.all(
      batches.map((list) =>
        ok(server, s.key, "POST", "/usage-events/batch", {
          events: list.map((e) => ({
            idempotency_key: e.key,
            subject_id: s.subject.id,
            event_name: "visit",
            timestamp: new Date(e.ts).toISOString(),
            data: { user: e.user, region: "eu", plan: "pro" },
          })),
        }),
      ),
    );
    t.deepEqual(
      results.map((r) => r.accepted),
      batches.map(() => 200),
    );
    const all = batches.flat();
    t.is(await s.value("2026-10-01T00:00:00Z", "2026-10-04T00:00:00Z"), String(new Set(all.map((e) => e.user)).size));
    const daily = await s.rows({ start: "2026-10-01T00:00:00Z", end: "2026-10-04T00:00:00Z" }, { period_granularity: "day" });
    t.deepEqual(
      daily.map((r) => r[2]),
      [0, 1, 2].map((d) => String(new Set(all.filter((e) => Math.floor((e.ts - base) / (24 * HOUR)) === d).map((e) => e.user)).size)),
    );
  });

  test(`${store}: billing state and the invoice of a unique_count rate, simple and dimensional, on a test clock`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, ["region"], "active");
    const card = await s.card({
      usage_based_rates: [
        { usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: 1, price: usd(100) },
        {
          usage_based_rate_type: "dimensional",
          code: "regional",
          name: "Regional users",
          pricing_metric_id: m,
          dimensions: [{ key: "region", values: ["eu", "us"] }],
          pricing_matrix: {
            cells: [
              { dimension_coordinates: { region: "eu" }, price: usd(10) },
              { dimension_coordinates: { region: "us" }, price: usd(20) },
            ],
          },
        },
      ],
    });
    await s.subscribe({ rate_card_id: card });
    await s.events(
      [
        ["2026-01-14T23:59:59.999Z", "1", { user: "early", region: "eu" }],
        ["2026-01-15T00:00:00Z", "1", { user: "ann", region: "eu" }],
        ["2026-01-20T00:00:00Z", "1", { user: "ann", region: "eu" }],
        ["2026-01-21T00:00:00Z", "1", { user: "bob", region: "us" }],
        ["2026-02-01T00:00:00Z", "1", { user: "ann", region: "us" }],
        ["2026-02-14T23:59:59.999Z", "1", { user: "cat", region: "eu" }],
        ["2026-02-15T00:00:00Z", "1", { user: "dan", region: "eu" }],
      ],
      "active",
    );
    await s.advance("2026-02-10T00:00:00Z");
    const state = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
    t.deepEqual(
      state.usage_data.map((u: Json) => [u.rate_name, u.used_units]),
      [
        // ann, bob, cat.
        ["Active users", "3"],
        // Per cell, as the invoice bills it: eu {ann, cat} = 2 + us {bob, ann} = 2 = 4 (ann counts in each cell she is in).
        ["Regional users", "4"],
      ],
    );
    await s.advance("2026-02-15T00:00:00Z");
    // Jan 15 → Feb 15: ann, bob, cat = 3 − 1 included = 2 × 100; eu: ann, cat = 2 × 10, us: bob, ann = 2 × 20.
    t.deepEqual(await s.bills(), [
      [
        "open",
        "260",
        [
          ["Active users", "2", "100", "200"],
          ["Regional users (region=eu)", "2", "10", "20"],
          ["Regional users (region=us)", "2", "20", "40"],
        ],
      ],
    ]);
    const next = await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
    t.deepEqual(
      next.usage_data.map((u: Json) => u.used_units),
      ["1", "1"],
      "dan, in the new period",
    );
  });

  test(`${store}: late usage of a finalized period: a new value is billed as an adjustment, a value already counted is not`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    await s.subscribe({
      rate_card_id: await s.card({ usage_based_rates: [{ usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: 0, price: usd(100) }] }),
    });
    await s.events(
      [
        ["2026-01-20T00:00:00Z", "1", { user: "ann" }],
        ["2026-01-21T00:00:00Z", "1", { user: "bob" }],
      ],
      "active",
    );
    await s.advance("2026-02-15T01:00:00Z");
    // Late for January: ann again (already counted), then cat (new); February: dan.
    await s.events(
      [
        ["2026-01-25T00:00:00Z", "1", { user: "ann" }],
        ["2026-02-20T00:00:00Z", "1", { user: "dan" }],
      ],
      "active",
    );
    await s.advance("2026-02-16T01:00:00Z");
    await s.events([["2026-01-26T00:00:00Z", "1", { user: "cat" }]], "active");
    await s.advance("2026-03-15T01:00:00Z");
    const JAN = "(period 2026-01-15T00:00:00Z to 2026-02-15T00:00:00Z)";
    const lines = (await s.invoices()).flatMap((inv: Json) =>
      (inv.line_items as Json[]).map((l) => [inv.usage_period_start, l.kind, String(l.description).endsWith(JAN) ? "JAN" : l.description, String(l.quantity), l.amount.value]),
    );
    t.deepEqual(lines, [
      ["2026-01-15T00:00:00Z", "usage", "Active users", "2", "200"],
      ["2026-02-15T00:00:00Z", "usage", "Active users", "1", "100"],
      ["2026-02-15T00:00:00Z", "adjustment", "JAN", "1", "100"],
    ]);
    const summary = await s.call("POST", `/pricing-metrics/${m}/summary`, { subject_id: s.subjectId, period: { start: "2026-01-15T00:00:00Z", end: "2026-02-15T00:00:00Z" } });
    t.is(summary[0].value, "3", "ann, bob, cat: what January's lines add up to");
  });

  test(`${store}: billing state reads again follow every new event at once`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    await s.subscribe({
      rate_card_id: await s.card({ usage_based_rates: [{ usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: 0, price: usd(100) }] }),
    });
    const used = async () => (await s.call("GET", `/customer-access/${s.subjectId}/billing-state`)).usage_data[0].used_units;
    t.is(await used(), "0");
    const seen: string[] = [];
    for (const [at, user, expected] of [
      ["2026-01-20T00:00:00Z", "ann", "1"],
      ["2026-01-21T00:00:00Z", "ann", "1"],
      ["2026-02-14T23:59:59.999Z", "bob", "2"],
      ["2026-02-15T00:00:00Z", "cat", "2"],
      ["2026-01-15T00:00:00Z", "dan", "3"],
    ] as const) {
      await s.events([[at, "1", { user }]], "active");
      seen.push(await used(), await used());
      t.deepEqual(seen.slice(-2), [expected, expected], `after ${user} at ${at}`);
    }
  });

  test(`${store}: billing state brought up to date event by event equals a full count: edges, late events, a value twice, two subjects`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric({ aggregation_type: "unique_count", value_field: "user" }, [], "active");
    const card = await s.card({ usage_based_rates: [{ usage_based_rate_type: "simple", code: "mau", name: "Active users", pricing_metric_id: m, included_units: 0, price: usd(100) }] });
    await s.subscribe({ rate_card_id: card });
    const a = s.subjectId;
    const b = (await s.call("POST", "/subjects", { name: "Other", test_clock_id: s.clockId })).id;
    await s.call("POST", "/subscriptions", { subject_id: b, rate_card_id: card });
    const sent: { subject: string; at: number; user: string }[] = [];
    let seq = 0;
    const send = async (list: [string, string, string][]) => {
      if (list.length === 0) return;
      const events = list.map(([subject, at, user]) => ({ idempotency_key: `m${seq++}`, subject_id: subject, event_name: "active", timestamp: at, data: { user } }));
      const r = await s.call("POST", "/usage-events/batch", { events });
      t.is(r.rejected, 0);
      for (const [subject, at, user] of list) sent.push({ subject, at: Date.parse(at), user });
    };
    const [from, to] = [Date.parse("2026-01-15T00:00:00Z"), Date.parse("2026-02-15T00:00:00Z")];
    const byHand = (subject: string) => String(new Set(sent.filter((e) => e.subject === subject && e.at >= from && e.at < to).map((e) => e.user)).size);
    const used = async (subject: string) => (await s.call("GET", `/customer-access/${subject}/billing-state`)).usage_data[0].used_units;
    const summary = async (subject: string) =>
      (await s.call("POST", `/pricing-metrics/${m}/summary`, { subject_id: subject, period: { start: "2026-01-15T00:00:00Z", end: "2026-02-15T00:00:00Z" } }))[0].value ?? "0";
    const steps: [string, [string, string, string][]][] = [
      ["nothing yet", []],
      [
        "the period's first millisecond; just before it",
        [
          [a, "2026-01-15T00:00:00Z", "ann"],
          [a, "2026-01-14T23:59:59.999Z", "early"],
        ],
      ],
      [
        "its last millisecond; its end",
        [
          [a, "2026-02-14T23:59:59.999Z", "bob"],
          [a, "2026-02-15T00:00:00Z", "next"],
        ],
      ],
      [
        "a new value twice in one batch, a seen one",
        [
          [a, "2026-01-20T00:00:00Z", "cat"],
          [a, "2026-01-21T00:00:00Z", "cat"],
          [a, "2026-01-22T00:00:00Z", "ann"],
        ],
      ],
      [
        "the other subject: its own count",
        [
          [b, "2026-01-20T00:00:00Z", "ann"],
          [b, "2026-01-20T01:00:00Z", "zed"],
        ],
      ],
      ["a new value twice across two batches", [[a, "2026-02-01T00:00:00Z", "dan"]]],
      ["", [[a, "2026-02-02T00:00:00Z", "dan"]]],
    ];
    const check = async (note: string) => {
      for (const subject of [a, b]) {
        const want = byHand(subject);
        t.deepEqual([await used(subject), await used(subject), await summary(subject)], [want, want, want], `${note} (${subject === a ? "A" : "B"})`);
      }
    };
    for (const [note, list] of steps) {
      await send(list);
      await check(note);
    }
    // Late events: the clock is on in the period's last days; events of its first days arrive.
    await s.advance("2026-02-12T00:00:00Z");
    await check("clock moved");
    for (const [note, list] of [
      ["late: a seen value", [[a, "2026-01-16T00:00:00Z", "bob"]]],
      [
        "late: a new value, and one for the other subject",
        [
          [a, "2026-01-16T00:00:00Z", "eve"],
          [b, "2026-01-17T00:00:00Z", "eve"],
        ],
      ],
      ["late, before the period: nothing", [[a, "2026-01-10T00:00:00Z", "old"]]],
    ] as [string, [string, string, string][]][]) {
      await send(list);
      await check(note);
    }
    t.is(byHand(a), "5", "ann, bob, cat, dan, eve");
  });
}
