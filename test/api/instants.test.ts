/**
 * Instants through the real server on MariaDB and SQLite (DESIGN §4): every field that takes an
 * instant refuses an impossible calendar date, a date alone and an instant outside
 * 2000-01-01T00:00:00Z ≤ t < 2200-01-01T00:00:00Z with a 400 naming the field, and writes
 * nothing; the same over gRPC and Connect (binary and JSON); Timestamps are truncated to the
 * millisecond; cycle ends derived past 2200 are stored and read back.
 */
import { create } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import test from "ava";
import { createDatabase } from "../../src/db/datasource.js";
import { PricingMetricService } from "../../src/gen/billing/v1/pricing_metric_service_pb.js";
import { SubscriptionTimelineService } from "../../src/gen/billing/v1/subscription_timeline_service_pb.js";
import { TestClockService } from "../../src/gen/billing/v1/test_clock_service_pb.js";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { type Protocol, type RestResponse, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** Refused on every instant field: [value, what the message says]. */
const BAD: [string, RegExp][] = [
  ["2026-02-30T00:00:00Z", /2026-02-30 is not a calendar date/],
  ["2100-02-29T00:00:00Z", /February 2100 has 28 days/],
  ["2026-04-31T12:00:00+02:00", /April 2026 has 30 days/],
  ["2026-01-31T24:00:00Z", /hour/],
  ["2026-01-31", /a date alone is not accepted/],
  ["1999-12-31T23:59:59.999Z", /from 2000-01-01T00:00:00Z \(inclusive\) to 2200-01-01T00:00:00Z \(exclusive\)/],
  ["2200-01-01T00:00:00Z", /to 2200-01-01T00:00:00Z \(exclusive\)/],
  ["9999-12-31T23:59:59.9995Z", /from 2000-01-01/],
];

/** The REST matrix (every field × value) uses a few: the parser's unit tests cover the rest. */
const SOME_BAD = BAD.filter(([v]) => ["2026-02-30T00:00:00Z", "2026-01-31", "1999-12-31T23:59:59.999Z", "2200-01-01T00:00:00Z", "9999-12-31T23:59:59.9995Z"].includes(v));

const free = { fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] };
const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };
const item = (start: string, end: string | null, rate_card_id: string) => ({ period: { start, end }, subscription_input: { rate_card_id, fixed_rate_quantities: { seats: 1 } } });
const at = (iso: string): Timestamp => {
  const ms = Date.parse(iso);
  return create(TimestampSchema, { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 });
};

/** The violation descriptions of a REST error body. */
function descriptions(body: Json): string[] {
  const br = body.details?.find((d: Json) => d.type === "google.rpc.BadRequest");
  return (br?.debug?.field_violations ?? []).map((v: Json) => v.description ?? "");
}

for (const store of STORES) {
  let count: (table: string, environmentOf: string) => Promise<number>;
  const server = useServer(store, {}, async (started) => {
    const db = await createDatabase(started.db.url, { poolSize: 1 });
    await db.dataSource.initialize();
    // Rows of a table in the environment of a subject.
    count = async (table, subjectId) => {
      const rows = await db.sql.query<{ n: unknown }[]>(`SELECT COUNT(*) AS n FROM ${table} WHERE environment_id = (SELECT environment_id FROM subjects WHERE id = ?)`, [subjectId]);
      return Number(rows[0]?.n);
    };
    return () => db.dataSource.destroy();
  });

  async function setup() {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const metric = await s.metric({ aggregation_type: "count" });
    const card = await s.card(free);
    const timeline = (await s.call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card })).id as string;
    return { s, metric, card, timeline };
  }

  test(`${store}: every instant field over REST refuses impossible dates, a date alone and instants out of range, naming the field, and writes nothing`, async (t) => {
    const { s, metric, card, timeline } = await setup();
    const event = (key: string, timestamp: string) => ({ idempotency_key: key, subject_id: s.subjectId, event_name: "usage", data: {}, timestamp });
    const okPeriod = { start: "2026-01-01T00:00:00Z", end: "2026-02-01T00:00:00Z" };
    const fields: [string, (bad: string) => Promise<RestResponse>][] = [
      ["frozen_time", (bad) => s.raw("POST", "/test-clocks", { name: "bad", frozen_time: bad })],
      ["frozen_time", (bad) => s.raw("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: bad })],
      ["timestamp", (bad) => s.raw("POST", "/usage-events", event("single", bad))],
      ["period.start", (bad) => s.raw("POST", `/pricing-metrics/${metric}/summary`, { subject_id: s.subjectId, period: { ...okPeriod, start: bad } })],
      ["period.end", (bad) => s.raw("POST", `/pricing-metrics/${metric}/summary`, { subject_id: s.subjectId, period: { ...okPeriod, end: bad } })],
      ["items[0].period.start", (bad) => s.raw("POST", `/subscription-timelines/${timeline}/items`, { items: [item(bad, null, card)] })],
      [
        "items[1].period.end",
        (bad) => s.raw("POST", `/subscription-timelines/${timeline}/items`, { items: [item("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", card), item("2026-02-01T00:00:00Z", bad, card)] }),
      ],
      ["effective_at", (bad) => s.raw("POST", `/subscription-timelines/${timeline}/start`, { ...callbacks, effective_at: bad })],
    ];
    for (const [field, call] of fields) {
      for (const [bad, problem] of SOME_BAD) {
        const r = await call(bad);
        const label = `${field} = ${bad}`;
        t.is(r.status, 400, label);
        t.is(r.body.code, "invalid_argument", label);
        t.deepEqual(violatedFields(r.body), [field], label);
        t.regex(descriptions(r.body)[0] ?? "", problem, label);
      }
    }
    // A batch: the bad event is refused at its position, the good ones go in.
    for (const [bad, problem] of SOME_BAD) {
      const r = await s.call("POST", "/usage-events/batch", {
        events: [event(`b0-${bad}`, "2026-01-10T00:00:00Z"), event(`b1-${bad}`, "2026-01-10T00:00:00Z"), event(`b2-${bad}`, "2026-01-10T00:00:00Z"), event(`b3-${bad}`, bad)],
      });
      t.deepEqual(
        r.results.map((x: Json) => [x.status, x.error?.field_violations.map((v: Json) => v.field) ?? []]),
        [
          ["accepted", []],
          ["accepted", []],
          ["accepted", []],
          ["rejected", ["events[3].timestamp"]],
        ],
        bad,
      );
      t.regex(r.results[3].error.field_violations[0].description, problem, bad);
    }

    // Nothing of the refused calls was written.
    t.is(await count("test_clocks", s.subjectId), 1, "only the scenario's clock");
    t.is((await s.call("GET", `/test-clocks/${s.clockId}`)).frozen_time, "2026-01-15T00:00:00Z");
    t.is(await count("usage_events", s.subjectId), 3 * SOME_BAD.length, "only the batches' good events");
    t.is((await s.call("POST", `/pricing-metrics/${metric}/summary`, { subject_id: s.subjectId, period: okPeriod }))[0].value, String(3 * SOME_BAD.length));
    t.is(await count("timeline_items", s.subjectId), 0);
    t.is((await s.call("GET", `/subscription-timelines/${timeline}`)).status, "draft");
    t.is(await count("subscriptions", s.subjectId), 0);
    // The same calls with good instants go through.
    t.is((await s.call("POST", `/subscription-timelines/${timeline}/items`, { items: [item("2026-01-01T00:00:00Z", null, card)] })).length, 1);
    t.is((await s.call("POST", `/subscription-timelines/${timeline}/start`, { ...callbacks, effective_at: "2026-01-15T00:00:00.0009Z" })).result.result_type, "success");
    t.is((await s.call("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: "2026-01-20T12:00:00.9999999+00:00" })).frozen_time, "2026-01-20T12:00:00.999Z");
    t.is((await s.call("POST", "/test-clocks", { name: "edge", frozen_time: "2199-12-31T23:59:59.9999999" })).frozen_time, "2199-12-31T23:59:59.999Z");
  });

  const binary: Protocol[] = ["grpc", "connect"];
  for (const protocol of binary) {
    test(`${store} ${protocol}: Timestamps out of range or no time at all are invalid_argument naming the field; nanos are truncated`, async (t) => {
      const { s, metric, card, timeline } = await setup();
      const clocks = rpcClient(TestClockService, server.url, protocol, s.key);
      const metrics = rpcClient(PricingMetricService, server.url, protocol, s.key);
      const timelines = rpcClient(SubscriptionTimelineService, server.url, protocol, s.key);
      const year2300 = at("2300-01-01T00:00:00Z");
      const refused = async (call: Promise<unknown>, field: string, problem: RegExp, also: string[] = []) => {
        const err = ConnectError.from(await t.throwsAsync(call));
        t.is(err.code, Code.InvalidArgument, field);
        const v = err.findDetails(BadRequestSchema)[0]?.fieldViolations ?? [];
        t.deepEqual(
          v.map((x) => x.field),
          [field, ...also],
        );
        t.regex(v[0]?.description ?? "", problem, field);
      };
      const range = /from 2000-01-01T00:00:00Z \(inclusive\) to 2200-01-01T00:00:00Z \(exclusive\)/;
      await refused(clocks.createTestClock({ name: "x", frozenTime: year2300 }), "frozen_time", range);
      await refused(clocks.createTestClock({ name: "x", frozenTime: at("1999-12-31T23:59:59.999Z") }), "frozen_time", range);
      await refused(clocks.createTestClock({ name: "x", frozenTime: { seconds: 2n ** 62n, nanos: 0 } }), "frozen_time", /valid time/);
      await refused(clocks.advanceTestClock({ testClockId: s.clockId, frozenTime: year2300 }), "frozen_time", range);
      await refused(clocks.advanceTestClock({ testClockId: s.clockId, frozenTime: { seconds: at("2026-02-01T00:00:00Z").seconds, nanos: 1_000_000_000 } }), "frozen_time", /valid time/);
      await refused(metrics.createPricingMetricSummary({ pricingMetricId: metric, subjectId: s.subjectId, period: { start: at("2026-01-01T00:00:00Z"), end: year2300 } }), "period.end", range);
      await refused(
        timelines.createTimelineItems({
          subscriptionTimelineId: timeline,
          items: [{ period: { start: at("1970-01-01T00:00:00Z") }, subscriptionInput: { rateCardId: card, fixedRateQuantities: { seats: "1" } } }],
        }),
        "items[0].period.start",
        range,
      );
      await refused(
        timelines.createTimelineItems({
          subscriptionTimelineId: timeline,
          items: [
            {
              period: { start: at("2026-01-01T00:00:00Z"), end: { kind: { case: "stringValue", value: "2026-02-30T00:00:00Z" } } },
              subscriptionInput: { rateCardId: card, fixedRateQuantities: { seats: "1" } },
            },
          ],
        }),
        "items[0].period.end",
        /not a calendar date/,
      );
      await refused(
        timelines.startSubscriptionTimeline({
          subscriptionTimelineId: timeline,
          effectiveAt: year2300,
          checkoutCallbackUrls: { successUrl: "https://app.example/ok", cancelledUrl: "https://app.example/no" },
        }),
        "effective_at",
        range,
        [
          "subscription_timeline_id", // no items yet: reported together
        ],
      );
      t.is(await count("test_clocks", s.subjectId), 1);
      t.is(await count("timeline_items", s.subjectId), 0);
      t.is((await s.call("GET", `/test-clocks/${s.clockId}`)).frozen_time, "2026-01-15T00:00:00Z");

      // 999,999,999 nanos before 2200: the last millisecond of 2199, never rounded into 2200.
      const last = at("2199-12-31T23:59:59Z");
      const made = await clocks.createTestClock({ name: "edge", frozenTime: { seconds: last.seconds, nanos: 999_999_999 } });
      t.deepEqual([made.testClock?.frozenTime?.seconds, made.testClock?.frozenTime?.nanos], [last.seconds, 999_000_000]);
      t.is((await s.call("GET", `/test-clocks/${made.testClock?.id}`)).frozen_time, "2199-12-31T23:59:59.999Z");
    });
  }

  test(`${store} Connect and gRPC-Web JSON: an impossible date is refused with its field, never rolled over`, async (t) => {
    const { s } = await setup();
    const post = async (method: string, body: Json) => {
      const res = await fetch(`${server.url}/billing.v1.TestClockService/${method}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": s.key },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Json };
    };
    for (const [bad, problem] of BAD) {
      for (const [method, body] of [
        ["CreateTestClock", { name: "x", frozenTime: bad }],
        ["AdvanceTestClock", { testClockId: s.clockId, frozen_time: bad }],
      ] as const) {
        const r = await post(method, body);
        t.is(r.status, 400, `${method} ${bad}`);
        t.is(r.body.code, "invalid_argument", `${method} ${bad}`);
        t.regex(r.body.message, /frozen_time: /, `${method} ${bad}`);
        t.regex(r.body.message, problem, `${method} ${bad}`);
      }
    }
    // Authentication comes first: no key is a 401 whatever the body holds.
    const anonymous = await fetch(`${server.url}/billing.v1.TestClockService/CreateTestClock`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "x", frozen_time: "2026-02-30T00:00:00Z" }),
    });
    t.is(anonymous.status, 401);
    // gRPC-Web with JSON: one enveloped message.
    const grpcWeb = async (body: Json) => {
      const json = Buffer.from(JSON.stringify(body));
      const envelope = Buffer.alloc(5 + json.length);
      envelope.writeUInt32BE(json.length, 1);
      json.copy(envelope, 5);
      const res = await fetch(`${server.url}/billing.v1.TestClockService/CreateTestClock`, {
        method: "POST",
        headers: { "content-type": "application/grpc-web+json", "x-api-key": s.key },
        body: envelope,
      });
      const bytes = Buffer.from(await res.arrayBuffer());
      // The status is in the headers (trailers-only) or in the body's trailer frame (flag 0x80).
      const trailers = new Map<string, string>(
        res.headers.has("grpc-status")
          ? [
              ["grpc-status", res.headers.get("grpc-status") ?? ""],
              ["grpc-message", res.headers.get("grpc-message") ?? ""],
            ]
          : [],
      );
      for (let i = 0; i + 5 <= bytes.length; i += 5 + bytes.readUInt32BE(i + 1)) {
        if (((bytes[i] ?? 0) & 0x80) === 0) continue;
        for (const line of bytes
          .subarray(i + 5, i + 5 + bytes.readUInt32BE(i + 1))
          .toString()
          .split("\r\n")) {
          const colon = line.indexOf(":");
          if (colon > 0) trailers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
        }
      }
      return { status: trailers.get("grpc-status") ?? "", message: decodeURIComponent(trailers.get("grpc-message") ?? ""), bytes };
    };
    const refused = await grpcWeb({ name: "x", frozen_time: "2026-02-30T00:00:00Z" });
    t.is(refused.status, "3", "invalid_argument");
    t.regex(refused.message, /frozen_time: .*2026-02-30 is not a calendar date/);
    t.is(await count("test_clocks", s.subjectId), 1);
    const accepted = await grpcWeb({ name: "x", frozen_time: "2026-02-28T12:00:00.9999" });
    t.regex(accepted.bytes.subarray(5).toString(), /"frozen_time":"2026-02-28T12:00:00.999Z"/);

    const good = await post("CreateTestClock", { name: "x", frozenTime: "2026-02-28T12:00:00.123456-01:00" });
    t.is(good.status, 200);
    t.is(good.body.test_clock.frozen_time, "2026-02-28T13:00:00.123Z");
    // Typed clients speaking JSON (Connect, gRPC-Web, gRPC): their requests pass through the check unchanged.
    for (const [protocol, transport] of [
      ["connect", createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: false })],
      ["grpcweb", createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: false })],
      ["grpc", createGrpcTransport({ baseUrl: server.url, useBinaryFormat: false })],
    ] as const) {
      const c = createClient(TestClockService, transport);
      const made = await c.createTestClock({ name: protocol, frozenTime: at("2199-12-31T23:59:59.999Z") }, { headers: { "x-api-key": s.key } });
      t.is(made.testClock?.frozenTime?.nanos, 999_000_000, protocol);
      const err = ConnectError.from(await t.throwsAsync(c.createTestClock({ name: protocol, frozenTime: at("2200-01-01T00:00:00Z") }, { headers: { "x-api-key": s.key } })));
      t.deepEqual([err.code, err.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field)], [Code.InvalidArgument, ["frozen_time"]], protocol);
    }
    t.is(await count("test_clocks", s.subjectId), 6);
  });

  test(`${store} Connect JSON: a body is read before the method only for a known key, and only up to the method's bound (256 KiB)`, async (t) => {
    const { s } = await setup();
    const post = async (key: string, body: string) => {
      const res = await fetch(`${server.url}/billing.v1.TestClockService/CreateTestClock`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": key }, body });
      return { status: res.status, body: (await res.json()) as Json };
    };
    const padded = (n: number, time: string) => JSON.stringify({ name: "x", frozen_time: time, padding: "a".repeat(n) });
    // Without a valid key: the method's 401, whatever the body holds.
    const anonymous = await post("sk_test_nope", padded(1024 * 1024, "2026-02-30T00:00:00Z"));
    t.is(anonymous.status, 401);
    t.is(anonymous.body.code, "unauthenticated");
    // Over the bound: refused (never read leniently), whatever it holds.
    const large = await post(s.key, padded(300 * 1024, "2026-01-01T00:00:00Z"));
    t.is(large.status, 429, JSON.stringify(large.body)); // resource_exhausted on Connect's code table
    t.is(large.body.code, "resource_exhausted");
    const bad = await post(s.key, padded(200 * 1024, "2026-02-30T00:00:00Z"));
    t.is(bad.status, 400);
    t.regex(bad.body.message, /^frozen_time: /);
    t.is((await post(s.key, padded(200 * 1024, "2026-01-01T00:00:00Z"))).status, 200);
  });

  test(`${store}: cycle ends derived past 2200 are stored and read back; the clock cannot follow them there`, async (t) => {
    const s = await Scenario.start(server, "2199-12-31T00:00:00Z");
    const monthly = await s.card(free);
    const yearly = await s.card({ ...free, billing_interval: "yearly" });
    const m = await s.subscribe({ rate_card_id: monthly, fixed_rate_quantities: { seats: 1 } });
    const y = await s.subscribe({ rate_card_id: yearly, fixed_rate_quantities: { seats: 1 } });
    t.is(m.result_type, "success");
    await s.advance("2199-12-31T23:59:59.999Z");
    const subs = await s.subscriptions();
    t.deepEqual(
      subs.map((x: Json) => [x.id, x.effective_at, x.current_period?.end, x.cycles_next_at]),
      [
        [m.subscription.id, "2199-12-31T00:00:00Z", "2200-01-31T00:00:00Z", "2200-01-31T00:00:00Z"],
        [y.subscription.id, "2199-12-31T00:00:00Z", "2200-12-31T00:00:00Z", "2200-12-31T00:00:00Z"],
      ],
    );
    const r = await s.raw("POST", `/test-clocks/${s.clockId}/advance`, { frozen_time: "2200-01-31T00:00:00Z" });
    t.deepEqual([r.status, violatedFields(r.body)], [400, ["frozen_time"]]);
    t.is((await s.call("GET", `/subscriptions/${m.subscription.id}`)).current_period.end, "2200-01-31T00:00:00Z");
    t.is((await s.invoices()).length, 2);
  });
}
