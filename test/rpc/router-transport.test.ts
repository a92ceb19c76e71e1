/**
 * The Connect handlers in process, without a port: createRouterTransport over the real services,
 * interceptors (errors, API keys) and an SQLite database in a temporary file. What the wire adds
 * (HTTP, REST, gRPC framing) is the API tests' job; here a handler's answers and errors are
 * checked as a client sees them.
 */
import test from "ava";
import { type Interceptor, Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { buildServices } from "../../src/wiring/services.js";
import { createDatabase } from "../../src/db/datasource.js";
import { PricingMetricService } from "../../src/gen/billing/v1/pricing_metric_service_pb.js";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { UsageEventService } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { createLogger } from "../../src/log.js";
import { API_KEY_HEADER, KeyVerifier, authInterceptor } from "../../src/rpc/auth.js";
import { errorInterceptor } from "../../src/rpc/errors.js";
import { implementations, routes } from "../../src/rpc/routes.js";
import { SqlAuthStore } from "../../src/db/stores/auth-store.js";
import { createTestDatabase } from "../helpers/db.js";
import { type TestKeys, seedKeys } from "../helpers/server.js";

let keys: TestKeys;
let client: <T extends DescService>(service: T, key?: string) => ReturnType<typeof createClient<T>>;
let close: () => Promise<void>;

test.before(async () => {
  const tdb = await createTestDatabase("sqlite");
  const seeded = await seedKeys(tdb.url);
  keys = seeded.keys;
  const db = await createDatabase(tdb.url, { poolSize: 2 });
  await db.dataSource.initialize();
  const log = createLogger("error");
  const { engine: _engine, ...services } = buildServices(
    db,
    () => "http://localhost",
    () => new Date(),
    log,
  );
  const router = { interceptors: [errorInterceptor(log), authInterceptor(new KeyVerifier(new SqlAuthStore(db.sql, db.entities), 0))] };
  const served = routes(implementations(services));
  client = <T extends DescService>(service: T, key?: string) => {
    const withKey: Interceptor = (next) => async (req) => {
      if (key) req.header.set(API_KEY_HEADER, key);
      return next(req);
    };
    return createClient(service, createRouterTransport(served, { router, transport: { interceptors: [withKey] } }));
  };
  close = async () => {
    await db.dataSource.destroy();
    await seeded.close();
    await tdb.drop();
  };
});
test.after.always(async () => {
  await close?.();
});

/** The field violations of an InvalidArgument error, as "field: description". */
function violations(err: unknown): string[] {
  const e = ConnectError.from(err);
  return e.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations.map((v) => `${v.field}: ${v.description}`));
}

test("SubjectService: create, get, update in part, list, delete", async (t) => {
  const subjects = client(SubjectService, keys.a);
  const made = (await subjects.createSubject({ externalId: "rt-1", name: "Ada", email: "ada@example.com", metadata: { plan: "pro" } })).subject;
  t.truthy(made?.id.startsWith("sub"), made?.id);
  t.is(made?.externalId, "rt-1");
  const got = (await subjects.getSubject({ subjectId: made!.id })).subject;
  t.deepEqual({ name: got?.name, email: got?.email, metadata: got?.metadata }, { name: "Ada", email: "ada@example.com", metadata: { plan: "pro" } });
  // By external ID too.
  t.is((await subjects.getSubject({ subjectId: "rt-1" })).subject?.id, made!.id);

  const updated = (await subjects.updateSubject({ subjectId: made!.id, name: "Ada L." })).subject;
  t.is(updated?.name, "Ada L.");
  t.is(updated?.email, "ada@example.com", "a field not sent is kept");

  const listed = await subjects.listSubjects({ limit: 100 });
  t.true(listed.subjects.some((s) => s.id === made!.id));
  t.deepEqual(await subjects.deleteSubject({ subjectId: made!.id }).then((r) => [r.id, r.deleted]), [made!.id, true]);
  const gone = await t.throwsAsync(subjects.getSubject({ subjectId: made!.id }));
  t.is(ConnectError.from(gone).code, Code.NotFound);
});

test("SubjectService: another environment's key does not see the subject", async (t) => {
  const made = (await client(SubjectService, keys.a).createSubject({ name: "Only A" })).subject!;
  const err = await t.throwsAsync(client(SubjectService, keys.b).getSubject({ subjectId: made.id }));
  t.is(ConnectError.from(err).code, Code.NotFound);
});

test("SubjectService: no key, a revoked key and a publishable key are refused", async (t) => {
  const none = await t.throwsAsync(client(SubjectService).listSubjects({}));
  t.is(ConnectError.from(none).code, Code.Unauthenticated);
  const revoked = await t.throwsAsync(client(SubjectService, keys.aRevoked).listSubjects({}));
  t.is(ConnectError.from(revoked).code, Code.Unauthenticated);
  const publishable = await t.throwsAsync(client(SubjectService, keys.aPublishable).listSubjects({}));
  t.is(ConnectError.from(publishable).code, Code.PermissionDenied);
});

test("SubjectService: invalid input is InvalidArgument naming each field", async (t) => {
  const subjects = client(SubjectService, keys.a);
  const err = await t.throwsAsync(subjects.createSubject({ email: "not an email", metadata: { "": "x" } }));
  t.is(ConnectError.from(err).code, Code.InvalidArgument);
  const fields = violations(err).map((v) => v.split(":")[0]);
  t.true(fields.includes("email"), violations(err).join("; "));
  const page = await t.throwsAsync(subjects.listSubjects({ limit: 101 }));
  t.deepEqual(
    violations(page).map((v) => v.split(":")[0]),
    ["limit"],
  );
});

test("UsageEventService and PricingMetricService: events are counted once, duplicates named, bad events rejected", async (t) => {
  const key = keys.a;
  const subject = (await client(SubjectService, key).createSubject({ name: "Metered" })).subject!;
  const metrics = client(PricingMetricService, key);
  const metric = (await metrics.createPricingMetric({ eventName: "rt_calls", name: "Calls", unit: "call", aggregation: { aggregationType: "sum", valueField: "n" } })).pricingMetric!;
  const usage = client(UsageEventService, key);
  const event = (idempotencyKey: string, n: string) => ({ idempotencyKey, subjectId: subject.id, eventName: "rt_calls", data: { n }, timestamp: timestampFromDate(new Date("2026-03-02T10:00:00Z")) });

  const first = await usage.createUsageEvent(event("e1", "2"));
  t.is(first.status, "accepted");
  t.is((await usage.createUsageEvent(event("e1", "2"))).status, "duplicate");
  const batch = await usage.createUsageEventBatch({ events: [event("e2", "3"), event("e1", "2"), event("e3", "not a number")] });
  t.deepEqual([batch.accepted, batch.duplicate, batch.rejected], [1, 1, 1]);

  const summary = await metrics.createPricingMetricSummary({
    pricingMetricId: metric.id,
    subjectId: subject.id,
    period: { start: { seconds: BigInt(Date.parse("2026-03-02T00:00:00Z") / 1000) }, end: { seconds: BigInt(Date.parse("2026-03-03T00:00:00Z") / 1000) } },
  });
  t.is(summary.summaries.length, 1);
  t.deepEqual(summary.summaries[0]?.value?.kind, { case: "stringValue", value: "5" });
});

test("UsageEventService: an event without a subject is InvalidArgument", async (t) => {
  const err = await t.throwsAsync(
    client(UsageEventService, keys.a).createUsageEvent({ idempotencyKey: "x", eventName: "rt_calls", data: {}, timestamp: timestampFromDate(new Date("2026-03-02T10:00:00Z")) }),
  );
  t.is(ConnectError.from(err).code, Code.InvalidArgument);
  t.true(
    violations(err).some((v) => v.startsWith("subject_id")),
    violations(err).join("; "),
  );
});
