/**
 * The contract fields made consistent (issue 13 item 7), through a client nobody here wrote
 * (@grpc/grpc-js, the services loaded from proto/ by @grpc/proto-loader) and through REST, whose
 * JSON stays as documented:
 * - a usage event's `timestamp` is a google.protobuf.Timestamp (JSON: an RFC 3339 string);
 * - batch and stream counts are int32 (JSON numbers; grpc-js numbers);
 * - UpdateSubject's `metadata` is a map<string,string> like create's, with an update_mask.
 */
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { grpcPackage } from "../helpers/grpc-package.js";
import { fromJson, toBinary } from "@bufbuild/protobuf";
import { StructSchema } from "@bufbuild/protobuf/wkt";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import test from "ava";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { ok, rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { type TestServer, useServer } from "../helpers/server.js";

const pkg = grpcPackage(["billing/v1/subject_service.proto", "billing/v1/usage_event_service.proto"], { defaults: true }) as { billing: { v1: Record<string, grpc.ServiceClientConstructor> } };

// biome-ignore lint: grpc-js answers are loosely typed objects
type Obj = any;
// biome-ignore lint/complexity/noBannedTypes: grpc-js builds its clients' methods at run time, untyped
type AnyFunction = Function;

function clientOf(server: TestServer, service: string): grpc.Client & Record<string, AnyFunction> {
  const Ctor = pkg.billing.v1[service] as grpc.ServiceClientConstructor;
  return new Ctor(new URL(server.url).host, grpc.credentials.createInsecure()) as grpc.Client & Record<string, AnyFunction>;
}

function keyed(key: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("x-api-key", key);
  return md;
}

/** A unary grpc-js call as a promise. */
function unary(client: grpc.Client & Record<string, AnyFunction>, method: string, req: Obj, key: string): Promise<Obj> {
  return new Promise((resolve, reject) => {
    (client[method] as AnyFunction).call(client, req, keyed(key), (err: grpc.ServiceError | null, res: Obj) => (err ? reject(err) : resolve(res)));
  });
}

/** The BadRequest field paths of a grpc-js error, from its grpc-status-details-bin. */
function violatedFieldsOf(err: grpc.ServiceError): string[] | undefined {
  const details = err.metadata.get("grpc-status-details-bin")[0] as Buffer;
  const status = findTrailerError(new Headers({ "grpc-status": String(err.code), "grpc-status-details-bin": details.toString("base64") }));
  return status?.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field);
}

/** A grpc-js unary call of raw request bytes (a client generated from another contract); the error, if any. */
function rawUnary(server: TestServer, path: string, bytes: Uint8Array, key: string): Promise<grpc.ServiceError | null> {
  const client = new grpc.Client(new URL(server.url).host, grpc.credentials.createInsecure());
  return new Promise<grpc.ServiceError | null>((resolve) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(bytes),
      keyed(key),
      (err) => resolve(err),
    );
  }).finally(() => client.close());
}

/** A Timestamp as grpc-js writes it (int64 seconds as a string, with longs: String). */
const ts = (iso: string, nanos = 0) => ({ seconds: String(Math.floor(Date.parse(iso) / 1000)), nanos });

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a usage event's timestamp is a Timestamp over gRPC and an RFC 3339 string over REST, read as the same millisecond`, async (t) => {
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { name: "Ada" });
    const events = clientOf(server, "UsageEventService");
    try {
      const event = { idempotency_key: "e1", subject_id: subject.id, event_name: "api", data: { n: "1" } };
      // 10:00:00.123456789 UTC over gRPC; nanos past the millisecond are dropped.
      const first = await unary(events, "CreateUsageEvent", { ...event, timestamp: ts("2026-03-01T10:00:00Z", 123_456_789) }, key);
      t.is(first.status, "accepted");
      // The same event over REST, the same instant written with an offset: a duplicate of it.
      const again = await ok(server, key, "POST", "/usage-events", { ...event, timestamp: "2026-03-01T12:00:00.123+02:00" });
      t.deepEqual(again, { id: first.id, status: "duplicate" });
      // Another millisecond is another payload: the key's reuse is refused.
      const other = await rest(server.url, "POST", "/usage-events", key, { ...event, timestamp: "2026-03-01T10:00:00.124Z" });
      t.is(other.status, 409);

      // A batch over gRPC: the event out of range is rejected alone, naming its timestamp; counts are numbers.
      const batch = await unary(
        events,
        "CreateUsageEventBatch",
        {
          events: [
            { ...event, idempotency_key: "b0", timestamp: ts("2026-03-01T10:00:00Z") },
            { ...event, idempotency_key: "b1", timestamp: ts("2200-01-01T00:00:00Z") },
          ],
        },
        key,
      );
      t.deepEqual([batch.accepted, batch.duplicate, batch.rejected], [1, 0, 1]);
      t.deepEqual(
        batch.results.map((r: Obj) => [r.status, r.error?.field_violations.map((v: Obj) => v.field) ?? []]),
        [
          ["accepted", []],
          ["rejected", ["events[1].timestamp"]],
        ],
      );
    } finally {
      events.close();
    }

    // REST keeps its documented JSON: counts are JSON numbers, a bad timestamp rejects its event only.
    const r = await rest(server.url, "POST", "/usage-events/batch", key, {
      events: [
        { idempotency_key: "r0", subject_id: subject.id, event_name: "api", data: {}, timestamp: "2026-03-01T10:00:00Z" },
        { idempotency_key: "r1", subject_id: subject.id, event_name: "api", data: {}, timestamp: "2026-02-30T00:00:00Z" },
      ],
    });
    t.is(r.status, 200);
    t.deepEqual([r.body.accepted, r.body.duplicate, r.body.rejected], [1, 0, 1]);
    t.deepEqual(
      r.body.results[1].error.field_violations.map((v: Obj) => v.field),
      ["events[1].timestamp"],
    );
    t.regex(r.body.results[1].error.field_violations[0].description, /2026-02-30 is not a calendar date/);

    // Connect JSON gives the same answer for the same body.
    const c = await fetch(`${server.url}/billing.v1.UsageEventService/CreateUsageEventBatch`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key },
      body: JSON.stringify({
        events: [
          { idempotency_key: "c0", subject_id: subject.id, event_name: "api", data: {}, timestamp: "2026-03-01T10:00:00Z" },
          { idempotency_key: "c1", subject_id: subject.id, event_name: "api", data: {}, timestamp: "2026-02-30T00:00:00Z" },
        ],
      }),
    });
    const cj = (await c.json()) as Obj;
    t.deepEqual([cj.accepted, cj.duplicate, cj.rejected], [1, 0, 1]);
    t.deepEqual(cj.results[1].error, r.body.results[1].error);
  });

  test(`${store}: stream counts and positions are int32 (numbers on grpc-js); a bad timestamp rejects its event only, binary or JSON`, async (t) => {
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { name: "Ada" });
    const events = clientOf(server, "UsageEventService");
    try {
      const res: Obj = await new Promise((resolve, reject) => {
        const call = (events.StreamUsageEvents as AnyFunction).call(events, keyed(key), (err: grpc.ServiceError | null, out: Obj) => (err ? reject(err) : resolve(out)));
        call.write({ idempotency_key: "s0", subject_id: subject.id, event_name: "api", data: {}, timestamp: ts("2026-03-01T10:00:00Z") });
        call.write({ idempotency_key: "s1", subject_id: subject.id, event_name: "api", data: {}, timestamp: ts("1999-12-31T23:59:59Z") });
        call.write({ idempotency_key: "s2", subject_id: subject.id, event_name: "api", data: {} });
        call.end();
      });
      t.deepEqual([res.received, res.accepted, res.duplicate, res.rejected], [3, 2, 0, 1]);
      t.deepEqual(
        res.rejections.map((r: Obj) => [r.index, r.error.field_violations.map((v: Obj) => v.field)]),
        [[1, ["events[1].timestamp"]]],
      );
    } finally {
      events.close();
    }

    // The same stream with gRPC's JSON codec: the impossible date rejects the second event only.
    const frame = (o: unknown) => {
      const body = Buffer.from(JSON.stringify(o));
      const head = Buffer.alloc(5);
      head.writeUInt32BE(body.length, 1);
      return Buffer.concat([head, body]);
    };
    const session = http2.connect(server.url);
    try {
      const req = session.request({ ":method": "POST", ":path": "/billing.v1.UsageEventService/StreamUsageEvents", "content-type": "application/grpc+json", te: "trailers", "x-api-key": key });
      const chunks: Buffer[] = [];
      let status = "";
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("trailers", (h) => (status = String(h["grpc-status"])));
      req.end(
        Buffer.concat([
          frame({ idempotency_key: "j0", subject_id: subject.id, event_name: "api", data: {}, timestamp: "2026-03-01T10:00:00Z" }),
          frame({ idempotency_key: "j1", subject_id: subject.id, event_name: "api", data: {}, timestamp: "2026-02-30T00:00:00Z" }),
          frame({ idempotency_key: "j2", subject_id: subject.id, event_name: "api", data: {} }),
        ]),
      );
      await new Promise((resolve, reject) => {
        req.on("close", resolve);
        req.on("error", reject);
      });
      t.is(status, "0");
      const body = Buffer.concat(chunks);
      const out = JSON.parse(body.subarray(5, 5 + body.readUInt32BE(1)).toString());
      t.deepEqual([out.received, out.accepted, out.rejected], [3, 2, 1]);
      t.deepEqual(
        out.rejections.map((r: Obj) => [r.index, r.error.field_violations.map((v: Obj) => v.field)]),
        [[1, ["events[1].timestamp"]]],
      );
      t.regex(out.rejections[0].error.field_violations[0].description, /2026-02-30 is not a calendar date/);
    } finally {
      session.close();
    }
  });

  test(`${store}: UpdateSubject metadata is a map<string,string>; update_mask says whether it is given, over gRPC and REST`, async (t) => {
    const key = await server.freshKey();
    const created = await ok(server, key, "POST", "/subjects", { name: "Ada", email: "ada@example.com", metadata: { a: "1" } });
    const subjects = clientOf(server, "SubjectService");
    const update = async (req: Obj) => (await unary(subjects, "UpdateSubject", { subject_id: created.id, ...req }, key)).subject;
    try {
      // No mask: the fields that are set; an empty map leaves metadata as it is.
      t.deepEqual((await update({ name: "Ada L." })).metadata, { a: "1" });
      t.deepEqual((await update({ metadata: { b: "2" } })).metadata, { b: "2" });
      // A mask naming metadata with an empty map clears it; one naming email clears an email left
      // out, which binary then leaves out (explicit presence: absent, not "").
      const cleared = await update({ update_mask: { paths: ["metadata", "email"] } });
      t.deepEqual([cleared.metadata, cleared.email, cleared.name], [{}, undefined, "Ada L."]);
      // A mask naming a field that no update changes is refused, naming its position.
      const err = await t.throwsAsync(update({ name: "x", update_mask: { paths: ["name", "external_id"] } }));
      t.is((err as grpc.ServiceError).code, grpc.status.INVALID_ARGUMENT);
      // (Its message is left alone: grpc-message encoding is issue 13 item 1.) The field, from the details:
      t.deepEqual(violatedFieldsOf(err as grpc.ServiceError), ["update_mask.paths[1]"]);
    } finally {
      subjects.close();
    }

    // REST, as documented: metadata given replaces; left out stays; {} or null (absent) clears.
    const put = (body: unknown) => ok(server, key, "PUT", `/subjects/${created.id}`, body);
    t.deepEqual((await put({ metadata: { c: "3" } })).metadata, { c: "3" });
    t.deepEqual((await put({ name: "Ada" })).metadata, { c: "3" });
    t.deepEqual((await put({ metadata: null, email: "ada@example.com" })).metadata, {});
    t.deepEqual((await put({ metadata: { c: "3" } })).metadata, { c: "3" });
    const emptied = await put({ metadata: {} });
    t.deepEqual([emptied.metadata, emptied.email, emptied.name], [{}, "ada@example.com", "Ada"]);
    t.deepEqual(Object.keys(emptied).sort(), ["billing_details", "created_at", "email", "external_id", "has_payment_method", "id", "metadata", "name", "test_clock_id"]);
    const bad = await rest(server.url, "PUT", `/subjects/${created.id}`, key, { metadata: { n: 1 } });
    t.is(bad.status, 400);
    t.is(bad.body.message, "metadata.n: must be a string");
  });

  test(`${store}: a client generated from the older contract is refused naming the field it still sends, never read wrongly`, async (t) => {
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { name: "Ada", metadata: { a: "1" } });
    // UpdateSubject with metadata as the old field 4, a google.protobuf.Struct.
    const update = new BinaryWriter();
    update.tag(1, WireType.LengthDelimited).string(subject.id);
    update.tag(4, WireType.LengthDelimited).bytes(toBinary(StructSchema, fromJson(StructSchema, { b: "2" })));
    const refused = await rawUnary(server, "/billing.v1.SubjectService/UpdateSubject", update.finish(), key);
    t.is(refused?.code, grpc.status.INVALID_ARGUMENT);
    t.deepEqual(violatedFieldsOf(refused as grpc.ServiceError), ["metadata"]);
    t.deepEqual((await ok(server, key, "GET", `/subjects/${subject.id}`)).metadata, { a: "1" }, "unchanged");

    // CreateUsageEvent with the timestamp as the old field 5, an RFC 3339 string: not "now", refused.
    const event = new BinaryWriter();
    event.tag(1, WireType.LengthDelimited).string("old-1");
    event.tag(2, WireType.LengthDelimited).string(subject.id);
    event.tag(3, WireType.LengthDelimited).string("api");
    event.tag(5, WireType.LengthDelimited).string("2026-03-01T10:00:00Z");
    const stale = await rawUnary(server, "/billing.v1.UsageEventService/CreateUsageEvent", event.finish(), key);
    t.is(stale?.code, grpc.status.INVALID_ARGUMENT);
    t.deepEqual(violatedFieldsOf(stale as grpc.ServiceError), ["timestamp"]);
    // Nothing was written: the key is still free.
    t.is((await ok(server, key, "POST", "/usage-events", { idempotency_key: "old-1", subject_id: subject.id, event_name: "api", data: {} })).status, "accepted");
  });
}
