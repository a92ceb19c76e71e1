/**
 * Tracing (DESIGN §10) with a real OTLP/HTTP receiver on a port, on MariaDB and SQLite: a REST,
 * a Connect and a grpc-js call, each sent with a `traceparent`, are exported as server spans of
 * that trace (children of the caller's span) with their database transactions as child spans, and
 * their access log lines carry the trace id; a webhook delivery arrives with a `traceparent` of an
 * exported span; a payment provider's charge is a span of the request that made it.
 * (tracing-off.test.ts: without OTEL_EXPORTER_OTLP_ENDPOINT nothing of the SDK starts.)
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import * as grpc from "@grpc/grpc-js";
import test from "ava";
import { startApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/log.js";
import { STORES, type Store, createTestDatabase } from "../helpers/db.js";
import { grpcPackage } from "../helpers/grpc-package.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, seedKeys, untilHealthy } from "../helpers/server.js";

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP's SpanKind: 2 server, 3 client. */
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
  status?: { code?: number };
}

/** An OTLP/HTTP receiver (JSON, as @opentelemetry/exporter-trace-otlp-http sends it): every span posted to /v1/traces. */
async function startCollector() {
  const spans: ExportedSpan[] = [];
  const posts: { path: string | undefined; contentType: string | undefined; serviceNames: string[] }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      // biome-ignore lint: OTLP JSON is loosely typed here
      const body: any = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const serviceNames: string[] = [];
      for (const rs of body.resourceSpans ?? []) {
        for (const a of rs.resource?.attributes ?? []) if (a.key === "service.name") serviceNames.push(a.value.stringValue);
        for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
      }
      posts.push({ path: req.url, contentType: req.headers["content-type"], serviceNames });
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    posts,
    /** The spans of `traceId` once `pred` holds over them (polled; the exporter sends every 50 ms here). */
    async until(traceId: string, pred: (list: ExportedSpan[]) => boolean, timeoutMs = 20_000): Promise<ExportedSpan[]> {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const list = spans.filter((s) => s.traceId === traceId);
        if (pred(list)) return list;
        if (Date.now() > end) throw new Error(`collector: ${list.length} spans of trace ${traceId}, not what was awaited: ${JSON.stringify(list.map((s) => [s.name, s.kind, s.parentSpanId]))}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const collector = await startCollector();
test.after.always(() => collector.close());

/** A fresh caller's span: its trace id, its span id, and the `traceparent` that carries them (sampled). */
function callerSpan() {
  const traceId = randomBytes(16).toString("hex");
  const spanId = randomBytes(8).toString("hex");
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

const attr = (s: ExportedSpan, key: string) => s.attributes.find((a) => a.key === key)?.value;

const pkg = grpcPackage(["billing/v1/subject_service.proto"], { enums: String, defaults: true, oneofs: true });
const SubjectClient = pkg.billing.v1.SubjectService as typeof grpc.Client;
// biome-ignore lint: generated client methods are untyped
type Untyped = grpc.Client & Record<string, any>;

interface Traced {
  server: TestServer;
  /** The app's log lines, parsed. */
  lines: Record<string, unknown>[];
}

/** The real app with tracing on (spans to the collector every 50 ms), its log lines captured. */
function useTracedServer(store: Store): () => Traced {
  let started: Traced | undefined;
  test.before(async () => {
    const db = await createTestDatabase(store);
    const seeded = await seedKeys(db.url);
    const lines: Record<string, unknown>[] = [];
    const config = loadConfig({
      DATABASE_URL: db.url,
      PORT: "0",
      BULK_QUEUE_TIMEOUT_MS: "60000",
      WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
      WEBHOOK_DELIVERY_INTERVAL_MS: "50",
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_SERVICE_NAME: `billing-under-test-${store}`,
      OTEL_BSP_SCHEDULE_DELAY: "50",
    });
    const app = await startApp(
      config,
      createLogger("info", (l) => lines.push(JSON.parse(l))),
    );
    const server: TestServer = {
      store,
      app,
      url: app.url,
      db,
      keys: seeded.keys,
      freshKey: seeded.freshKey,
      async stop() {
        await app.stop();
        await seeded.close();
        await db.drop();
      },
    };
    await untilHealthy(server.url);
    started = { server, lines };
  });
  test.after.always(async () => {
    await started?.server.stop();
  });
  return () => {
    if (!started) throw new Error("the traced server starts in test.before");
    return started;
  };
}

/** The request's server span, a child of the caller's span, with a database transaction as its child; and its access line's ids. */
async function assertTracedRequest(t: import("ava").ExecutionContext, traced: Traced, caller: ReturnType<typeof callerSpan>, procedure: string, protocol: string) {
  const spans = await collector.until(caller.traceId, (l) => {
    const server = l.find((s) => s.kind === 2 && s.parentSpanId === caller.spanId);
    return server !== undefined && l.some((s) => s.name === "db.transaction" && s.parentSpanId === server.spanId);
  });
  const server = spans.find((s) => s.kind === 2 && s.parentSpanId === caller.spanId) as ExportedSpan;
  t.is(server.name, procedure);
  t.deepEqual(attr(server, "billing.protocol"), { stringValue: protocol });
  t.deepEqual(attr(server, "billing.code"), { stringValue: "ok" });
  const tx = spans.find((s) => s.name === "db.transaction" && s.parentSpanId === server.spanId) as ExportedSpan;
  t.is(tx.kind, 3, "a database transaction is a client span");
  t.deepEqual(attr(tx, "db.system.name"), { stringValue: traced.server.store === "mysql" ? "mysql" : "sqlite" });
  // The access line is written when the request ends: it names the request's trace and span.
  const line = traced.lines.find((l) => l.msg === "request" && l.trace_id === caller.traceId);
  t.truthy(line, "the access log line carries the trace id");
  t.is(line?.span_id, server.spanId);
  t.is(line?.procedure, procedure);
  return server;
}

for (const store of STORES) {
  const traced = useTracedServer(store);
  const hooks: Receiver[] = [];
  const clients: grpc.Client[] = [];
  test.after.always(async () => {
    for (const c of clients) c.close();
    for (const h of hooks) await h.close();
  });

  test(`${store}: a REST call with a traceparent is a server span of that trace, its transaction a child span, its log line the trace id`, async (t) => {
    const tr = traced();
    const caller = callerSpan();
    const res = await fetch(`${tr.server.url}/subjects`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": tr.server.keys.a, traceparent: caller.traceparent, tracestate: "vendor=abc" },
      body: JSON.stringify({ name: "Traced over REST" }),
    });
    t.is(res.status, 200, await res.text());
    const server = await assertTracedRequest(t, tr, caller, "POST /subjects", "rest");
    t.deepEqual(attr(server, "billing.request_id"), { stringValue: res.headers.get("x-request-id") });
    t.deepEqual(attr(server, "http.response.status_code"), { intValue: 200 });
  });

  test(`${store}: a Connect call with a traceparent is a server span of that trace`, async (t) => {
    const tr = traced();
    const caller = callerSpan();
    const res = await fetch(`${tr.server.url}/billing.v1.SubjectService/CreateSubject`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": tr.server.keys.a, traceparent: caller.traceparent },
      body: JSON.stringify({ name: "Traced over Connect" }),
    });
    t.is(res.status, 200, await res.text());
    const server = await assertTracedRequest(t, tr, caller, "billing.v1.SubjectService/CreateSubject", "connect");
    t.deepEqual(attr(server, "rpc.system"), { stringValue: "connect_rpc" });
  });

  test(`${store}: a grpc-js call with traceparent metadata is a server span of that trace`, async (t) => {
    const tr = traced();
    const caller = callerSpan();
    const c = new SubjectClient(tr.server.url.replace(/^http:\/\//, ""), grpc.credentials.createInsecure()) as Untyped;
    clients.push(c);
    const md = new grpc.Metadata();
    md.set("x-api-key", tr.server.keys.a);
    md.set("traceparent", caller.traceparent);
    const created = await new Promise<{ subject: { id: string } }>((resolve, reject) =>
      c.CreateSubject({ name: "Traced over gRPC" }, md, (err: grpc.ServiceError | null, r: { subject: { id: string } }) => (err ? reject(err) : resolve(r))),
    );
    t.regex(created.subject.id, /^subj_/);
    const server = await assertTracedRequest(t, tr, caller, "billing.v1.SubjectService/CreateSubject", "grpc");
    t.deepEqual(attr(server, "rpc.system"), { stringValue: "grpc" });
  });

  test(`${store}: a request without a traceparent starts a trace of its own; a malformed one is ignored, never refused`, async (t) => {
    const tr = traced();
    const res = await fetch(`${tr.server.url}/subjects`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": tr.server.keys.a, traceparent: "00-not-a-trace-01" },
      body: JSON.stringify({ name: "Untraced caller" }),
    });
    t.is(res.status, 200);
    const requestId = res.headers.get("x-request-id");
    let line: Record<string, unknown> | undefined;
    for (let i = 0; i < 100 && !line; i++) {
      line = tr.lines.find((l) => l.msg === "request" && l.request_id === requestId);
      if (!line) await new Promise((r) => setTimeout(r, 20));
    }
    t.regex(String(line?.trace_id), /^[0-9a-f]{32}$/);
    const spans = await collector.until(String(line?.trace_id), (l) => l.some((s) => s.kind === 2));
    const server = spans.find((s) => s.kind === 2) as ExportedSpan;
    t.is(server.parentSpanId ?? "", "", "a root span: no caller's span to be the child of");
    t.is(server.spanId, String(line?.span_id));
  });

  test(`${store}: a webhook delivery carries the traceparent of its exported span`, async (t) => {
    const tr = traced();
    const hook = await startReceiver();
    hooks.push(hook);
    const key = await tr.server.freshKey();
    const post = (path: string, body: unknown) => fetch(`${tr.server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": key }, body: JSON.stringify(body) });
    t.is((await post("/webhook-endpoints", { url: hook.url })).status, 200);
    t.is((await post("/subjects", { name: "Announced" })).status, 200);
    await hook.until((l) => l.some((r) => r.json?.type === "subject.created"));
    const delivery = hook.received.find((r) => r.json?.type === "subject.created");
    const traceparent = String(delivery?.headers.traceparent);
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(traceparent);
    t.truthy(m, `a valid sampled traceparent (got ${traceparent})`);
    const [, traceId, spanId] = m as RegExpExecArray;
    const spans = await collector.until(traceId as string, (l) => l.some((s) => s.spanId === spanId));
    const span = spans.find((s) => s.spanId === spanId) as ExportedSpan;
    t.is(span.name, "webhook.deliver");
    t.is(span.kind, 3, "a client span");
    t.deepEqual(attr(span, "http.response.status_code"), { intValue: 200 });
    t.deepEqual(attr(span, "billing.webhook.delivery_id"), { stringValue: delivery?.headers["billing-delivery-id"] });
    t.deepEqual(attr(span, "billing.webhook.event_type"), { stringValue: "subject.created" });
  });

  test(`${store}: a payment provider's charge is a span of the request that made it`, async (t) => {
    const tr = traced();
    const before = new Set(collector.spans.filter((s) => s.name === "payment.charge").map((s) => s.spanId));
    const s = await Scenario.start(tr.server, "2026-01-01T00:00:00Z");
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 1000 } } }] });
    const sub = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    t.is(sub.result_type, "success_after_checkout");
    let charge: ExportedSpan | undefined;
    for (let i = 0; i < 400 && !charge; i++) {
      charge = collector.spans.find((x) => x.name === "payment.charge" && !before.has(x.spanId) && attr(x, "billing.charge_ok")?.boolValue === true);
      if (!charge) await new Promise((r) => setTimeout(r, 50));
    }
    t.truthy(charge, "a payment.charge span was exported");
    const c = charge as ExportedSpan;
    t.is(c.kind, 3);
    t.deepEqual(attr(c, "billing.payment_provider"), { stringValue: "test" });
    // The charge is made in the transaction that holds the invoice's row lock (DESIGN §16: one
    // attempt at a time): its parent is that transaction's span, whose parent is the request's.
    const spans = await collector.until(c.traceId, (l) => l.some((x) => x.spanId === c.parentSpanId));
    const parent = spans.find((x) => x.spanId === c.parentSpanId) as ExportedSpan;
    t.is(parent.name, "db.transaction");
    const all = await collector.until(c.traceId, (l) => l.some((x) => x.spanId === parent.parentSpanId));
    const request = all.find((x) => x.spanId === parent.parentSpanId) as ExportedSpan;
    t.is(request.kind, 2, "the transaction's parent is the server span of the request that paid");
  });

  test(`${store}: spans go to <endpoint>/v1/traces as OTLP JSON, named by OTEL_SERVICE_NAME`, async (t) => {
    await collector.until("", () => collector.posts.some((p) => p.serviceNames.includes(`billing-under-test-${store}`)));
    const post = collector.posts.find((p) => p.serviceNames.includes(`billing-under-test-${store}`));
    t.is(post?.path, "/v1/traces");
    t.is(post?.contentType, "application/json");
  });
}
