/**
 * The server as gRPC tooling and browsers see it: `buf curl` over gRPC, gRPC-Web and Connect with
 * server reflection v1 and v1alpha (services, the standard health service, error-detail types);
 * gRPC-Web answers with grpc-message spelled as gRPC says; application/grpc-web-text (base64, the
 * grpc-web browser client's default) in and out; an unknown gRPC-Web method as UNIMPLEMENTED;
 * Connect GET for a read-only RPC (never cached: `Cache-Control: private, no-store`); and Connect requests in gzip, still bounded and still strict.
 */
import { execFile } from "node:child_process";
import http from "node:http";
import { gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import test from "ava";
import { CreateSubjectRequestSchema, CreateSubjectResponseSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { reasonOf, violatedFields } from "../helpers/clients.js";
import { STORES, type Store } from "../helpers/db.js";
import { useServers } from "../helpers/server.js";

/** A grpc-message as gRPC clients read it: `%XX` sequences back to bytes, read as UTF-8 (a malformed sequence stays as sent). */
const decodeGrpcMessage = (value: string): string =>
  Buffer.from(
    Buffer.from(value, "utf8")
      .toString("latin1")
      .replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
    "latin1",
  ).toString("utf8");

const BUF = "node_modules/.bin/buf";

/** Runs `buf curl` with `args`: its exit code, output and error output. */
function bufCurl(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(BUF, ["curl", ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      resolve({ code, out: stdout, err: stderr });
    });
  });
}

const serverOf = useServers();

/** The server for checks that involve no storage (reflection, validation before any query). */
const anyServer = () => serverOf(STORES[0] as Store);

const PROTOCOLS = ["grpc", "grpcweb", "connect"] as const;
const REFLECTION = ["grpc-v1", "grpc-v1alpha"] as const;

// One buf process at a time: two dozen at once on a small machine starve each other.
for (const reflect of REFLECTION) {
  test.serial(`buf curl lists the services over reflection ${reflect}, health and both reflection versions included`, async (t) => {
    const r = await bufCurl("--reflect-protocol", reflect, "--list-services", anyServer().url);
    t.is(r.code, 0, r.err);
    const services = r.out.trim().split("\n");
    for (const s of ["billing.v1.SubjectService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]) {
      t.true(services.includes(s), `${s} in ${r.out}`);
    }
  });

  for (const protocol of PROTOCOLS) {
    test.serial(`buf curl --protocol ${protocol}, schema from reflection ${reflect}: a call answers, and an error reads exactly`, async (t) => {
      const { url, keys } = anyServer();
      const ping = await bufCurl("--protocol", protocol, "--reflect-protocol", reflect, `${url}/billing.v1.HealthService/Ping`);
      t.is(ping.code, 0, ping.err);
      t.deepEqual(JSON.parse(ping.out), { ok: true });

      const check = await bufCurl("--protocol", protocol, "--reflect-protocol", reflect, `${url}/grpc.health.v1.Health/Check`, "-d", '{"service":""}');
      t.is(check.code, 0, check.err);
      t.deepEqual(JSON.parse(check.out), { status: "SERVING" });

      const bad = await bufCurl("--protocol", protocol, "--reflect-protocol", reflect, "-H", `x-api-key: ${keys.a}`, `${url}/billing.v1.SubjectService/CreateSubject`, "-d", '{"email":"ça: 100%"}');
      t.not(bad.code, 0);
      const body = JSON.parse(bad.err);
      t.is(body.code, "invalid_argument");
      t.is(body.message, "email: must be a valid email address");
      t.deepEqual(
        body.details.map((d: { type: string }) => d.type),
        ["google.rpc.ErrorInfo", "google.rpc.BadRequest", "google.rpc.RequestInfo"],
      );
      if (protocol === "connect") {
        // Connect carries each detail decoded beside its bytes.
        t.is(reasonOf(body), "INVALID_FIELD");
        t.deepEqual(violatedFields(body), ["email"]);
      }
    });
  }

  test.serial(`reflection ${reflect} resolves the error-detail types the server sends (google.rpc.Status, ErrorInfo, BadRequest, RetryInfo)`, async (t) => {
    const service = reflect === "grpc-v1" ? "grpc.reflection.v1.ServerReflection" : "grpc.reflection.v1alpha.ServerReflection";
    for (const [symbol, file, messages] of [
      ["google.rpc.ErrorInfo", "google/rpc/error_details.proto", ["ErrorInfo", "BadRequest", "RetryInfo"]],
      ["google.rpc.Status", "google/rpc/status.proto", ["Status"]],
      ["grpc.health.v1.Health", "grpc/health/v1/health.proto", ["HealthCheckRequest", "HealthCheckResponse"]],
    ] as const) {
      const r = await bufCurl("--protocol", "grpc", "--reflect-protocol", reflect, `${anyServer().url}/${service}/ServerReflectionInfo`, "-d", JSON.stringify({ file_containing_symbol: symbol }));
      t.is(r.code, 0, r.err);
      const answer = JSON.parse(r.out);
      const files = (answer.fileDescriptorResponse.fileDescriptorProto as string[]).map((b) => fromBinary(FileDescriptorProtoSchema, Buffer.from(b, "base64")));
      const found = files.find((f) => f.name === file);
      t.truthy(found, `${symbol}: ${files.map((f) => f.name).join(", ")}`);
      t.deepEqual(
        messages.filter((m) => found?.messageType.some((d) => d.name === m)),
        [...messages],
      );
    }
  });
}

/** A raw gRPC-Web call over HTTP/1.1: the status, headers and body (`body` written in these chunks). */
function grpcWeb(url: string, path: string, type: string, chunks: Buffer[], key?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method: "POST", headers: { "content-type": type, "x-grpc-web": "1", ...(key ? { "x-api-key": key } : {}) } }, (res) => {
      const out: Buffer[] = [];
      res.on("data", (c: Buffer) => out.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(out) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    // One chunk at a time, each flushed before the next: the server sees them apart.
    const write = (i: number) => {
      if (i === chunks.length) return req.end();
      req.write(chunks[i], () => setTimeout(() => write(i + 1), 10));
    };
    write(0);
  });
}

const envelope = (msg: Uint8Array, flags = 0) => {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(msg.byteLength, 1);
  return Buffer.concat([head, msg]);
};

/** A gRPC-Web body's frames: the messages and the trailer (raw text and parsed). */
function frames(body: Buffer): { messages: Buffer[]; trailerText: string; trailer: Record<string, string> } {
  const messages: Buffer[] = [];
  let trailerText = "";
  let at = 0;
  while (at + 5 <= body.length) {
    const len = body.readUInt32BE(at + 1);
    const data = body.subarray(at + 5, at + 5 + len);
    if ((body[at] as number) & 0x80) trailerText += data.toString("utf8");
    else messages.push(data);
    at += 5 + len;
  }
  const trailer: Record<string, string> = {};
  for (const line of trailerText.split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) trailer[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { messages, trailerText, trailer };
}

/** grpc-web-text answers: base64 segments, each padded, one after another. */
function fromText(text: Buffer): Buffer {
  const s = text.toString("latin1");
  const parts: Buffer[] = [];
  for (let at = 0; at < s.length; at += 4) parts.push(Buffer.from(s.slice(at, at + 4), "base64"));
  return Buffer.concat(parts);
}

test("gRPC-Web: grpc-message is spelled as gRPC says (colons as they are, non-ASCII and '%' percent-encoded)", async (t) => {
  const { url, keys } = anyServer();
  const bad = await grpcWeb(
    url,
    "/billing.v1.SubjectService/CreateSubject",
    "application/grpc-web+proto",
    [envelope(toBinary(CreateSubjectRequestSchema, create(CreateSubjectRequestSchema, { email: "x" })))],
    keys.a,
  );
  t.is(bad.status, 200);
  const { trailer, trailerText } = frames(bad.body);
  t.is(trailer["grpc-status"], "3");
  t.true(trailerText.includes("grpc-message: email: must be a valid email address\r\n"), trailerText);

  const id = "ß☃ 100%";
  const missing = await grpcWeb(
    url,
    "/billing.v1.SubjectService/GetSubject",
    "application/grpc-web+proto",
    [envelope(Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(id)]), Buffer.from(id)]))],
    keys.a,
  );
  const m = frames(missing.body).trailer;
  t.is(m["grpc-status"], "5");
  t.is(m["grpc-message"], 'subject "%C3%9F%E2%98%83 100%25" not found');
  t.is(decodeGrpcMessage(m["grpc-message"] as string), `subject ${JSON.stringify(id)} not found`);
});

for (const store of STORES) {
  test(`${store}: application/grpc-web-text: a base64 request (split anywhere, padded segments) gets a base64 answer`, async (t) => {
    const s = serverOf(store);
    const message = envelope(toBinary(CreateSubjectRequestSchema, create(CreateSubjectRequestSchema, { name: "Text Mode ☃", externalId: `text-${store}` })));
    // Two separately encoded (and padded) segments, written in chunks that cut through base64 groups.
    const text = Buffer.from(message.subarray(0, 4).toString("base64") + message.subarray(4).toString("base64"), "latin1");
    t.true(text.subarray(0, 8).includes("="), "the first segment is padded");
    const chunks = [text.subarray(0, 3), text.subarray(3, 10), text.subarray(10)];
    const r = await grpcWeb(s.url, "/billing.v1.SubjectService/CreateSubject", "application/grpc-web-text", chunks, s.keys.a);
    t.is(r.status, 200);
    t.is(r.headers["content-type"], "application/grpc-web-text+proto");
    t.regex(r.body.toString("latin1"), /^[A-Za-z0-9+/=]+$/);
    const { messages, trailer } = frames(fromText(r.body));
    t.is(trailer["grpc-status"], "0", trailer["grpc-message"]);
    t.is(messages.length, 1);
    const reply = fromBinary(CreateSubjectResponseSchema, messages[0] as Buffer);
    t.is(reply.subject?.name, "Text Mode ☃");
    t.is(reply.subject?.externalId, `text-${store}`);

    // An error answers in text too, message as gRPC spells it.
    const bad = await grpcWeb(
      s.url,
      "/billing.v1.SubjectService/CreateSubject",
      "application/grpc-web-text+proto",
      [Buffer.from(envelope(toBinary(CreateSubjectRequestSchema, create(CreateSubjectRequestSchema, { email: "x" }))).toString("base64"))],
      s.keys.a,
    );
    const bt = frames(fromText(bad.body)).trailer;
    t.is(bt["grpc-status"], "3");
    t.is(bt["grpc-message"], "email: must be a valid email address");
    t.truthy(bt["grpc-status-details-bin"]);

    // Not base64: invalid_argument, nothing written.
    const junk = await grpcWeb(s.url, "/billing.v1.SubjectService/CreateSubject", "application/grpc-web-text", [Buffer.from("AAAA*!")], s.keys.a);
    t.is(frames(fromText(junk.body)).trailer["grpc-status"], "3");
  });
}

test("gRPC-Web and grpc-web-text: an unknown method is grpc-status 12 UNIMPLEMENTED with HTTP 200", async (t) => {
  const { url } = anyServer();
  const web = await grpcWeb(url, "/billing.v1.NoSuchService/DoIt", "application/grpc-web+proto", [envelope(Buffer.alloc(0))]);
  t.is(web.status, 200);
  t.is(frames(web.body).trailer["grpc-status"], "12");
  const text = await grpcWeb(url, "/billing.v1.NoSuchService/DoIt", "application/grpc-web-text", [Buffer.from(envelope(Buffer.alloc(0)).toString("base64"))]);
  t.is(text.status, 200);
  t.is(frames(fromText(text.body)).trailer["grpc-status"], "12");
});

for (const store of STORES) {
  test(`${store}: Connect GET reads a subject (the message in the query), with the key checked as for POST`, async (t) => {
    const s = serverOf(store);
    const created = await fetch(`${s.url}/billing.v1.SubjectService/CreateSubject`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": s.keys.a },
      body: JSON.stringify({ name: "Got By GET", external_id: `get-${store}` }),
    });
    t.is(created.status, 200);
    const id = ((await created.json()) as { subject: { id: string } }).subject.id;
    const query = (message: unknown) => `?connect=v1&encoding=json&message=${encodeURIComponent(JSON.stringify(message))}`;
    const path = `/billing.v1.SubjectService/GetSubject${query({ subject_id: id })}`;

    const got = await fetch(`${s.url}${path}`, { headers: { "x-api-key": s.keys.a } });
    t.is(got.status, 200);
    const body = (await got.json()) as { subject: { id: string; name: string } };
    t.is(body.subject.id, id);
    t.is(body.subject.name, "Got By GET");
    // One key's view of billing state: stored by no cache, shared or private; what it depends on
    // besides the URL (which holds the message, encoding, compression and connect) named in Vary.
    t.is(got.headers.get("cache-control"), "private, no-store");
    t.is(got.headers.get("vary"), "X-API-Key, Accept-Encoding");
    // The same policy for a client that accepts a compressed answer.
    const zipped = await fetch(`${s.url}/billing.v1.SubjectService/ListSubjects${query({ limit: 100 })}`, { headers: { "x-api-key": s.keys.a, "accept-encoding": "gzip" } });
    t.is(zipped.status, 200);
    t.is(zipped.headers.get("cache-control"), "private, no-store");
    t.is(zipped.headers.get("vary"), "X-API-Key, Accept-Encoding");

    const noKey = await fetch(`${s.url}${path}`);
    t.is(noKey.status, 401);
    t.is(noKey.headers.get("cache-control"), "private, no-store", "an error is not cached either");
    t.is(((await noKey.json()) as { code: string }).code, "unauthenticated");
    const otherEnv = await fetch(`${s.url}${path}`, { headers: { "x-api-key": s.keys.b } });
    t.is(otherEnv.status, 404, "scoped to the key's environment as for POST");

    // A method with side effects is not callable with GET.
    const write = await fetch(`${s.url}/billing.v1.SubjectService/CreateSubject${query({ name: "No" })}`, { headers: { "x-api-key": s.keys.a } });
    t.is(write.status, 405);
  });

  test(`${store}: Connect in gzip: read and answered; a body bounded after decompression; Timestamps still read strictly`, async (t) => {
    const s = serverOf(store);
    const post = (path: string, json: unknown) =>
      fetch(`${s.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-encoding": "gzip", "accept-encoding": "gzip", "x-api-key": s.keys.a },
        body: gzipSync(Buffer.from(JSON.stringify(json))),
      });
    const metadata = Object.fromEntries([1, 2, 3, 4].map((i) => [`k${i}`, String(i).repeat(400)]));
    const ok = await post("/billing.v1.SubjectService/CreateSubject", { name: "Zipped", external_id: `gz-${store}`, metadata });
    t.is(ok.status, 200);
    t.is(ok.headers.get("content-encoding"), "gzip", "an answer over 1 KiB comes back compressed");
    t.is(((await ok.json()) as { subject: { name: string } }).subject.name, "Zipped");

    const huge = await post("/billing.v1.SubjectService/CreateSubject", { name: "a".repeat(1024 * 1024) });
    const hugeBody = (await huge.json()) as { code: string };
    t.is(hugeBody.code, "resource_exhausted");

    // Malformed binary protobuf is bad input compressed or not (reason MALFORMED_PROTOBUF, never internal).
    const garbage = gzipSync(Buffer.from([0xff, 0xff, 0xff]));
    const binary = await fetch(`${s.url}/billing.v1.SubjectService/GetSubject`, {
      method: "POST",
      headers: { "content-type": "application/proto", "content-encoding": "gzip", "x-api-key": s.keys.a },
      body: garbage,
    });
    t.is(binary.status, 400);
    t.is(binary.headers.get("content-type"), "application/json");
    t.is(reasonOf((await binary.json()) as { details?: { type: string; debug?: { reason?: string } }[] }), "MALFORMED_PROTOBUF");
    const web = await fetch(`${s.url}/billing.v1.SubjectService/GetSubject`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "grpc-encoding": "gzip", "x-api-key": s.keys.a },
      body: envelope(garbage, 1),
    });
    t.is(frames(Buffer.from(await web.arrayBuffer())).trailer["grpc-status"], "3");

    const clock = await post("/billing.v1.TestClockService/CreateTestClock", { name: "c", frozen_time: "2026-02-30T00:00:00Z" });
    t.is(clock.status, 400);
    const clockBody = (await clock.json()) as { code: string; details?: { type: string; debug?: { field_violations?: { field?: string }[] } }[] };
    t.is(clockBody.code, "invalid_argument");
    t.deepEqual(violatedFields(clockBody), ["frozen_time"]);
  });
}
