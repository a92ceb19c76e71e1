/**
 * The same bad input gets the same error on every protocol: the same code, google.rpc.ErrorInfo
 * reason and google.rpc.BadRequest field paths over REST, Connect JSON, gRPC with the JSON codec,
 * and, where the binary format can carry the bad input at all, Connect binary (connect-es) and
 * gRPC from @grpc/grpc-js (a client nobody here wrote, loading the project's protos with
 * @grpc/proto-loader). On both stores, and nothing is written.
 */
import http2 from "node:http2";
import { type DescMessage, type DescMethod, type MessageInitShape, create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { errorFromJson } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { grpcPackage } from "../helpers/grpc-package.js";
import test from "ava";
import { RateCardService } from "../../src/gen/billing/v1/rate_card_service_pb.js";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { TestClockService } from "../../src/gen/billing/v1/test_clock_service_pb.js";
import { UsageEventService } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { reasonOf, rest, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { useServer } from "../helpers/server.js";

/** What a caller can rely on: the same on every protocol. */
interface Answer {
  code: string;
  reason: string | undefined;
  fields: string[];
}

const codeName = (c: Code) => Code[c].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();

function answerOf(err: ConnectError): Answer {
  return {
    code: codeName(err.code),
    reason: err.findDetails(ErrorInfoSchema)[0]?.reason,
    fields: (err.findDetails(BadRequestSchema)[0]?.fieldViolations ?? []).map((v) => v.field),
  };
}

const envelope = (msg: Uint8Array) => {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(msg.byteLength, 1);
  return Buffer.concat([head, msg]);
};

/** gRPC with the JSON codec (application/grpc+json) over HTTP/2: the body as given, the status from the trailers. */
async function grpcJson(url: string, method: DescMethod, key: string, body: Uint8Array): Promise<Answer | "ok"> {
  const session = http2.connect(url);
  try {
    const req = session.request({
      ":method": "POST",
      ":path": `/${method.parent.typeName}/${method.name}`,
      "content-type": "application/grpc+json",
      te: "trailers",
      "x-api-key": key,
    });
    const status = new Headers();
    const take = (h: http2.IncomingHttpHeaders) => {
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && typeof v === "string") status.set(k, v);
    };
    req.on("response", take);
    req.on("trailers", take);
    req.on("data", () => {});
    req.end(envelope(body));
    await new Promise((resolve, reject) => {
      req.on("close", resolve);
      req.on("error", reject);
    });
    const err = findTrailerError(status);
    return err ? answerOf(err) : "ok";
  } finally {
    session.close();
  }
}

/** Connect unary JSON (application/json): the body as given. */
async function connectJson(url: string, method: DescMethod, key: string, body: Uint8Array): Promise<Answer | "ok"> {
  const res = await fetch(`${url}/${method.parent.typeName}/${method.name}`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1", "x-api-key": key },
    body: Buffer.from(body),
  });
  const json = await res.json();
  if (res.status === 200) return "ok";
  return answerOf(errorFromJson(json, undefined, new ConnectError("no error JSON", Code.Unknown)));
}

/** Connect binary (application/proto) through connect-es's own client. */
async function connectBinary<I extends DescMessage>(url: string, method: DescMethod, key: string, input: MessageInitShape<I>): Promise<Answer | "ok"> {
  const transport = createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: true });
  const client = createClient(method.parent, transport) as unknown as Record<string, (i: unknown, o: unknown) => Promise<unknown>>;
  try {
    await (client[method.localName] as (i: unknown, o: unknown) => Promise<unknown>)(input, { headers: { "x-api-key": key } });
    return "ok";
  } catch (err) {
    return answerOf(ConnectError.from(err));
  }
}

// @grpc/grpc-js, with the services loaded from the contract's .proto files by @grpc/proto-loader.
const billingPackage = grpcPackage(["billing/v1/subject_service.proto", "billing/v1/usage_event_service.proto", "billing/v1/test_clock_service.proto", "billing/v1/rate_card_service.proto"], {
  defaults: false,
}) as { billing: { v1: Record<string, grpc.ServiceClientConstructor> } };

/** A unary call from @grpc/grpc-js; the input is the binary message, read into grpc-js's object form by proto-loader's own codec. */
async function grpcJs(url: string, method: DescMethod, key: string, bytes: Uint8Array): Promise<Answer | "ok"> {
  const Ctor = billingPackage.billing.v1[method.parent.name] as grpc.ServiceClientConstructor;
  const def = Ctor.service[method.name] as grpc.MethodDefinition<unknown, unknown>;
  const client = new Ctor(new URL(url).host, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set("x-api-key", key);
  try {
    const call = client[method.name] as (req: unknown, md: grpc.Metadata, cb: (err: grpc.ServiceError | null) => void) => void;
    const err = await new Promise<grpc.ServiceError | null>((resolve) => call.call(client, def.requestDeserialize(Buffer.from(bytes)), metadata, resolve));
    if (!err) return "ok";
    const trailer = new Headers({ "grpc-status": String(err.code) });
    const details = err.metadata.get("grpc-status-details-bin")[0];
    if (details instanceof Buffer) trailer.set("grpc-status-details-bin", details.toString("base64"));
    return answerOf(findTrailerError(trailer) as ConnectError);
  } finally {
    client.close();
  }
}

interface Case {
  title: string;
  method: DescMethod;
  /** The REST call: its path, and its JSON body when it differs from the RPC one (path parameters). */
  rest: { method: string; path: string; body?: string | Uint8Array };
  /** The request as JSON (or raw bytes), sent as it is on REST, Connect JSON and gRPC JSON. */
  json: string | Uint8Array;
  /** The same bad input as a binary message, when the binary format can carry it. */
  binary?: MessageInitShape<DescMessage>;
  expect: Answer;
}

const field = (reason: string, ...fields: string[]): Answer => ({ code: "invalid_argument", reason, fields });
const LONG_KEY = "k".repeat(41);
const m = {
  createSubject: SubjectService.method.createSubject,
  updateSubject: SubjectService.method.updateSubject,
  createUsageEvent: UsageEventService.method.createUsageEvent,
  createTestClock: TestClockService.method.createTestClock,
  createRateCard: RateCardService.method.createRateCard,
};

const cases: Case[] = [
  { title: "a wrong JSON type (a number for a string)", method: m.createSubject, rest: { method: "POST", path: "/subjects" }, json: '{"name": 5}', expect: field("INVALID_FIELD", "name") },
  {
    title: "wrong JSON types in several fields at once",
    method: m.createSubject,
    rest: { method: "POST", path: "/subjects" },
    json: '{"name": true, "email": 1, "metadata": []}',
    expect: field("INVALID_FIELD", "name", "email", "metadata"),
  },
  { title: "malformed JSON", method: m.createSubject, rest: { method: "POST", path: "/subjects" }, json: '{"name": "x",', expect: field("MALFORMED_JSON", "") },
  { title: "a JSON body that is not an object", method: m.createSubject, rest: { method: "POST", path: "/subjects" }, json: "[1, 2]", expect: field("INVALID_FIELD", "") },
  { title: "bytes that are not UTF-8", method: m.createSubject, rest: { method: "POST", path: "/subjects" }, json: new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x7d]), expect: field("INVALID_UTF8", "") },
  {
    title: "a missing required field",
    method: m.createUsageEvent,
    rest: { method: "POST", path: "/usage-events" },
    json: '{"subject_id": "nobody", "event_name": "api", "data": {}}',
    binary: { subjectId: "nobody", eventName: "api" },
    expect: field("INVALID_FIELD", "idempotency_key"),
  },
  {
    title: "a bad email",
    method: m.createSubject,
    rest: { method: "POST", path: "/subjects" },
    json: '{"email": "not-an-email"}',
    binary: { email: "not-an-email" },
    expect: field("INVALID_FIELD", "email"),
  },
  {
    title: "bad metadata (a value that is not a string)",
    method: m.createSubject,
    rest: { method: "POST", path: "/subjects" },
    json: '{"metadata": {"plan": "pro", "seats": 3}}',
    expect: field("INVALID_FIELD", "metadata.seats"),
  },
  {
    title: "bad metadata on update (a value that is not a string)",
    method: m.updateSubject,
    rest: { method: "PUT", path: "/subjects/nobody", body: '{"metadata": {"seats": 3}}' },
    json: '{"subject_id": "nobody", "metadata": {"seats": 3}}',
    expect: field("INVALID_FIELD", "metadata.seats"),
  },
  {
    title: "bad metadata (a key over 40 characters)",
    method: m.createSubject,
    rest: { method: "POST", path: "/subjects" },
    json: JSON.stringify({ metadata: { [LONG_KEY]: "v" } }),
    binary: { metadata: { [LONG_KEY]: "v" } },
    expect: field("INVALID_FIELD", `metadata.${LONG_KEY}`),
  },
  {
    title: "a bad timestamp (no such calendar date)",
    method: m.createUsageEvent,
    rest: { method: "POST", path: "/usage-events" },
    json: '{"idempotency_key": "k1", "subject_id": "nobody", "event_name": "api", "data": {}, "timestamp": "2026-02-30T00:00:00Z"}',
    expect: field("INVALID_FIELD", "timestamp"),
  },
  {
    title: "a timestamp of the wrong JSON type",
    method: m.createUsageEvent,
    rest: { method: "POST", path: "/usage-events" },
    json: '{"idempotency_key": "k1", "subject_id": "nobody", "event_name": "api", "data": {}, "timestamp": 1767225600}',
    expect: field("INVALID_FIELD", "timestamp"),
  },
  {
    title: "an instant out of range (a usage event's timestamp in 2200)",
    method: m.createUsageEvent,
    rest: { method: "POST", path: "/usage-events" },
    json: '{"idempotency_key": "k1", "subject_id": "nobody", "event_name": "api", "data": {}, "timestamp": "2200-01-01T00:00:00Z"}',
    binary: { idempotencyKey: "k1", subjectId: "nobody", eventName: "api", timestamp: timestampFromDate(new Date("2200-01-01T00:00:00Z")) },
    expect: field("INVALID_FIELD", "timestamp"),
  },
  {
    title: "an instant out of range (a test clock in 1999)",
    method: m.createTestClock,
    rest: { method: "POST", path: "/test-clocks" },
    json: '{"name": "c", "frozen_time": "1999-12-31T23:59:59Z"}',
    binary: { name: "c", frozenTime: timestampFromDate(new Date("1999-12-31T23:59:59Z")) },
    expect: field("INVALID_FIELD", "frozen_time"),
  },
  {
    title: "an unknown value of an enumerated field (billing_interval)",
    method: m.createRateCard,
    rest: { method: "POST", path: "/rate-cards" },
    json: '{"name": "Plan", "billing_interval": "weekly"}',
    binary: { name: "Plan", billingInterval: "weekly" },
    expect: field("INVALID_FIELD", "billing_interval"),
  },
  {
    title: "an update_mask naming a field that cannot change",
    method: m.updateSubject,
    rest: { method: "PUT", path: "/subjects/nobody", body: '{"name": "x", "update_mask": "name,externalId"}' },
    json: '{"subject_id": "nobody", "name": "x", "update_mask": "name,externalId"}',
    binary: { subjectId: "nobody", name: "x", updateMask: { paths: ["name", "external_id"] } },
    expect: field("INVALID_FIELD", "update_mask.paths[1]"),
  },
];

const bytesOf = (body: string | Uint8Array) => (typeof body === "string" ? new TextEncoder().encode(body) : body);

for (const store of STORES) {
  const server = useServer(store);

  for (const c of cases) {
    test(`${store}: ${c.title}: the same code, reason and field paths on every protocol, and nothing written`, async (t) => {
      const key = await server.freshKey();
      const answers: Record<string, Answer | "ok"> = {};

      const r = await fetch(`${server.url}${c.rest.path}`, {
        method: c.rest.method,
        headers: { "content-type": "application/json", "x-api-key": key },
        body: Buffer.from(bytesOf(c.rest.body ?? c.json)),
      });
      const text = await r.text();
      t.false(text.includes("    at "), "no stack trace");
      const body = JSON.parse(text);
      answers.rest = r.status === 200 ? "ok" : { code: body.code, reason: reasonOf(body), fields: violatedFields(body) };
      answers["connect json"] = await connectJson(server.url, c.method, key, bytesOf(c.json));
      answers["grpc json"] = await grpcJson(server.url, c.method, key, bytesOf(c.json));
      if (c.binary) {
        const bytes = toBinary(c.method.input, create(c.method.input, c.binary));
        answers["connect binary"] = await connectBinary(server.url, c.method, key, c.binary);
        answers["grpc-js"] = await grpcJs(server.url, c.method, key, bytes);
      }
      for (const [protocol, answer] of Object.entries(answers)) t.deepEqual(answer, c.expect, protocol);

      // Nothing was written in the fresh environment.
      t.deepEqual((await rest(server.url, "GET", "/subjects", key)).body.subjects, []);
      t.deepEqual((await rest(server.url, "GET", "/rate-cards", key)).body.rate_cards ?? [], []);
    });
  }
}
