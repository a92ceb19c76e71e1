/**
 * Usage metering end to end on MariaDB and SQLite: idempotent ingestion (single, batch, gRPC
 * stream), bad input, concurrency, restarts, exact aggregations, and summaries checked against a
 * brute-force computation over the same events.
 */
import { toJson } from "@bufbuild/protobuf";
import test from "ava";
import { IngestService } from "../../src/billing/metering/usage.js";
import { dec, formatDecimal } from "../../src/billing/money.js";
import { createDatabase } from "../../src/db/datasource.js";
import { type Pipeline, Sql } from "../../src/db/sql.js";
import { SqlUsageStore } from "../../src/db/stores/usage-store.js";
import { PricingMetricService } from "../../src/gen/billing/v1/pricing_metric_service_pb.js";
import { UsageEventService } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { ok, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { type TestServer, startAppOn, startTestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

/** A fresh environment with a subject and metrics of every aggregation over event "api". */
async function setup(server: TestServer) {
  const key = await server.freshKey();
  const subject = await ok(server, key, "POST", "/subjects", { external_id: `ext-${Math.random().toString(36).slice(2)}` });
  const metric = async (aggregation: Json, dimensions: string[] = ["region", "model"]) =>
    ok(server, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", dimensions, aggregation });
  const sum = await metric({ aggregation_type: "sum", value_field: "n" });
  const count = await metric({ aggregation_type: "count" });
  const max = await metric({ aggregation_type: "max", value_field: "n" });
  const last = await metric({ aggregation_type: "last", value_field: "n" });
  const summary = async (m: Json, period: Json, extra: Json = {}) => ok(server, key, "POST", `/pricing-metrics/${m.id}/summary`, { subject_id: subject.id, period, ...extra });
  const total = async (m: Json) => (await summary(m, { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" }))[0].value;
  return { key, subject, sum, count, max, last, summary, total };
}

const event = (subject: string, k: string, n: unknown, extra: Json = {}) => ({
  idempotency_key: k,
  subject_id: subject,
  event_name: "api",
  data: { n, region: "eu", model: "small" },
  timestamp: "2026-03-01T10:00:00Z",
  ...extra,
});

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: accepted, duplicate, and 409 for the same key with another payload`, async (t) => {
    const s = await setup(server);
    // A JSON number with more digits than a double holds, sent as raw JSON text.
    const raw = JSON.stringify(event(s.subject.external_id, "k1", "NUMBER")).replace('"NUMBER"', "12345678901234567890.5");
    const first = await ok(server, s.key, "POST", "/usage-events", raw);
    t.is(first.status, "accepted");
    t.regex(first.id, /^ue_/);
    const again = await ok(server, s.key, "POST", "/usage-events", event(s.subject.id, "k1", "12345678901234567890.5"));
    t.deepEqual(again, { id: first.id, status: "duplicate" }, "same payload (subject by ID or external ID, number or string)");
    const conflict = await rest(server.url, "POST", "/usage-events", s.key, event(s.subject.id, "k1", 1));
    t.is(conflict.status, 409);
    t.is(conflict.body.code, "already_exists");
    t.is(await s.total(s.sum), "12345678901234567890.5");
    t.is(await s.total(s.count), "1");
  });

  test(`${store}: events at the largest accepted value sum exactly, beyond what one value may hold (DESIGN §6)`, async (t) => {
    const s = await setup(server);
    const top = "99999999999999999999.999999999999";
    // Three in one hour and one minute: their totals have more integer digits than an input may.
    for (const k of ["t1", "t2", "t3"]) t.is((await ok(server, s.key, "POST", "/usage-events", event(s.subject.id, k, top))).status, "accepted");
    t.is(await s.total(s.sum), "299999999999999999999.999999999997");
    t.is(await s.total(s.max), top);
  });

  test(`${store}: bad events are 400s naming the field (or 404) and store nothing`, async (t) => {
    const s = await setup(server);
    const other = await ok(server, server.keys.b, "POST", "/subjects", {});
    const cases: [Json, number, string[]][] = [
      [{ idempotency_key: "" }, 400, ["idempotency_key"]],
      [{ event_name: "" }, 400, ["event_name"]],
      [{ subject_id: "" }, 400, ["subject_id"]],
      [{ timestamp: "not a time" }, 400, ["timestamp"]],
      [{ data: { n: "12abc" } }, 400, ["data.n"]],
      [{ data: { region: "eu" } }, 400, ["data.n"]],
      [{ data: { n: "1.0000000000001" } }, 400, ["data.n"]],
      [{ data: { n: "100000000000000000000" } }, 400, ["data.n"]], // 21 integer digits (DESIGN §6)
      [{ data: { n: "-100000000000000000000" } }, 400, ["data.n"]],
      [{ data: { n: true } }, 400, ["data.n"]],
      [{ data: "n=1" }, 400, ["data"]],
      [{ data: { n: "1", ["k".repeat(256)]: "v" } }, 400, [`data.${"k".repeat(256)}`]],
      [{ subject_id: "nobody" }, 404, []],
      [{ subject_id: other.id }, 404, []],
    ];
    for (const [over, status, fields] of cases) {
      const r = await rest(server.url, "POST", "/usage-events", s.key, event(s.subject.id, "bad", 1, over));
      t.is(r.status, status, JSON.stringify(over));
      t.deepEqual(violatedFields(r.body), fields, JSON.stringify(over));
    }
    // None of them claimed the key or counted.
    t.is(await s.total(s.count), null);
    t.is((await ok(server, s.key, "POST", "/usage-events", event(s.subject.id, "bad", 1))).status, "accepted");
    // An event name no metric reads needs no value.
    t.is((await ok(server, s.key, "POST", "/usage-events", { ...event(s.subject.id, "free", "x"), event_name: "other" })).status, "accepted");
  });

  test(`${store}: the largest event the rules allow is stored whole (100 keys of 255 characters, values of 1,000)`, async (t) => {
    const s = await setup(server);
    const data: Record<string, string> = { n: "2", region: "eu", model: "small" };
    // Three-byte UTF-8 characters: about 380 KB of JSON, beyond a 64 KB TEXT column.
    for (let i = 0; Object.keys(data).length < 100; i++) data[`${String(i).padStart(3, "0")}${"語".repeat(252)}`] = "語".repeat(1000);
    const r = await ok(server, s.key, "POST", "/usage-events", event(s.subject.id, "largest", "2", { data }));
    t.is(r.status, "accepted");
    t.is(await s.total(s.sum), "2");
    const db = await createDatabase(server.db.url, { poolSize: 1 });
    await db.dataSource.initialize();
    try {
      const stored = await db.dataSource.query("SELECT data FROM usage_events WHERE id = ?", [r.id]);
      t.deepEqual(JSON.parse(stored[0].data), data);
    } finally {
      await db.dataSource.destroy();
    }
  });

  test(`${store}: an event's subject_id is an ID before it is an external ID`, async (t) => {
    const s = await setup(server);
    // Another subject whose external ID is the first one's ID.
    const twin = await ok(server, s.key, "POST", "/subjects", { external_id: s.subject.id });
    const byExternal = await ok(server, s.key, "POST", "/subjects", { external_id: `ext-${Math.random().toString(36).slice(2)}` });
    await ok(server, s.key, "POST", "/usage-events/batch", {
      events: [event(s.subject.id, "by-id", "3"), event(byExternal.external_id, "by-external", "4")],
    });
    const total = async (subjectId: string) =>
      (await ok(server, s.key, "POST", `/pricing-metrics/${s.sum.id}/summary`, { subject_id: subjectId, period: { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" } }))[0].value;
    t.is(await total(s.subject.id), "3");
    t.is(await total(twin.id), null);
    t.is(await total(byExternal.id), "4");
  });

  test(`${store}: 20 concurrent identical requests count once`, async (t) => {
    const s = await setup(server);
    const results = await Promise.all(Array.from({ length: 20 }, () => ok(server, s.key, "POST", "/usage-events", event(s.subject.id, "same", "2.5"))));
    t.is(results.filter((r) => r.status === "accepted").length, 1);
    t.is(results.filter((r) => r.status === "duplicate").length, 19);
    t.is(new Set(results.map((r) => r.id)).size, 1);
    t.is(await s.total(s.sum), "2.5");
    t.is(await s.total(s.count), "1");
  });

  test(`${store}: concurrent distinct events all count, exactly`, async (t) => {
    const s = await setup(server);
    await Promise.all(Array.from({ length: 200 }, (_, i) => ok(server, s.key, "POST", "/usage-events", event(s.subject.id, `c${i}`, "0.1"))));
    t.is(await s.total(s.sum), "20");
    t.is(await s.total(s.count), "200");
  });

  test(`${store}: a batch judges each event on its own, in order; over 1,000 is a 400`, async (t) => {
    const s = await setup(server);
    await ok(server, s.key, "POST", "/usage-events", event(s.subject.id, "seen", 1));
    const r = await ok(server, s.key, "POST", "/usage-events/batch", {
      events: [
        event(s.subject.id, "b0", "1.25"),
        event(s.subject.id, "seen", 1),
        event(s.subject.id, "seen", 2),
        event(s.subject.id, "", 1),
        event("nobody", "b4", 1),
        event(s.subject.id, "b5", "abc"),
        event(s.subject.id, "b0", "1.25"),
        event(s.subject.id, "b7", 3, { timestamp: "soon" }),
        event(s.subject.id, "b8", "0.75"),
      ],
    });
    t.deepEqual(
      r.results.map((x: Json) => [x.status, x.error?.code ?? "", x.error?.field_violations.map((v: Json) => v.field) ?? []]),
      [
        ["accepted", "", []],
        ["duplicate", "", []],
        ["rejected", "already_exists", []],
        ["rejected", "invalid_argument", ["events[3].idempotency_key"]],
        ["rejected", "not_found", []],
        ["rejected", "invalid_argument", ["events[5].data.n"]],
        ["duplicate", "", []],
        ["rejected", "invalid_argument", ["events[7].timestamp"]],
        ["accepted", "", []],
      ],
    );
    t.is(r.results[6].id, r.results[0].id, "a repeat within the batch is a duplicate of the first");
    t.deepEqual(
      r.results.map((x: Json) => (x.status === "rejected" ? [x.id, x.error !== null] : [typeof x.id, x.error])),
      r.results.map((x: Json) => (x.status === "rejected" ? [null, true] : ["string", null])),
      "a rejected event has no ID (null); an accepted one no error (null)",
    );
    t.deepEqual([r.accepted, r.duplicate, r.rejected], [2, 2, 5]);
    t.is(await s.total(s.sum), "3");

    const tooMany = await rest(server.url, "POST", "/usage-events/batch", s.key, { events: Array.from({ length: 1001 }, (_, i) => event(s.subject.id, `x${i}`, 1)) });
    t.is(tooMany.status, 400);
    t.deepEqual(violatedFields(tooMany.body), ["events"]);
    t.is((await rest(server.url, "POST", "/usage-events/batch", s.key, { events: [] })).status, 400);
    t.is(await s.total(s.count), "3", "the refused batches wrote nothing");
  });

  test(`${store}: the gRPC stream commits everything it is sent and reports rejections by position`, async (t) => {
    const s = await setup(server);
    const c = rpcClient(UsageEventService, server.url, "grpc", s.key);
    async function* events() {
      for (let i = 0; i < 2500; i++) {
        const bad = i % 1000 === 999;
        yield {
          idempotencyKey: i === 2400 ? "s0" : `s${i}`,
          subjectId: s.subject.id,
          eventName: "api",
          data: { n: bad ? "oops" : "0.01", region: "us", model: "large" },
          timestamp: timestampFromDate(new Date("2026-03-02T00:00:00Z")),
        };
      }
    }
    const res = await c.streamUsageEvents(events());
    t.deepEqual([res.received, res.accepted, res.duplicate, res.rejected], [2500, 2497, 1, 2]);
    t.deepEqual(
      res.rejections.map((r) => [r.index, r.error?.fieldViolations[0]?.field]),
      [
        [999, "events[999].data.n"],
        [1999, "events[1999].data.n"],
      ],
    );
    t.is(await s.total(s.sum), "24.97");
  });

  test(`${store}: sum, count, max and last are exact; last breaks timestamp ties by idempotency key`, async (t) => {
    const s = await setup(server);
    const values: [string, string, string][] = [
      ["a", "0.000000000001", "2026-03-01T10:00:00Z"],
      ["b", "99999999999999.999999999999", "2026-03-01T11:00:00Z"],
      ["c", "-5", "2026-03-01T12:00:00Z"],
      ["e", "3", "2026-03-01T12:00:00Z"],
      ["d", "7", "2026-03-01T12:00:00Z"],
    ];
    await ok(server, s.key, "POST", "/usage-events/batch", { events: values.map(([k, n, ts]) => event(s.subject.id, k, n, { timestamp: ts })) });
    t.is(await s.total(s.sum), "100000000000005");
    t.is(await s.total(s.count), "5");
    t.is(await s.total(s.max), "99999999999999.999999999999");
    t.is(await s.total(s.last), "3", "at 12:00 the keys c, d, e tie; e is greatest");
  });

  // A period starting mid-minute reads a sum or count as the whole minute's totals less the events
  // before its start (usage.ts parts); a max, and an end mid-minute, from the events themselves.
  test(`${store}: summaries starting mid-minute: every aggregation and combination equals a count of the events`, async (t) => {
    const s = await setup(server);
    const minute = Date.parse("2026-03-02T10:15:00Z");
    const events: { k: string; at: number; n: string; region: string; model: string }[] = [];
    // Offsets in ms from the minute: before it, inside it on both sides of the starts below, after it.
    const offsets = [-1, 0, 1, 7_000, 7_122, 7_123, 7_124, 30_000, 59_999, 60_000, 60_001, 125_000];
    offsets.forEach((o, i) => {
      events.push({ k: `m${i}`, at: minute + o, n: `${i + 1}.5`, region: i % 2 ? "eu" : "us", model: "small" });
    });
    // A combination whose only events in the start's minute are before the start: none in the answer.
    events.push({ k: "early", at: minute, n: "100", region: "ap", model: "tiny" });
    await ok(server, s.key, "POST", "/usage-events/batch", {
      events: events.map((e) => event(s.subject.id, e.k, e.n, { timestamp: new Date(e.at).toISOString(), data: { n: e.n, region: e.region, model: e.model } })),
    });
    const expect = (agg: "sum" | "count" | "max", start: number, end: number, inclusiveStart: boolean, inclusiveEnd: boolean, grouped = true) => {
      const inside = events.filter((e) => (inclusiveStart ? e.at >= start : e.at > start) && (inclusiveEnd ? e.at <= end : e.at < end));
      const groups = new Map<string, string[]>();
      for (const e of inside) {
        const k = grouped ? `${e.region}/${e.model}` : "all";
        groups.set(k, [...(groups.get(k) ?? []), e.n]);
      }
      const value = (ns: string[]) =>
        agg === "count" ? String(ns.length) : agg === "sum" ? formatDecimal(ns.reduce((a, n) => a.plus(dec(n)), dec(0))) : formatDecimal(ns.map((n) => dec(n)).reduce((a, b) => (b.gt(a) ? b : a)));
      return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, ns]) => [k, value(ns)]);
    };
    for (const startOffset of [1, 7_123, 59_999]) {
      for (const [endOffset, inclusiveStart, inclusiveEnd] of [
        [180_000, true, false],
        [180_000, false, false],
        [60_000, true, false],
        [30_000, true, true],
        [3_600_000 * 3, false, true],
      ] as const) {
        const start = minute + startOffset;
        const end = minute + endOffset;
        if (end <= start) continue;
        const period = { start: new Date(start).toISOString(), end: new Date(end).toISOString(), inclusive_start: inclusiveStart, inclusive_end: inclusiveEnd };
        for (const agg of ["sum", "count", "max"] as const) {
          const got = await s.summary(s[agg], period, { dimensions: ["region", "model"] });
          const want = expect(agg, start, end, inclusiveStart, inclusiveEnd);
          t.deepEqual(
            got
              .filter((x: Json) => x.value !== null)
              .map((x: Json) => [`${x.dimension_coordinates.region}/${x.dimension_coordinates.model}`, x.value])
              .sort(([a]: string[], [b]: string[]) => ((a as string) < (b as string) ? -1 : 1)),
            want,
            `${agg} over ${JSON.stringify(period)}`,
          );
          if (want.length === 0)
            t.deepEqual(
              got.map((x: Json) => [x.dimension_coordinates, x.value]),
              [[{}, null]],
              "no events: one empty row",
            );
          else t.is(got.length, want.length, "no row for a combination with no events in the period");
          const whole = await s.summary(s[agg], period);
          t.is(whole[0].value, expect(agg, start, end, inclusiveStart, inclusiveEnd, false)[0]?.[1] ?? null, `${agg} over ${JSON.stringify(period)}, no dimensions`);
        }
      }
    }
  });

  test(`${store}: summaries: exact period edges, dimensions, granularity, null for empty buckets`, async (t) => {
    const s = await setup(server);
    const at = (k: string, ts: string, n: string, region = "eu", model = "small") => event(s.subject.id, k, n, { timestamp: ts, data: { n, region, model } });
    await ok(server, s.key, "POST", "/usage-events/batch", {
      events: [
        at("e1", "2026-03-02T00:00:00Z", "1"), // on the period start
        at("e2", "2026-03-02T05:30:00Z", "2", "us"),
        at("e3", "2026-03-03T23:59:59.999Z", "4", "us", "large"),
        at("e4", "2026-03-05T00:00:00Z", "8"), // on the period end
      ],
    });
    const period = (inclusive_start?: boolean, inclusive_end?: boolean) => ({ start: "2026-03-02T00:00:00Z", end: "2026-03-05T00:00:00Z", inclusive_start, inclusive_end });
    const value = async (p: Json) => (await s.summary(s.sum, p))[0].value;
    t.is(await value(period()), "7", "default: start inclusive, end exclusive");
    t.is(await value(period(false, false)), "6");
    t.is(await value(period(true, true)), "15");
    t.is(await value(period(false, true)), "14");

    const byRegion = await s.summary(s.sum, period(), { dimensions: ["region"] });
    t.deepEqual(
      byRegion.map((x: Json) => [x.dimension_coordinates, x.value]),
      [
        [{ region: "eu" }, "1"],
        [{ region: "us" }, "6"],
      ],
    );
    const daily = await s.summary(s.sum, period(true, true), { period_granularity: "day" });
    t.deepEqual(
      daily.map((x: Json) => [x.period.start, x.period.end, x.period.inclusive_end, x.value]),
      [
        ["2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z", false, "3"],
        ["2026-03-03T00:00:00Z", "2026-03-04T00:00:00Z", false, "4"],
        ["2026-03-04T00:00:00Z", "2026-03-05T00:00:00Z", false, null],
        ["2026-03-05T00:00:00Z", "2026-03-05T00:00:00Z", true, "8"],
      ],
    );
    t.deepEqual(daily[2].dimension_coordinates, {});
    const weekly = await s.summary(s.count, { start: "2026-03-01T00:00:00Z", end: "2026-03-10T00:00:00Z" }, { period_granularity: "week", dimensions: ["model"] });
    t.deepEqual(
      weekly.map((x: Json) => [x.period.start, x.dimension_coordinates, x.value]),
      [
        ["2026-03-01T00:00:00Z", {}, null], // Sunday: the week of Monday Feb 23, clipped
        ["2026-03-02T00:00:00Z", { model: "large" }, "1"],
        ["2026-03-02T00:00:00Z", { model: "small" }, "3"],
        ["2026-03-09T00:00:00Z", {}, null],
      ],
    );
    t.is(new Set(daily.map((x: Json) => x.id)).size, 4);
    t.deepEqual((await s.summary(s.sum, period(), { period_granularity: "day" })).map((x: Json) => x.id).slice(0, 2), daily.map((x: Json) => x.id).slice(0, 2), "ids are stable");

    const bad = async (body: Json) => violatedFields((await rest(server.url, "POST", `/pricing-metrics/${s.sum.id}/summary`, s.key, { subject_id: s.subject.id, period: period(), ...body })).body);
    t.deepEqual(await bad({ dimensions: ["color"] }), ["dimensions[0]"]);
    t.deepEqual(await bad({ period_granularity: "month" }), ["period_granularity"]);
    t.deepEqual(await bad({ period: { start: "2026-03-05T00:00:00Z", end: "2026-03-02T00:00:00Z" } }), ["period.end"]);
    t.deepEqual(await bad({ period: { start: "2026-03-05T00:00:00Z" } }), ["period.end"]);
    t.deepEqual(await bad({ period: { start: "yesterday", end: "2026-03-02T00:00:00Z" } }), ["period.start"]);
    t.deepEqual(await bad({ period: { start: "2000-01-01T00:00:00Z", end: "2026-01-01T00:00:00Z" }, period_granularity: "hour" }), ["period_granularity"]);
    t.deepEqual(await bad({ subject_id: "" }), ["subject_id"]);
    t.is((await rest(server.url, "POST", `/pricing-metrics/${s.sum.id}/summary`, s.key, { subject_id: "nobody", period: period() })).status, 404);
    t.is((await rest(server.url, "POST", `/pricing-metrics/${s.sum.id}/summary`, server.keys.b, { subject_id: s.subject.id, period: period() })).status, 404);

    // gRPC: the value is a google.protobuf.Value: a string, or null.
    const c = rpcClient(PricingMetricService, server.url, "grpc", s.key);
    const res = await c.createPricingMetricSummary({
      pricingMetricId: s.sum.id,
      subjectId: s.subject.id,
      period: { start: { seconds: BigInt(Date.parse("2026-03-02T00:00:00Z") / 1000) }, end: { seconds: BigInt(Date.parse("2026-03-05T00:00:00Z") / 1000) } },
      periodGranularity: "day",
    });
    t.deepEqual(
      res.summaries.map((x) => toJson(PricingMetricService.method.createPricingMetricSummary.output.field.summaries.message as never, x as never) as Json).map((x: Json) => x.value),
      ["3", "4", null],
    );
  });

  test(`${store}: summaries equal a brute-force computation over the same events, for random periods`, async (t) => {
    const s = await setup(server);
    let seed = 42;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const base = Date.parse("2026-04-01T00:00:00Z");
    const HOUR = 3_600_000;
    const events = Array.from({ length: 400 }, (_, i) => {
      const onHour = rand() < 0.2;
      const ts = base + Math.floor(rand() * 72) * HOUR + (onHour ? 0 : Math.floor(rand() * HOUR));
      return {
        k: `r${i}`,
        ts,
        n: `${Math.floor(rand() * 1000)}.${String(Math.floor(rand() * 1000)).padStart(3, "0")}`,
        region: rand() < 0.5 ? "eu" : "us",
        model: rand() < 0.3 ? "large" : "small",
      };
    });
    for (let i = 0; i < events.length; i += 200) {
      await ok(server, s.key, "POST", "/usage-events/batch", {
        events: events
          .slice(i, i + 200)
          .map((e) => ({ idempotency_key: e.k, subject_id: s.subject.id, event_name: "api", data: { n: e.n, region: e.region, model: e.model }, timestamp: new Date(e.ts).toISOString() })),
      });
    }
    for (let trial = 0; trial < 12; trial++) {
      const a = base + Math.floor(rand() * 80) * HOUR + (rand() < 0.5 ? 0 : Math.floor(rand() * HOUR));
      const b = a + Math.floor(rand() * 40) * HOUR + (rand() < 0.5 ? 0 : Math.floor(rand() * HOUR));
      const is = rand() < 0.5;
      const ie = rand() < 0.5;
      const inRange = (ts: number) => (is ? ts >= a : ts > a) && (ie ? ts <= b : ts < b);
      const chosen = events.filter((e) => inRange(e.ts));
      const sum = chosen.reduce((acc, e) => acc.plus(dec(e.n)), dec(0));
      const max = chosen.reduce((m, e) => (m === null || dec(e.n).gt(m) ? dec(e.n) : m), null as ReturnType<typeof dec> | null);
      const last = [...chosen].sort((x, y) => x.ts - y.ts || (x.k < y.k ? -1 : 1)).at(-1);
      const period = { start: new Date(a).toISOString(), end: new Date(b).toISOString(), inclusive_start: is, inclusive_end: ie };
      const label = JSON.stringify(period);
      t.is((await s.summary(s.sum, period))[0].value, chosen.length ? formatDecimal(sum) : null, `sum ${label}`);
      t.is((await s.summary(s.count, period))[0].value, chosen.length ? String(chosen.length) : null, `count ${label}`);
      t.is((await s.summary(s.max, period))[0].value, max ? formatDecimal(max) : null, `max ${label}`);
      t.is((await s.summary(s.last, period))[0].value, last ? formatDecimal(dec(last.n)) : null, `last ${label}`);
      const byRegion = await s.summary(s.sum, period, { dimensions: ["region"] });
      for (const row of byRegion.filter((x: Json) => x.value !== null)) {
        const expected = chosen.filter((e) => e.region === row.dimension_coordinates.region).reduce((acc, e) => acc.plus(dec(e.n)), dec(0));
        t.is(row.value, formatDecimal(expected), `region ${row.dimension_coordinates.region} ${label}`);
      }
    }
  });

  test(`${store}: a metric created after its events were ingested counts them`, async (t) => {
    const s = await setup(server);
    await ok(server, s.key, "POST", "/usage-events/batch", {
      events: [event(s.subject.id, "late1", "1", { event_name: "later" }), event(s.subject.id, "late2", "2", { event_name: "later", timestamp: "2026-03-01T10:15:00Z" })],
    });
    const m = await ok(server, s.key, "POST", "/pricing-metrics", { event_name: "later", name: "Later", unit: "u", aggregation: { aggregation_type: "sum", value_field: "n" } });
    t.is((await s.summary(m, { start: "2026-03-01T00:00:00Z", end: "2026-03-02T00:00:00Z" }))[0].value, "3");
  });
}

mysqlOnly("mysql: duplicates survive a restart", async (t) => {
  const server = await startTestServer("mysql");
  try {
    const s = await setup(server);
    const first = await ok(server, s.key, "POST", "/usage-events", event(s.subject.id, "persist", 1));
    await server.app.stop();
    const app = await startAppOn(server.db.url);
    try {
      t.deepEqual(await ok(app, s.key, "POST", "/usage-events", event(s.subject.id, "persist", 1)), { id: first.id, status: "duplicate" });
    } finally {
      await app.stop();
    }
  } finally {
    await server.stop();
  }
});

for (const store of STORES) {
  test(`${store}: a batch of 1,000 events of 40 KB each is written in statements the database accepts`, async (t) => {
    const server = await startTestServer(store);
    const db = await createDatabase(server.db.url, { poolSize: 2 });
    try {
      const s = await setup(server);
      await db.dataSource.initialize();
      const env = (await db.dataSource.query("SELECT environment_id FROM subjects WHERE id = ?", [s.subject.id]))[0].environment_id;
      const caller = { environmentId: env, mode: "test" as const, keyKind: "secret" as const };
      const ingest = new IngestService(new SqlUsageStore(db.sql, db.entities), () => new Date());
      // 40 MB in all, 20 MB per 500 rows: more than MariaDB's default max_allowed_packet (16 MB).
      const bulk: Record<string, string> = {};
      for (let k = 0; k < 40; k++) bulk[`f${k}`] = "x".repeat(1000);
      const inputs = Array.from({ length: 1000 }, (_, i) => ({
        idempotencyKey: `big-${i}`,
        subjectId: s.subject.id,
        eventName: "api",
        data: { ...bulk, n: "1.5", region: "eu", model: "small" },
        timestamp: new Date("2026-03-01T10:00:00Z"),
      }));
      const outcomes = await ingest.ingest(caller, inputs, (i) => `events[${i}].`);
      t.deepEqual(
        outcomes.map((o) => o.status),
        inputs.map(() => "accepted"),
      );
      t.is(await s.total(s.sum), "1500");
      t.is(await s.total(s.count), "1000");
    } finally {
      await db.dataSource.destroy();
      await server.stop();
    }
  });

  test(`${store}: totals of long dimension values are written in statements the database accepts`, async (t) => {
    const server = await startTestServer(store);
    const db = await createDatabase(server.db.url, { poolSize: 2 });
    try {
      const s = await setup(server);
      const dims = Array.from({ length: 20 }, (_, k) => `d${k}`);
      const wide = await ok(server, s.key, "POST", "/pricing-metrics", {
        event_name: "wide",
        name: "Wide",
        unit: "call",
        dimensions: dims,
        aggregation: { aggregation_type: "sum", value_field: "n" },
      });
      await db.dataSource.initialize();
      const env = (await db.dataSource.query("SELECT environment_id FROM subjects WHERE id = ?", [s.subject.id]))[0].environment_id;
      const ingest = new IngestService(new SqlUsageStore(db.sql, db.entities), () => new Date());
      // Each event its own combination of 20 values of 1,000 three-byte characters: about 60 KB of
      // dimensions per total, 18 MB per 300 totals (MariaDB's default max_allowed_packet is 16 MB).
      const inputs = Array.from({ length: 300 }, (_, i) => {
        const data: Record<string, string> = { n: "2" };
        for (const d of dims) data[d] = `${i}`.padEnd(1000, "語");
        return { idempotencyKey: `wide-${i}`, subjectId: s.subject.id, eventName: "wide", data, timestamp: new Date("2026-03-01T10:00:00Z") };
      });
      const outcomes = await ingest.ingest({ environmentId: env, mode: "test", keyKind: "secret" }, inputs, (i) => `events[${i}].`);
      t.deepEqual(
        outcomes.map((o) => o.status),
        inputs.map(() => "accepted"),
      );
      t.is(
        (await ok(server, s.key, "POST", `/pricing-metrics/${wide.id}/summary`, { subject_id: s.subject.id, period: { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" } }))[0].value,
        "600",
      );
    } finally {
      await db.dataSource.destroy();
      await server.stop();
    }
  });

  test(`${store}: text with quotes, backslashes, question marks and control characters is stored as sent`, async (t) => {
    const server = await startTestServer(store);
    const db = await createDatabase(server.db.url, { poolSize: 1 });
    try {
      const s = await setup(server);
      // Characters SQL string literals escape, a `?` (a placeholder outside a literal), and text
      // a literal holds as it is; the region is a dimension (stored in the totals' JSON too).
      const tricky = ["it's", 'a "b"', "back\\slash\\", "q?x??", "nul\u0000ctl\u001a\b\t\r\n", "語\u2028😀", "\\'", "?'?"];
      const events = tricky.map((text, i) => event(s.subject.id, `key-${i}-${text}`, `${i + 1}`, { event_name: "api", data: { n: `${i + 1}`, region: text, model: `m${text}`, [`k${text}`]: text } }));
      const first = await ok(server, s.key, "POST", "/usage-events/batch", { events });
      t.is(first.accepted, tricky.length, JSON.stringify(first));
      const again = await ok(server, s.key, "POST", "/usage-events/batch", { events });
      t.is(again.duplicate, tricky.length, "the same events again are duplicates, key by key");
      await db.dataSource.initialize();
      const rows: { idempotency_key: string; data: unknown }[] = await db.dataSource.query("SELECT idempotency_key, data FROM usage_events WHERE subject_id = ?", [s.subject.id]);
      t.deepEqual(
        rows.map((r) => [r.idempotency_key, typeof r.data === "string" ? JSON.parse(r.data) : r.data]).sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1)),
        events.map((e) => [e.idempotency_key, e.data]).sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1)),
      );
      const byRegion = await s.summary(s.last, { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" }, { dimensions: ["region", "model"] });
      t.deepEqual(byRegion.map((r: Json) => [r.dimension_coordinates.region, r.dimension_coordinates.model, r.value]).sort(), tricky.map((text, i) => [text, `m${text}`, `${i + 1}`]).sort());
    } finally {
      await db.dataSource.destroy();
      await server.stop();
    }
  });

  test(`${store}: the store tells a refused value from an unreachable database`, async (t) => {
    const server = await startTestServer(store);
    const db = await createDatabase(server.db.url, { poolSize: 1 });
    try {
      await db.dataSource.initialize();
      const usage = new SqlUsageStore(db.sql, db.entities);
      // A value the database refuses: a 300-character environment name (varchar(100), strict mode on MySQL;
      // on SQLite a NOT NULL column given NULL).
      const refused = await t.throwsAsync(
        store === "mysql"
          ? db.dataSource.query("INSERT INTO environments (id, name, mode, created_at) VALUES (?, ?, 'test', NOW())", ["env_x", "n".repeat(300)])
          : db.dataSource.query("INSERT INTO environments (id, name, mode, created_at) VALUES (?, NULL, 'test', '2026-01-01')", ["env_x"]),
      );
      t.true(usage.failedOnData(refused), String(refused));
      t.false(usage.failedOnData(new Error("connect ECONNREFUSED 127.0.0.1:1")));
      if (store === "mysql") {
        const down = await createDatabase("mysql://root@127.0.0.1:1/nothing", { poolSize: 1 }).then(
          () => undefined,
          (err: unknown) => err,
        );
        t.truthy(down);
        t.false(usage.failedOnData(down), String(down));
      } else {
        t.false(usage.failedOnData(Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" })));
      }
    } finally {
      await db.dataSource.destroy();
      await server.stop();
    }
  });

  test(`${store}: a Connect or gRPC request over 5 MB is refused before it is read, like a REST body`, async (t) => {
    const server = await startTestServer(store);
    try {
      const s = await setup(server);
      const big = JSON.stringify({ events: [event(s.subject.id, "too-big", "1", { data: { n: "1", pad: "x".repeat(6 * 1024 * 1024) } })] });
      const res = await fetch(`${server.url}/billing.v1.UsageEventService/CreateUsageEventBatch`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-protocol-version": "1", "x-api-key": s.key },
        body: big,
      });
      const body = (await res.json()) as { code: string };
      t.is(body.code, "resource_exhausted");
      t.is(await s.total(s.count), null);
    } finally {
      await server.stop();
    }
  });

  test(`${store}: a write that fails claims nothing: the retry is accepted and counted once`, async (t) => {
    const server = await startTestServer(store);
    try {
      const s = await setup(server);
      await server.app.stop();
      const db = await createDatabase(server.db.url, { poolSize: 2 });
      await db.dataSource.initialize();
      // Fails every transaction after its statements ran, so the database rolls them back.
      class FailingSql extends Sql {
        failures = 1;
        override pipelined<T>(fn: (p: Pipeline) => Promise<T>, options?: { readCommitted?: boolean }): Promise<T> {
          return super.pipelined(async (p) => {
            const out = await fn(p);
            await p.flush(); // the totals too: every statement has run
            if (this.failures-- > 0) throw new Error("connection lost before commit");
            return out;
          }, options);
        }
      }
      const env = (await db.dataSource.query("SELECT environment_id FROM subjects WHERE id = ?", [s.subject.id]))[0].environment_id;
      const caller = { environmentId: env, mode: "test" as const, keyKind: "secret" as const };
      const ingest = new IngestService(new SqlUsageStore(new FailingSql(db.dataSource, db.dialect), db.entities), () => new Date());
      const input = { idempotencyKey: "retry", subjectId: s.subject.id, eventName: "api", data: { n: "5" }, timestamp: undefined };
      await t.throwsAsync(
        ingest.ingest(caller, [input], () => ""),
        { message: /connection lost/ },
      );
      const [outcome] = await ingest.ingest(caller, [input], () => "");
      t.is(outcome?.status, "accepted");
      const [again] = await ingest.ingest(caller, [input], () => "");
      t.is(again?.status, "duplicate");
      const rows = await db.dataSource.query("SELECT COUNT(*) AS n FROM usage_events WHERE idempotency_key = 'retry'");
      t.is(Number(rows[0].n), 1);
      await db.dataSource.destroy();
      const app = await startAppOn(server.db.url);
      try {
        t.is(
          (await ok(app, s.key, "POST", `/pricing-metrics/${s.sum.id}/summary`, { subject_id: s.subject.id, period: { start: "2000-01-01T00:00:00Z", end: "2100-01-01T00:00:00Z" } }))[0].value,
          "5",
        );
      } finally {
        await app.stop();
      }
    } finally {
      await server.stop();
    }
  });
}
