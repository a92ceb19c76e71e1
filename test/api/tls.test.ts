/**
 * The port over TLS (TLS_CERT_FILE, TLS_KEY_FILE) with a self-signed certificate made here with
 * openssl, through clients nobody here wrote: grpc-js (HTTP/2 by ALPN, the lean unary and
 * client-streaming paths), `buf curl` (gRPC, gRPC-Web and Connect over https), and curl (REST over
 * HTTP/1.1 and over HTTP/2, the pages). Cleartext is not served on a TLS port; the connection
 * limits (handshake deadline, header timeout, connection cap) hold over TLS; a certificate
 * replaced on disk serves the next connection, and a bad replacement is logged and the old one
 * kept. HOST binds one address: 127.0.0.1 alone is not reachable on another local address.
 */
import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import https from "node:https";
import net from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import path from "node:path";
import tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import test from "ava";
import { type App, startApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { createLogger } from "../../src/log.js";
import { type TestDatabase, createTestDatabase } from "../helpers/db.js";
import { grpcPackage } from "../helpers/grpc-package.js";
import { type TestKeys, seedKeys } from "../helpers/server.js";

const BUF = "node_modules/.bin/buf";
const billing = grpcPackage(["billing/v1/subject_service.proto", "billing/v1/usage_event_service.proto", "grpc/health/v1/health.proto"], {
  defaults: true,
  oneofs: true,
  enums: String,
}).billing.v1;

interface Run {
  code: number;
  out: string;
  err: string;
}

function run(cmd: string, args: string[], input?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      resolve({ code, out: stdout, err: stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** A self-signed P-256 certificate for localhost and 127.0.0.1, written to `dir`/cert.pem and `dir`/key.pem. */
async function makeCertificate(dir: string, cn = "localhost"): Promise<{ cert: string; key: string; fingerprint: string }> {
  const cert = path.join(dir, "cert.pem");
  const key = path.join(dir, "key.pem");
  const r = await run("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-days",
    "1",
    "-subj",
    `/CN=${cn}`,
    "-addext",
    "subjectAltName=DNS:localhost,IP:127.0.0.1",
    "-keyout",
    key,
    "-out",
    cert,
  ]);
  if (r.code !== 0) throw new Error(`openssl req: ${r.err}`);
  return { cert, key, fingerprint: new X509Certificate(await readFile(cert)).fingerprint256 };
}

interface Started {
  app: App;
  keys: TestKeys;
  lines: Record<string, unknown>[];
  stop(): Promise<void>;
}

/** The real app on a fresh SQLite database with `env`, every log line kept (info and up). */
async function start(env: Record<string, string>): Promise<Started> {
  const db: TestDatabase = await createTestDatabase("sqlite");
  const seeded = await seedKeys(db.url);
  const lines: Record<string, unknown>[] = [];
  try {
    const app = await startApp(
      loadConfig({ DATABASE_URL: db.url, PORT: "0", LOG_LEVEL: "info", SCHEDULER_INTERVAL_MS: "0", ...env }),
      createLogger("info", (l) => lines.push(JSON.parse(l))),
    );
    return {
      app,
      keys: seeded.keys,
      lines,
      async stop() {
        await app.stop();
        await seeded.close();
        await db.drop();
      },
    };
  } catch (err) {
    await seeded.close();
    await db.drop();
    throw err;
  }
}

let dir = "";
let first: { cert: string; key: string; fingerprint: string };
let ca: Buffer;
let server: Started;
let port = 0;

test.before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "tls-"));
  first = await makeCertificate(dir);
  ca = await readFile(first.cert);
  server = await start({ TLS_CERT_FILE: first.cert, TLS_KEY_FILE: first.key });
  port = server.app.port;
});

test.after.always(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A request over https with the test's certificate as the only root: status, HTTP version, body. */
function httpsRequest(method: string, p: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; version: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: "127.0.0.1", port, method, path: p, headers, ca, servername: "localhost", agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, version: res.httpVersion, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The SHA-256 fingerprint of the certificate a new TLS connection to the port is served. */
function servedFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, servername: "localhost", rejectUnauthorized: false }, () => {
      const fp = socket.getPeerCertificate().fingerprint256;
      socket.destroy();
      resolve(fp);
    });
    socket.on("error", reject);
  });
}

/** grpc-js over TLS, the self-signed certificate as its root. */
function grpcClient<T>(Service: new (target: string, creds: grpc.ChannelCredentials) => T): T {
  return new Service(`127.0.0.1:${port}`, grpc.credentials.createSsl(ca));
}

function unary<T>(client: grpc.Client, method: string, request: object, md: grpc.Metadata): Promise<T> {
  return new Promise((resolve, reject) => {
    (client as unknown as Record<string, (r: object, m: grpc.Metadata, cb: (e: grpc.ServiceError | null, v: T) => void) => void>)[method](request, md, (err, value) =>
      err ? reject(err) : resolve(value),
    );
  });
}

// Serial: one child process (buf, curl, openssl) at a time, and the certificate is replaced late.
test.serial("the app's URL and the public base URL are https by default", async (t) => {
  t.is(server.app.url, `https://127.0.0.1:${port}`);
  const docs = await httpsRequest("GET", "/docs");
  t.is(docs.status, 200);
  t.true(docs.body.includes(`https://localhost:${port}`), "the docs page names the https base URL");
  t.like(
    server.lines.find((l) => l.msg === "listening"),
    { tls: true, port },
  );
  t.like(
    server.lines.find((l) => l.msg === "TLS certificate loaded"),
    { fingerprint256: first.fingerprint },
  );
});

test.serial("grpc-js over TLS: unary calls (lean path), a client stream, health, with the self-signed root", async (t) => {
  const md = new grpc.Metadata();
  md.set("x-api-key", server.keys.a);
  const subjects = grpcClient(billing.SubjectService) as grpc.Client;
  const usage = grpcClient(billing.UsageEventService) as grpc.Client & Record<string, (...a: unknown[]) => grpc.ClientWritableStream<object>>;
  const health = grpcClient(grpcPackage(["grpc/health/v1/health.proto"], { enums: String }).grpc.health.v1.Health) as grpc.Client;
  try {
    const created = await unary<{ subject: { id: string } }>(subjects, "CreateSubject", { name: "Over TLS", external_id: "tls-1" }, md);
    t.regex(created.subject.id, /^subj_/);
    const got = await unary<{ subject: { name: string } }>(subjects, "GetSubject", { subject_id: created.subject.id }, md);
    t.is(got.subject.name, "Over TLS");
    const bad = await unary(subjects, "CreateSubject", { email: "not an email" }, md).catch((e: grpc.ServiceError) => e);
    t.like(bad, { code: grpc.status.INVALID_ARGUMENT, details: "email: must be a valid email address" });
    const summary = await new Promise<{ accepted: number; received: number }>((resolve, reject) => {
      const call = usage.StreamUsageEvents(md, (err: grpc.ServiceError | null, value: { accepted: number; received: number }) => (err ? reject(err) : resolve(value)));
      for (let i = 0; i < 20; i++) call.write({ idempotency_key: `tls-e${i}`, subject_id: created.subject.id, event_name: "api", data: {}, timestamp: { seconds: "1772000000", nanos: 0 } });
      call.end();
    });
    t.like(summary, { received: 20, accepted: 20 });
    const check = await unary<{ status: string }>(health, "Check", { service: "" }, new grpc.Metadata());
    t.is(check.status, "SERVING");
  } finally {
    subjects.close();
    usage.close();
    health.close();
  }
});

test.serial("grpc-js refuses the server without the certificate as a root (it is verified, not skipped)", async (t) => {
  const subjects = new billing.SubjectService(`127.0.0.1:${port}`, grpc.credentials.createSsl()) as grpc.Client;
  try {
    const err = await unary(subjects, "GetSubject", { subject_id: "x" }, new grpc.Metadata()).catch((e: grpc.ServiceError) => e);
    t.is((err as grpc.ServiceError).code, grpc.status.UNAVAILABLE);
  } finally {
    subjects.close();
  }
});

for (const protocol of ["grpc", "grpcweb", "connect"]) {
  test.serial(`buf curl --protocol ${protocol} over https (--cacert): reflection, a call, an error`, async (t) => {
    const url = `https://127.0.0.1:${port}`;
    const list = await run(BUF, ["curl", "--cacert", first.cert, "--list-services", url]);
    t.is(list.code, 0, list.err);
    t.true(list.out.split("\n").includes("billing.v1.SubjectService"), list.out);
    const check = await run(BUF, ["curl", "--cacert", first.cert, "--protocol", protocol, `${url}/grpc.health.v1.Health/Check`, "-d", '{"service":""}']);
    t.is(check.code, 0, check.err);
    t.deepEqual(JSON.parse(check.out), { status: "SERVING" });
    const bad = await run(BUF, [
      "curl",
      "--cacert",
      first.cert,
      "--protocol",
      protocol,
      "-H",
      `x-api-key: ${server.keys.a}`,
      `${url}/billing.v1.SubjectService/CreateSubject`,
      "-d",
      '{"email":"nope"}',
    ]);
    t.not(bad.code, 0);
    t.like(JSON.parse(bad.err), { code: "invalid_argument", message: "email: must be a valid email address" });
  });
}

test.serial("buf curl without the certificate is refused; with --insecure it answers", async (t) => {
  const url = `https://127.0.0.1:${port}/grpc.health.v1.Health/Check`;
  const refused = await run(BUF, ["curl", "--list-services", `https://127.0.0.1:${port}`]);
  t.not(refused.code, 0, "the certificate is not trusted");
  const insecure = await run(BUF, ["curl", "--insecure", "--protocol", "grpc", url, "-d", "{}"]);
  t.is(insecure.code, 0, insecure.err);
  t.deepEqual(JSON.parse(insecure.out), { status: "SERVING" });
});

for (const [flag, version] of [
  ["--http1.1", "1.1"],
  ["--http2", "2"],
] as const) {
  test.serial(`curl ${flag} with --cacert: REST create and read, pages, health (HTTP ${version} by ALPN)`, async (t) => {
    const base = `https://127.0.0.1:${port}`;
    const common = ["-sS", flag, "--cacert", first.cert, "-H", `x-api-key: ${server.keys.a}`, "-w", "\n%{http_code} %{http_version}"];
    const split = (r: Run) => {
      const lines = r.out.split("\n");
      const [status, got] = (lines.pop() ?? "").split(" ");
      return { status: Number(status), version: got, body: lines.join("\n") };
    };
    const created = split(await run("curl", [...common, "-H", "content-type: application/json", "-d", `{"name":"curl ${version}","external_id":"curl-${version}"}`, `${base}/subjects`]));
    t.is(created.status, 200, created.body);
    t.is(created.version, version);
    const id = JSON.parse(created.body).id;
    const got = split(await run("curl", [...common, `${base}/subjects/${id}`]));
    t.like({ status: got.status, version: got.version, name: JSON.parse(got.body).name }, { status: 200, version, name: `curl ${version}` });
    const missing = split(await run("curl", [...common, `${base}/subjects/subj_nope`]));
    t.is(missing.status, 404);
    const docs = split(await run("curl", [...common, `${base}/docs`]));
    t.is(docs.status, 200);
    t.true(docs.body.includes("<html"), "the docs page");
    const ready = split(await run("curl", [...common, `${base}/healthz`]));
    t.is(ready.status, 200);
  });
}

test.serial("curl without the certificate fails verification; cleartext HTTP on the TLS port gets no answer", async (t) => {
  const r = await run("curl", ["-sS", `https://127.0.0.1:${port}/healthz`]);
  t.is(r.code, 60, `curl: certificate not verified (${r.err})`);
  const plain = await run("curl", ["-sS", "--max-time", "20", `http://127.0.0.1:${port}/healthz`]);
  t.not(plain.code, 0, "no cleartext answer");
  const h2c = await run("curl", ["-sS", "--max-time", "20", "--http2-prior-knowledge", `http://127.0.0.1:${port}/healthz`]);
  t.not(h2c.code, 0, "no h2c answer");
});

test.serial("a replaced certificate serves the next connection; a bad replacement is logged and the one in use kept", async (t) => {
  t.is(await servedFingerprint(), first.fingerprint);
  const next = await makeCertificate(await mkdtemp(path.join(dir, "next-")), "localhost-next");
  // Replaced as deployment tools do: written beside, then renamed over.
  await writeFile(`${first.key}.new`, await readFile(next.key));
  await writeFile(`${first.cert}.new`, await readFile(next.cert));
  await rename(`${first.key}.new`, first.key);
  await rename(`${first.cert}.new`, first.cert);
  let served = "";
  for (let i = 0; i < 100 && served !== next.fingerprint; i++) {
    await new Promise((r) => setTimeout(r, 200));
    served = await servedFingerprint();
  }
  t.is(served, next.fingerprint, "a new connection gets the new certificate");
  t.like(
    server.lines.find((l) => l.msg === "TLS certificate reloaded" && l.fingerprint256 === next.fingerprint),
    { level: "info" },
  );
  // The REST path still answers over the new certificate.
  ca = await readFile(first.cert);
  t.is((await httpsRequest("GET", "/healthz")).status, 200);

  // A key that is not PEM: logged at error, the certificate in use kept.
  const errorsBefore = server.lines.filter((l) => l.level === "error").length;
  await writeFile(first.key, "not a key\n");
  let logged: Record<string, unknown> | undefined;
  for (let i = 0; i < 100 && !logged; i++) {
    await new Promise((r) => setTimeout(r, 200));
    logged = server.lines.slice(errorsBefore).find((l) => l.msg === "TLS certificate not reloaded: the one in use is kept");
  }
  t.like(logged, { level: "error" });
  t.regex(String(logged?.problem), /TLS_KEY_FILE/);
  t.is(await servedFingerprint(), next.fingerprint, "the pair in use is kept");
  t.is((await httpsRequest("GET", "/healthz")).status, 200);
  await writeFile(first.key, await readFile(next.key));
});

test.serial("connection limits over TLS: a handshake not finished in time and headers not sent in time close the connection; the connection cap holds", async (t) => {
  const limited = await start({
    TLS_CERT_FILE: first.cert,
    TLS_KEY_FILE: first.key,
    HTTP_PREFACE_TIMEOUT_MS: "300",
    HTTP_HEADERS_TIMEOUT_MS: "300",
    HTTP_REQUEST_TIMEOUT_MS: "300",
    HTTP_MAX_CONNECTIONS: "2",
  });
  const p = limited.app.port;
  const closed = (socket: net.Socket) => new Promise<void>((r) => (socket.destroyed ? r() : socket.once("close", () => r())));
  try {
    // TCP only, no ClientHello: closed by the handshake deadline.
    const silent = net.connect(p, "127.0.0.1");
    silent.on("error", () => {});
    await closed(silent);
    t.pass("a connection that never starts its handshake is closed");
    // Secured, then half a request's headers: 408 and closed.
    const slow = tls.connect({ host: "127.0.0.1", port: p, ca, servername: "localhost", ALPNProtocols: ["http/1.1"] });
    slow.on("error", () => {});
    await new Promise<void>((r) => slow.once("secureConnect", () => r()));
    t.is(slow.alpnProtocol, "http/1.1");
    let answer = "";
    slow.on("data", (d) => (answer += d));
    slow.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    await closed(slow);
    t.regex(answer, /^HTTP\/1\.1 408/);
    // Two connections held open: a third is closed at accept, before any handshake.
    const held = [0, 1].map(() => tls.connect({ host: "127.0.0.1", port: p, ca, servername: "localhost" }));
    for (const s of held) s.on("error", () => {});
    await Promise.all(held.map((s) => new Promise<void>((r) => s.once("secureConnect", () => r()))));
    const third = tls.connect({ host: "127.0.0.1", port: p, ca, servername: "localhost" });
    let secured = false;
    third.on("secureConnect", () => (secured = true));
    third.on("error", () => {});
    await closed(third);
    t.false(secured, "the third connection is closed before its handshake");
    for (const s of held) s.destroy();
  } finally {
    await limited.stop();
  }
});

test("a certificate and key that are not a pair stop the start, naming both settings", async (t) => {
  const other = await makeCertificate(await mkdtemp(path.join(dir, "other-")));
  const err = await start({ TLS_CERT_FILE: first.cert, TLS_KEY_FILE: other.key }).then(
    (s) => s.stop().then(() => undefined),
    (e: Error) => e,
  );
  t.regex(String(err?.message), /TLS_CERT_FILE .* and TLS_KEY_FILE .* are not a PEM certificate and its private key/);
  const missing = await start({ TLS_CERT_FILE: path.join(dir, "nope.pem"), TLS_KEY_FILE: first.key }).then(
    (s) => s.stop().then(() => undefined),
    (e: Error) => e,
  );
  t.regex(String(missing?.message), /TLS_CERT_FILE .*nope\.pem cannot be read \(ENOENT\)/);
});

/** Local addresses other than 127.0.0.1 (127.0.0.2 is loopback on Linux too), IPv4. */
function otherAddresses(): string[] {
  const external = Object.values(networkInterfaces())
    .flat()
    .filter((a) => a && a.family === "IPv4" && a.address !== "127.0.0.1")
    .map((a) => a?.address as string);
  return [...new Set(["127.0.0.2", ...external])];
}

/** Whether a TCP connection to `host`:`p` is accepted. */
function reachable(host: string, p: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(p, host);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

test.serial("HOST=127.0.0.1 is reachable there and on no other local address; unset, every interface is", async (t) => {
  const bound = await start({ HOST: "127.0.0.1" });
  const open = await start({});
  try {
    t.is(bound.app.url, `http://127.0.0.1:${bound.app.port}`);
    t.true(await reachable("127.0.0.1", bound.app.port));
    const others = otherAddresses();
    for (const a of others) t.false(await reachable(a, bound.app.port), `HOST=127.0.0.1 not reachable on ${a}`);
    // The default (today's behaviour): every interface.
    for (const a of others) t.true(await reachable(a, open.app.port), `no HOST: reachable on ${a}`);
  } finally {
    await bound.stop();
    await open.stop();
  }
});
