/**
 * The server as a gRPC client nobody here wrote sees it: @grpc/grpc-js with the project's protos
 * loaded by @grpc/proto-loader. Unary calls, error messages read back exactly (colons, non-ASCII,
 * `%`), error details decodable from grpc-status-details-bin, deadlines, gzip both ways (and a
 * compressed body still bounded after decompression), an unknown method as UNIMPLEMENTED, and the
 * standard grpc.health.v1 service (Check, Watch, and Watch seeing the database go and come back).
 */
import http2 from "node:http2";
import { gunzipSync, gzipSync } from "node:zlib";
import { createRegistry, fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { grpcPackage } from "../helpers/grpc-package.js";
import test from "ava";
import { CreateSubjectRequestSchema, CreateSubjectResponseSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../src/gen/google/rpc/status_pb.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { proxied } from "../helpers/db-proxy.js";
import { seedKeys, startAppOn, untilHealthy, useServers } from "../helpers/server.js";

const pkg = grpcPackage(["billing/v1/subject_service.proto", "grpc/health/v1/health.proto"], { enums: String, defaults: true, oneofs: true });
const SubjectClient = pkg.billing.v1.SubjectService as typeof grpc.Client;
const HealthClient = pkg.grpc.health.v1.Health as typeof grpc.Client;

// biome-ignore lint: generated client methods are untyped
type Untyped = grpc.Client & Record<string, any>;

const target = (url: string) => url.replace(/^http:\/\//, "");
const subjects = (url: string, options: grpc.ChannelOptions = {}) => new SubjectClient(target(url), grpc.credentials.createInsecure(), options) as Untyped;
const health = (url: string) => new HealthClient(target(url), grpc.credentials.createInsecure()) as Untyped;

function keyed(key: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("x-api-key", key);
  return md;
}

/** A unary call: its answer, or the grpc-js ServiceError it failed with. */
function unary<T>(client: Untyped, method: string, req: unknown, md = new grpc.Metadata(), options: grpc.CallOptions = {}): Promise<{ ok: T } | { err: grpc.ServiceError }> {
  return new Promise((resolve) => {
    client[method](req, md, options, (err: grpc.ServiceError | null, res: T) => resolve(err ? { err } : { ok: res }));
  });
}

function failed<T>(r: { ok: T } | { err: grpc.ServiceError }): grpc.ServiceError {
  if (!("err" in r)) throw new Error(`expected the call to fail, it answered ${JSON.stringify(r.ok)}`);
  return r.err;
}

function answered<T>(r: { ok: T } | { err: grpc.ServiceError }): T {
  if ("err" in r) throw new Error(`the call failed: ${r.err.message}`);
  return r.ok;
}

const serverOf = useServers();
const clients: grpc.Client[] = [];
const track = <C extends grpc.Client>(c: C): C => {
  clients.push(c);
  return c;
};

test.after.always(() => {
  for (const c of clients) c.close();
});

for (const store of STORES) {
  const server = () => serverOf(store);

  test(`${store}: grpc-js unary calls create and read a subject`, async (t) => {
    const s = server();
    const c = track(subjects(s.url));
    const created = answered<{ subject: { id: string; name: string } }>(
      await unary(c, "CreateSubject", { name: "Ada Lovelace", external_id: `ext-${store}-1`, metadata: { plan: "pro" } }, keyed(s.keys.a)),
    );
    t.regex(created.subject.id, /^subj_/);
    const got = answered<{ subject: { id: string; name: string; external_id: string; metadata: Record<string, string> } }>(
      await unary(c, "GetSubject", { subject_id: created.subject.id }, keyed(s.keys.a)),
    );
    t.is(got.subject.id, created.subject.id);
    t.is(got.subject.name, "Ada Lovelace");
    t.is(got.subject.external_id, `ext-${store}-1`);
    t.deepEqual(got.subject.metadata, { plan: "pro" });
  });

  test(`${store}: grpc-js reads error messages exactly, colons, '%' and non-ASCII included`, async (t) => {
    const s = server();
    const c = track(subjects(s.url));
    const bad = failed(await unary(c, "CreateSubject", { email: "not an email" }, keyed(s.keys.a)));
    t.is(bad.code, grpc.status.INVALID_ARGUMENT);
    t.is(bad.details, "email: must be a valid email address");

    const id = "zß☃ 100%: ok";
    const missing = failed(await unary(c, "GetSubject", { subject_id: id }, keyed(s.keys.a)));
    t.is(missing.code, grpc.status.NOT_FOUND);
    t.is(missing.details, `subject ${JSON.stringify(id)} not found`);

    const noKey = failed(await unary(c, "GetSubject", { subject_id: "x" }));
    t.is(noKey.code, grpc.status.UNAUTHENTICATED);
    t.is(noKey.details, "missing API key: send it in the X-API-Key header");
  });

  test(`${store}: error details decode from grpc-status-details-bin as google.rpc.Status`, async (t) => {
    const s = server();
    const c = track(subjects(s.url));
    const err = failed(await unary(c, "CreateSubject", { email: "nope", name: "x" }, keyed(s.keys.a)));
    const bin = err.metadata.get("grpc-status-details-bin")[0];
    t.true(Buffer.isBuffer(bin));
    const status = fromBinary(StatusSchema, bin as Buffer);
    t.is(status.code, grpc.status.INVALID_ARGUMENT);
    t.is(status.message, "email: must be a valid email address");
    const registry = createRegistry(ErrorInfoSchema, BadRequestSchema);
    const details = status.details.map((d) => anyUnpack(d, registry));
    const info = details.find((d) => d?.$typeName === "google.rpc.ErrorInfo");
    const badRequest = details.find((d) => d?.$typeName === "google.rpc.BadRequest");
    t.like(info, { reason: "INVALID_FIELD", domain: "billing.v1" });
    t.deepEqual(
      (badRequest as { fieldViolations: { field: string; description: string }[] } | undefined)?.fieldViolations.map((v) => [v.field, v.description]),
      [["email", "must be a valid email address"]],
    );
  });

  test(`${store}: grpc-js sends gzip and the server reads it; a compressed body is bounded after decompression`, async (t) => {
    const s = server();
    const c = track(subjects(s.url, { "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip }));
    const created = answered<{ subject: { id: string; name: string } }>(await unary(c, "CreateSubject", { name: "Zipped Grace", external_id: `zip-${store}` }, keyed(s.keys.a)));
    t.is(created.subject.name, "Zipped Grace");
    const got = answered<{ subject: { name: string } }>(await unary(c, "GetSubject", { subject_id: created.subject.id }, keyed(s.keys.a)));
    t.is(got.subject.name, "Zipped Grace");

    // 1 MB of name compresses to about 1 KB: far under the 256 KB bound on the wire, far over it read.
    const huge = failed(await unary(c, "CreateSubject", { name: "a".repeat(1024 * 1024) }, keyed(s.keys.a)));
    t.is(huge.code, grpc.status.RESOURCE_EXHAUSTED, huge.details);
    const list = answered<{ subjects: unknown[] }>(await unary(c, "ListSubjects", { limit: 100 }, keyed(s.keys.a)));
    t.false(JSON.stringify(list).includes("aaaaaaaaaa"), "nothing was written");
  });

  test(`${store}: the server answers gzip to a client that accepts it (gRPC over HTTP/2)`, async (t) => {
    const s = server();
    // An answer over connect-node's 1 KiB threshold for compressing: metadata of 4 × 400 characters.
    const metadata = Object.fromEntries([1, 2, 3, 4].map((i) => [`k${i}`, String(i).repeat(400)]));
    const message = toBinary(CreateSubjectRequestSchema, create(CreateSubjectRequestSchema, { name: "Big", externalId: `big-${store}`, metadata }));
    const body = gzipSync(message);
    const frame = Buffer.alloc(5);
    frame[0] = 1;
    frame.writeUInt32BE(body.length, 1);
    const session = http2.connect(s.url);
    try {
      const req = session.request({
        ":method": "POST",
        ":path": "/billing.v1.SubjectService/CreateSubject",
        "content-type": "application/grpc+proto",
        te: "trailers",
        "grpc-encoding": "gzip",
        "grpc-accept-encoding": "gzip",
        "x-api-key": s.keys.a,
      });
      let headers: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      req.on("response", (h) => (headers = h));
      req.on("trailers", (h) => (trailers = h));
      req.on("data", (d: Buffer) => chunks.push(d));
      req.end(Buffer.concat([frame, body]));
      await new Promise((resolve, reject) => req.on("close", resolve).on("error", reject));
      t.is(trailers["grpc-status"], "0", String(trailers["grpc-message"]));
      t.is(headers["grpc-encoding"], "gzip");
      const out = Buffer.concat(chunks);
      t.is(out[0], 1, "the response message is compressed");
      const reply = fromBinary(CreateSubjectResponseSchema, gunzipSync(out.subarray(5, 5 + out.readUInt32BE(1))));
      t.is(reply.subject?.name, "Big");
      t.deepEqual(reply.subject?.metadata, metadata);
    } finally {
      session.close();
    }
  });

  test(`${store}: deadlines: grpc-timeout is honoured, a call within it answers and a stream past it ends DEADLINE_EXCEEDED`, async (t) => {
    const s = server();
    const c = track(subjects(s.url));
    const within = await unary(c, "ListSubjects", { limit: 1 }, keyed(s.keys.a), { deadline: Date.now() + 60_000 });
    t.true("ok" in within);
    const h = track(health(s.url));
    const code = await new Promise<number>((resolve) => {
      const call = h.Watch({ service: "" }, new grpc.Metadata(), { deadline: Date.now() + 300 });
      call.on("data", () => {});
      call.on("error", (e: grpc.ServiceError) => resolve(e.code));
      call.on("end", () => resolve(grpc.status.OK));
    });
    t.is(code, grpc.status.DEADLINE_EXCEEDED);

    // The server's own answer, to a client with no timer of its own: grpc-status 4 in the trailers.
    const session = http2.connect(s.url);
    try {
      const req = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Watch", "content-type": "application/grpc+proto", te: "trailers", "grpc-timeout": "300m" });
      let trailers: http2.IncomingHttpHeaders = {};
      req.on("trailers", (h) => (trailers = h));
      req.on("data", () => {});
      req.end(Buffer.alloc(5));
      await new Promise((resolve, reject) => req.on("close", resolve).on("error", reject));
      t.is(trailers["grpc-status"], String(grpc.status.DEADLINE_EXCEEDED), String(trailers["grpc-message"]));
    } finally {
      session.close();
    }
  });

  test(`${store}: grpc.health.v1 Check, with no API key: SERVING for the server and its services, NOT_FOUND for others`, async (t) => {
    const s = server();
    const h = track(health(s.url));
    for (const service of ["", "billing.v1.SubjectService", "billing.v1.UsageEventService", "grpc.health.v1.Health"]) {
      t.deepEqual(answered(await unary(h, "Check", { service })), { status: "SERVING" }, service);
    }
    const unknown = failed(await unary(h, "Check", { service: "billing.v1.NoSuchService" }));
    t.is(unknown.code, grpc.status.NOT_FOUND);
  });

  test(`${store}: grpc.health.v1 Watch sends the status at once; an unknown service is SERVICE_UNKNOWN and the call stays open`, async (t) => {
    const s = server();
    const h = track(health(s.url));
    for (const [service, expected] of [
      ["", "SERVING"],
      ["billing.v1.NoSuchService", "SERVICE_UNKNOWN"],
    ] as const) {
      const call = h.Watch({ service });
      const first = await new Promise<{ status: string }>((resolve, reject) => {
        call.once("data", resolve);
        call.once("error", reject);
      });
      t.deepEqual(first, { status: expected });
      const ended = await new Promise<number>((resolve) => {
        call.on("error", (e: grpc.ServiceError) => resolve(e.code));
        call.on("end", () => resolve(-1));
        call.cancel();
      });
      t.is(ended, grpc.status.CANCELLED, "open until the client cancels");
    }
  });

  test(`${store}: a gRPC call of a method the server does not have is UNIMPLEMENTED`, async (t) => {
    const s = server();
    const client = track(new grpc.Client(target(s.url), grpc.credentials.createInsecure()));
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        "/billing.v1.NoSuchService/DoIt",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.alloc(0),
        keyed(s.keys.a),
        (e) => resolve(e),
      ),
    );
    t.is(err?.code, grpc.status.UNIMPLEMENTED);
    t.is(err?.details, "unknown method /billing.v1.NoSuchService/DoIt: this server has no such gRPC service or method");
  });
}

if (STORES.includes("mysql")) {
  test("mysql: grpc.health.v1 Watch reports each change: NOT_SERVING when the database stops answering, SERVING when it is back", async (t) => {
    const db = await createTestDatabase("mysql");
    const seeded = await seedKeys(db.url);
    const { proxy, url } = await proxied(db.url);
    const app = await startAppOn(url, { SCHEDULER_INTERVAL_MS: "0" });
    const h = health(app.url);
    try {
      await untilHealthy(app.url);
      const call = h.Watch({ service: "billing.v1.SubjectService" });
      const seen: string[] = [];
      const next = () =>
        new Promise<string>((resolve, reject) => {
          call.once("data", (m: { status: string }) => {
            seen.push(m.status);
            resolve(m.status);
          });
          call.once("error", reject);
        });
      t.is(await next(), "SERVING");
      proxy.freeze();
      t.is(await next(), "NOT_SERVING");
      proxy.thaw();
      t.is(await next(), "SERVING");
      t.deepEqual(seen, ["SERVING", "NOT_SERVING", "SERVING"], "one message per change, none repeated");
      call.cancel();
    } finally {
      h.close();
      await app.stop();
      await proxy.shut();
      await seeded.close();
      await db.drop();
    }
  });
}
