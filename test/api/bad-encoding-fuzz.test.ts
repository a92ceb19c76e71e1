/**
 * Generated bad bytes on every protocol and call path (bad-encoding.test.ts has the table of
 * named cases): well-formed requests to GetSubject, CreateUsageEventBatch, StreamUsageEvents and
 * WatchEvents spoiled at random (corrupted, cut or padded gzip and brotli, truncated or garbled
 * protobuf, random envelope flags and lengths, random base64, random query strings, compressed
 * REST bodies), sent over Connect (POST and GET), gRPC (node:http2), gRPC-Web binary and text, and
 * REST. Whatever arrives, the answer is the caller's fault or a success: no HTTP 5xx, no
 * internal, unknown or data_loss, no call left without a status; without a key, unauthenticated.
 *
 * Seeded: a failure names its case number and the seed (FUZZ_SEED overrides it) to replay it.
 */
import http2 from "node:http2";
import { brotliCompressSync, gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import test from "ava";
import { WatchEventsRequestSchema } from "../../src/gen/billing/v1/event_service_pb.js";
import { GetSubjectRequestSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { UsageEventInputSchema } from "../../src/gen/billing/v1/usage_event_pb.js";
import { CreateUsageEventBatchRequestSchema } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { ok } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { type Answer, connectGet, connectPost, envelope, grpcCall, grpcWebCall, restCall } from "../helpers/raw-rpc.js";
import { useServers } from "../helpers/server.js";

const serverOf = useServers();

/** Cases per store. */
const CASES = 2_000;
/** Cases in flight at once (each worker one at a time, with its own HTTP/2 session). */
const WORKERS = 12;
/** A WatchEvents call that decodes stays open until its deadline: this one. */
const WATCH_DEADLINE_MS = 300;
const SEED = Number(process.env.FUZZ_SEED ?? 0x0b5e55ed);

/** mulberry32: a small seeded generator, so that a failing case can be replayed. */
class Gen {
  private a: number;
  constructor(seed: number) {
    this.a = seed >>> 0;
  }
  next(): number {
    this.a = (this.a + 0x6d2b79f5) | 0;
    let t = Math.imul(this.a ^ (this.a >>> 15), 1 | this.a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

/** `bytes` spoiled one of several ways: bytes changed, cut, padded, replaced, or a run overwritten. */
function corrupt(g: Gen, bytes: Uint8Array): Buffer {
  const b = Buffer.from(bytes);
  switch (g.int(5)) {
    case 0: {
      if (b.length === 0) return g.bytes(1 + g.int(4));
      for (let i = 1 + g.int(3); i > 0; i--) {
        const at = g.int(b.length);
        b[at] = (b[at] as number) ^ (1 + g.int(255));
      }
      return b;
    }
    case 1:
      return b.subarray(0, g.int(Math.max(1, b.length)));
    case 2:
      return Buffer.concat([b, g.bytes(1 + g.int(8))]);
    case 3:
      return g.bytes(g.int(40));
    default: {
      if (b.length === 0) return g.bytes(1 + g.int(4));
      const at = g.int(b.length);
      g.bytes(Math.min(b.length - at, 1 + g.int(6))).copy(b, at);
      return b;
    }
  }
}

type Encoding = "gzip" | "br";
const compress = (encoding: Encoding, bytes: Uint8Array): Buffer => (encoding === "gzip" ? gzipSync(bytes) : brotliCompressSync(bytes));

type Method = "GetSubject" | "CreateUsageEventBatch" | "StreamUsageEvents" | "WatchEvents";
type Protocol = "connect" | "connect-get" | "grpc" | "grpc-web" | "grpc-web-text" | "rest";
const PATHS: Record<Method, string> = {
  GetSubject: "/billing.v1.SubjectService/GetSubject",
  CreateUsageEventBatch: "/billing.v1.UsageEventService/CreateUsageEventBatch",
  StreamUsageEvents: "/billing.v1.UsageEventService/StreamUsageEvents",
  WatchEvents: "/billing.v1.EventService/WatchEvents",
};
const STREAMING = new Set<Method>(["StreamUsageEvents", "WatchEvents"]);
/** The protocols each method is fuzzed over: Connect GET takes the one NO_SIDE_EFFECTS unary method, REST the one with a body. */
const PROTOCOLS: Record<Method, Protocol[]> = {
  GetSubject: ["connect", "connect-get", "grpc", "grpc-web", "grpc-web-text"],
  CreateUsageEventBatch: ["connect", "grpc", "grpc-web", "grpc-web-text", "rest"],
  StreamUsageEvents: ["connect", "grpc", "grpc-web", "grpc-web-text"],
  WatchEvents: ["connect", "grpc", "grpc-web", "grpc-web-text"],
};

/** The well-formed messages each case starts from (a stream sends one to three). */
function messages(subjectId: string, g: Gen, method: Method): Uint8Array[] {
  const event = (i: number) =>
    create(UsageEventInputSchema, {
      idempotencyKey: `fuzz-${g.int(1_000)}-${i}`,
      subjectId,
      eventName: "api",
      data: { n: String(g.int(100)) },
      timestamp: timestampFromDate(new Date(Date.UTC(2026, 2, 1, 10, g.int(60)))),
    });
  switch (method) {
    case "GetSubject":
      return [toBinary(GetSubjectRequestSchema, create(GetSubjectRequestSchema, { subjectId: g.chance(0.5) ? subjectId : "subj_missing" }))];
    case "CreateUsageEventBatch":
      return [toBinary(CreateUsageEventBatchRequestSchema, create(CreateUsageEventBatchRequestSchema, { events: [event(0), event(1)] }))];
    case "StreamUsageEvents":
      return Array.from({ length: 1 + g.int(3) }, (_, i) => toBinary(UsageEventInputSchema, event(i)));
    case "WatchEvents":
      // An `after` that is no event: a call that decodes whole is answered not_found at once.
      return [toBinary(WatchEventsRequestSchema, create(WatchEventsRequestSchema, { after: "evt_00000000000000000000000000", types: ["invoice.finalized"] }))];
  }
}

/** Characters that break base64 or a query string, and ones that pass. */
const NOISE = ["*", "!", "=", "==", "-", "_", "+", "/", "%", "%FF", "%00", "%2B", "~", ".", "A", "AAAA", "\n", " "];

/** `text` with noise put in, cut, or replaced by random characters. */
function garble(g: Gen, text: string): string {
  switch (g.int(3)) {
    case 0: {
      const at = g.int(text.length + 1);
      return text.slice(0, at) + g.pick(NOISE) + text.slice(at);
    }
    case 1:
      return text.slice(0, g.int(text.length + 1));
    default:
      return Array.from({ length: g.int(24) }, () => g.pick(NOISE)).join("");
  }
}

/** One generated request: how to send it, and what it was (for the failure report). */
interface Case {
  n: number;
  protocol: Protocol;
  method: Method;
  keyless: boolean;
  what: string;
  send: (session: http2.ClientHttp2Session) => Promise<Answer>;
}

/**
 * The enveloped body of a case: each message maybe spoiled before compression, maybe compressed
 * (flag 0x01) and spoiled after, with flags and length sometimes random; the whole body maybe
 * cut or padded. `encoding`: what the request names (undefined: nothing; identity: identity).
 */
function envelopedBody(g: Gen, msgs: Uint8Array[], encoding: Encoding | "identity" | undefined, notes: string[]): Buffer {
  const parts = msgs.map((m) => {
    let data: Uint8Array = m;
    if (g.chance(0.3)) {
      data = corrupt(g, data);
      notes.push("message spoiled");
    }
    let flags = 0;
    const compressWith = encoding === "gzip" || encoding === "br" ? encoding : g.chance(0.15) ? g.pick(["gzip", "br"] as const) : undefined;
    if (compressWith && g.chance(0.85)) {
      data = compress(compressWith, data);
      flags = 1;
      if (g.chance(0.6)) {
        data = corrupt(g, data);
        notes.push(`${compressWith} spoiled`);
      }
    }
    if (g.chance(0.2)) {
      flags = g.chance(0.5) ? g.int(256) : g.pick([0, 1, 2, 3, 0x80, 0x81]);
      notes.push(`flags 0x${flags.toString(16)}`);
    }
    let length = data.byteLength;
    if (g.chance(0.1)) {
      length = g.chance(0.3) ? g.int(2 ** 32) : Math.max(0, length + g.int(11) - 5);
      notes.push(`length ${length}`);
    }
    return envelope(flags, data, length);
  });
  let body = Buffer.concat(parts);
  if (g.chance(0.08)) {
    body = body.subarray(0, g.int(body.length + 1));
    notes.push("body cut");
  }
  if (g.chance(0.05)) {
    body = Buffer.concat([body, g.bytes(1 + g.int(8))]);
    notes.push("body padded");
  }
  return body;
}

function generate(g: Gen, n: number, url: string, key: string, subjectId: string): Case {
  const method = g.pick(Object.keys(PATHS) as Method[]);
  const protocol = g.pick(PROTOCOLS[method]);
  const keyless = g.chance(0.1);
  const auth: Record<string, string> = keyless ? {} : { "x-api-key": key };
  const path = PATHS[method];
  const msgs = messages(subjectId, g, method);
  const notes: string[] = [];
  const encoding = g.pick([undefined, "gzip", "br", "identity", "gzip", "br"] as const);
  const encodingHeader = (name: string): Record<string, string> => (encoding ? { [name]: encoding } : {});
  // A WatchEvents call that decodes is open until its deadline.
  const watch = method === "WatchEvents";
  let send: Case["send"];
  switch (protocol) {
    case "grpc": {
      const body = envelopedBody(g, msgs, encoding, notes);
      send = (session) => grpcCall(session, path, { ...encodingHeader("grpc-encoding"), ...auth }, body, watch ? WATCH_DEADLINE_MS : 10_000);
      break;
    }
    case "grpc-web":
    case "grpc-web-text": {
      const body = envelopedBody(g, msgs, encoding, notes);
      const headers = { ...encodingHeader("grpc-encoding"), ...(watch ? { "grpc-timeout": `${WATCH_DEADLINE_MS}m` } : {}), ...auth };
      if (protocol === "grpc-web") {
        send = () => grpcWebCall(url, path, headers, body);
        break;
      }
      let text = body.toString("base64");
      if (g.chance(0.4)) {
        text = garble(g, text);
        notes.push(`base64 ${JSON.stringify(text.slice(0, 40))}`);
      }
      send = () => grpcWebCall(url, path, headers, text, true);
      break;
    }
    case "connect": {
      if (STREAMING.has(method)) {
        const body = envelopedBody(g, msgs, encoding, notes);
        const headers = { "content-type": "application/connect+proto", ...encodingHeader("connect-content-encoding"), ...(watch ? { "connect-timeout-ms": String(WATCH_DEADLINE_MS) } : {}), ...auth };
        send = () => connectPost(url, path, headers, body);
        break;
      }
      let body: Uint8Array = msgs[0] as Uint8Array;
      if (g.chance(0.3)) {
        body = corrupt(g, body);
        notes.push("message spoiled");
      }
      if (encoding === "gzip" || encoding === "br") {
        body = compress(encoding, body);
        if (g.chance(0.6)) {
          body = corrupt(g, body);
          notes.push(`${encoding} spoiled`);
        }
      }
      const headers = { "content-type": "application/proto", ...encodingHeader("content-encoding"), ...auth };
      send = () => connectPost(url, path, headers, body);
      break;
    }
    case "connect-get": {
      const json = g.chance(0.15);
      let bytes: Uint8Array = json ? Buffer.from(JSON.stringify({ subject_id: subjectId })) : (msgs[0] as Uint8Array);
      if (g.chance(0.3)) {
        bytes = corrupt(g, bytes);
        notes.push("message spoiled");
      }
      const params = [`encoding=${json ? "json" : "proto"}`];
      if (encoding === "gzip" || encoding === "br") {
        bytes = compress(encoding, bytes);
        params.push(`compression=${encoding}`);
        if (g.chance(0.6)) {
          bytes = corrupt(g, bytes);
          notes.push(`${encoding} spoiled`);
        }
      }
      let message: string;
      if (json && !encoding && g.chance(0.5)) {
        message = encodeURIComponent(Buffer.from(bytes).toString("latin1"));
      } else if (g.chance(0.15)) {
        // Not base64: the bytes percent-encoded as they are.
        message = Array.from(bytes, (b) => `%${b.toString(16).padStart(2, "0")}`).join("");
      } else {
        params.push("base64=1");
        message = Buffer.from(bytes).toString(g.chance(0.5) ? "base64url" : "base64");
        if (g.chance(0.35)) {
          message = garble(g, message);
          notes.push(`base64 ${JSON.stringify(message.slice(0, 40))}`);
        }
        message = message.replace(/[+/= \n]/g, (c) => encodeURIComponent(c));
      }
      params.push(`message=${message}`);
      const query = params.join("&");
      notes.push(query.slice(0, 80));
      send = () => connectGet(url, path, query, auth);
      break;
    }
    case "rest": {
      const events = [0, 1].map((i) => ({ idempotency_key: `fuzz-rest-${g.int(1_000)}-${i}`, subject_id: subjectId, event_name: "api", data: { n: "1" } }));
      let body: Uint8Array = Buffer.from(JSON.stringify({ events }));
      if (g.chance(0.4)) {
        body = corrupt(g, body);
        notes.push("JSON spoiled");
      }
      const headers: Record<string, string> = { "content-type": "application/json", ...auth };
      if (encoding === "gzip" || encoding === "br") {
        body = compress(encoding, body);
        headers["content-encoding"] = encoding;
        if (g.chance(0.6)) {
          body = corrupt(g, body);
          notes.push(`${encoding} spoiled`);
        }
      }
      send = () => restCall(url, "POST", "/usage-events/batch", headers, body);
      break;
    }
  }
  return { n, protocol, method, keyless, what: `${encoding ?? "no encoding"}${notes.length ? `; ${notes.join("; ")}` : ""}`, send };
}

/** Codes no bad input may get: the server's fault, or no answer at all. */
const FORBIDDEN = new Set(["internal", "unknown", "data_loss", "no grpc-status", "no end-stream message"]);

for (const store of STORES) {
  test(`${store}: ${CASES} generated bad requests over every protocol answer no 5xx, internal or unknown; unauthenticated without a key`, async (t) => {
    const server = serverOf(store);
    const key = await server.freshKey();
    const subject = await ok(server, key, "POST", "/subjects", { name: "Fuzzed" });
    const seed = SEED + STORES.indexOf(store);
    const g = new Gen(seed);
    const cases = Array.from({ length: CASES }, (_, n) => generate(g, n, server.url, key, subject.id));
    const counts = new Map<string, number>();
    const failures: string[] = [];
    let run = 0;
    let next = 0;
    const worker = async () => {
      const session = http2.connect(server.url);
      session.on("error", () => {});
      try {
        while (next < cases.length) {
          const c = cases[next++] as Case;
          let answer: Answer;
          try {
            answer = await c.send(session);
          } catch (err) {
            answer = { http: 0, code: `no answer: ${(err as Error).message}`, reason: undefined, message: "" };
          }
          run++;
          const label = `${c.protocol} ${c.keyless ? "(no key) " : ""}${answer.code}`;
          counts.set(label, (counts.get(label) ?? 0) + 1);
          const bad = c.keyless ? answer.code !== "unauthenticated" : answer.http >= 500 || answer.http === 0 || FORBIDDEN.has(answer.code) || answer.code.startsWith("no answer");
          if (bad) failures.push(`case ${c.n} (seed ${seed}) ${c.protocol} ${c.method} ${c.keyless ? "without a key " : ""}[${c.what}]: ${JSON.stringify(answer)}`);
        }
      } finally {
        session.close();
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, worker));
    t.log(
      [...counts]
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k}: ${v}`)
        .join(", "),
    );
    t.true(run >= 2_000, `${run} cases run`);
    t.is(run, CASES);
    t.deepEqual(failures.slice(0, 15), [], `${failures.length} of ${run} cases answered with the server's fault`);
    // The bad bytes were not all refused at one gate: the reasons of what they got wrong are many.
    t.true((counts.get("grpc invalid_argument") ?? 0) > 50, "gRPC refused many as invalid_argument");
    // A well-formed request still gets its answer after them all.
    t.is((await ok(server, key, "GET", `/subjects/${subject.id}`)).id, subject.id);
  });
}
