/**
 * Without OTEL_EXPORTER_OTLP_ENDPOINT no tracing SDK is started (the gRPC and REST hot paths are
 * benchmarked): the app has no tracing, the process has no context manager (the API's no-op),
 * and a request that sends a `traceparent` is served and logged as any other, with no trace id.
 * A file of its own: the context manager is the process's, and tracing.test.ts starts one.
 */
import { ROOT_CONTEXT, context, trace } from "@opentelemetry/api";
import test from "ava";
import { type App, startApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/log.js";
import { type TestDatabase, createTestDatabase } from "../helpers/db.js";
import { seedKeys } from "../helpers/server.js";

let app: App | undefined;
let db: TestDatabase | undefined;
let close: (() => Promise<void>) | undefined;
let key = "";
const lines: Record<string, unknown>[] = [];

test.before(async () => {
  db = await createTestDatabase("sqlite");
  const seeded = await seedKeys(db.url);
  close = seeded.close;
  key = seeded.keys.a;
  app = await startApp(
    loadConfig({ DATABASE_URL: db.url, PORT: "0" }),
    createLogger("info", (l) => lines.push(JSON.parse(l))),
  );
});

test.after.always(async () => {
  await app?.stop();
  await close?.();
  await db?.drop();
});

test("without OTEL_EXPORTER_OTLP_ENDPOINT no tracing is started, and a traceparent sent changes nothing", async (t) => {
  const a = app as App;
  t.is(a.tracing, undefined, "no tracer provider, no exporter");
  const res = await fetch(`${a.url}/subjects`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key, traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
    body: JSON.stringify({ name: "Not traced" }),
  });
  t.is(res.status, 200);
  const requestId = res.headers.get("x-request-id");
  let line: Record<string, unknown> | undefined;
  for (let i = 0; i < 100 && !line; i++) {
    line = lines.find((l) => l.msg === "request" && l.request_id === requestId);
    if (!line) await new Promise((r) => setTimeout(r, 20));
  }
  t.truthy(line, "the access line was written");
  t.false("trace_id" in (line as object), "no trace id: no span was made");
  t.false(
    lines.some((l) => "trace_id" in l),
    "no line of the app has one",
  );
  // The API's no-op context manager: a span set in a context is not the active one inside it.
  const span = trace.wrapSpanContext({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1 });
  t.is(
    context.with(trace.setSpan(ROOT_CONTEXT, span), () => trace.getActiveSpan()),
    undefined,
    "no context manager was registered",
  );
});
