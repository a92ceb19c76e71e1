/**
 * Subject API benchmark: throughput and latency of the real server, REST and gRPC, against a
 * fresh MariaDB database.
 *
 * What it measures, each case closed-loop (N workers, each sends its next request as soon as the
 * previous one answered) for BENCH_SECONDS after a warm-up, at concurrency 1 and 32:
 *   - REST `POST /subjects`      and gRPC SubjectService.CreateSubject (one INSERT + key lookup)
 *   - REST `GET /subjects/{id}`  and gRPC SubjectService.GetSubject    (one SELECT + key lookup),
 *     round-robin over subjects created before the run
 *   - REST `GET /ping`           and gRPC HealthService.Ping           (no-op: no key, no database;
 *     the transport's own cost, the ceiling for every other call)
 * Reported per case: successful requests/s, p50 and p99 latency (ms), errors; then the ratios
 * GetSubject / no-op per protocol and concurrency. Every response is checked (status 200 and the
 * expected body); any error makes the run exit with status 1.
 *
 * Clients: REST uses node:http with a keep-alive Agent (maxSockets = concurrency, so one
 * connection per worker); gRPC uses @connectrpc/connect-node's gRPC transport (all workers
 * multiplex over one HTTP/2 connection, as a gRPC client does).
 *
 * The server runs in a child process (`node --import tsx src/main.ts`) so that it does not share
 * an event loop with the load generator; client and server still share the machine's CPUs.
 *
 * Run:   npm run bench                      (needs MariaDB/MySQL at 127.0.0.1:3306, user root)
 * Env:   BENCH_SECONDS=5                    measured seconds per case (after the warm-up)
 *        BENCH_WARMUP_SECONDS=1             warm-up seconds per case (not measured)
 *        BENCH_CONCURRENCY=1,32             concurrency levels
 *        BENCH_SEED_SUBJECTS=1000           subjects created beforehand for GetSubject
 *        BENCH_API_KEY_CACHE_MS=<ms>        the server's API_KEY_CACHE_MS (default: the config's default)
 *        BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306   server to create the throw-away database on
 *        BENCH_SERVER_LOG_LEVEL=warn        the server's LOG_LEVEL (its log goes to stderr, prefixed [server])
 *        BENCH_IN_PROCESS=1                 run the server in this process instead (shares the event loop)
 * Output: progress on stderr; the report (Markdown) on stdout.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import { createClient } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { loadConfig } from "../src/config.js";
import { HealthService } from "../src/gen/billing/v1/health_service_pb.js";
import { SubjectService } from "../src/gen/billing/v1/subject_service_pb.js";
import {
  REQUEST_TIMEOUT_MS,
  type LoopResult,
  type RestResponse,
  type Server,
  closedLoop,
  collectProblem,
  cpuCount,
  createThrowawayDatabase,
  envIntegers,
  envNumber,
  expectStatus200,
  fmt,
  freePort,
  machineLine,
  markdownTable,
  progress,
  restRequest,
  serverEnvironment,
  startChildServer,
  runBenchmark,
  serverReportLines,
} from "./lib.js";

// ---------------------------------------------------------------------------------------------
// Settings

const API_KEY = "sk_test_bench000000000000000000";

const settings = {
  seconds: envNumber("BENCH_SECONDS", 5, 0.1),
  warmupSeconds: envNumber("BENCH_WARMUP_SECONDS", 1, 0),
  concurrencies: envIntegers("BENCH_CONCURRENCY", "1,32"),
  seedSubjects: Math.floor(envNumber("BENCH_SEED_SUBJECTS", 1000, 1)),
  apiKeyCacheMs: process.env.BENCH_API_KEY_CACHE_MS || undefined,
  mysqlUrl: process.env.BENCH_MYSQL_URL || "mysql://root@127.0.0.1:3306",
  serverLogLevel: process.env.BENCH_SERVER_LOG_LEVEL || "warn",
  inProcess: process.env.BENCH_IN_PROCESS === "1",
};

// ---------------------------------------------------------------------------------------------
// Measurement

/** One request; resolves when the answer was as expected, throws (with a short reason) if not. */
type Call = () => Promise<void>;

interface CaseResult extends LoopResult {
  name: string;
  protocol: "REST" | "gRPC";
  kind: "ping" | "get" | "create";
}

/**
 * Closed loop: `concurrency` workers, each calling `call` back to back until the end. Requests
 * that start after the warm-up and finish before the end are measured; throughput is the number
 * of those that succeeded over the measured window.
 */
function measure(concurrency: number, call: Call, gone: () => boolean): Promise<LoopResult> {
  return closedLoop({ concurrency, call, gone, warmupSeconds: settings.warmupSeconds, seconds: settings.seconds, window: "contained" });
}

// ---------------------------------------------------------------------------------------------
// Clients

/** Throws unless the status is 200 and the body contains `needle`. */
function expect200(res: RestResponse, needle: string): void {
  expectStatus200(res);
  if (!res.body.includes(needle)) throw new Error(`HTTP 200 but the body lacks ${needle}: ${res.body.slice(0, 200)}`);
}

let createSeq = 0;
const runTag = randomBytes(4).toString("hex");
/** A unique new subject (unique external_id across the whole run). */
function nextSubject() {
  const n = ++createSeq;
  return { name: `Bench ${n}`, email: `b${n}@example.com`, externalId: `bench-${runTag}-${n}` };
}
const restSubjectBody = (s: ReturnType<typeof nextSubject>) => JSON.stringify({ name: s.name, email: s.email, external_id: s.externalId });

// ---------------------------------------------------------------------------------------------
// Server (child process or in-process) and database

async function startInProcessServer(env: Record<string, string>): Promise<Server> {
  const [{ startApp }, { createLogger }] = await Promise.all([import("../src/app.js"), import("../src/log.js")]);
  const config = loadConfig(env);
  const problems: string[] = [];
  const log = createLogger(config.logLevel, (line) => {
    process.stderr.write(`[server] ${line}`);
    collectProblem(line, problems);
  });
  const app = await startApp(config, log);
  return {
    port: app.port,
    problems,
    exited: () => undefined,
    async stop() {
      await app.stop();
      return "stopped (in-process)";
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const db = await createThrowawayDatabase(settings.mysqlUrl, "bench");
  const dbVersion = db.version;

  let server: Server | undefined;
  const cleanup = async () => {
    if (server) {
      await server.stop();
      server = undefined;
    }
    await db.drop();
  };
  let interrupted = false;
  process.once("SIGINT", () => {
    interrupted = true;
    progress("interrupted: stopping the server and dropping the database");
    cleanup().finally(() => process.exit(130));
  });

  try {
    progress(`created database ${db.name} on ${dbVersion}`);

    // The server's environment: ours without any of the config variables, then exactly these.
    const port = settings.inProcess ? 0 : await freePort();
    const serverEnv = serverEnvironment(process.env, {
      DATABASE_URL: db.url,
      PORT: String(port),
      BILLING_BOOTSTRAP_API_KEY: API_KEY,
      LOG_LEVEL: settings.serverLogLevel,
    });
    if (settings.apiKeyCacheMs !== undefined) serverEnv.API_KEY_CACHE_MS = settings.apiKeyCacheMs;
    const config = loadConfig(serverEnv); // the same checks the server makes; tells us the effective values
    const cacheNote =
      settings.apiKeyCacheMs === undefined
        ? `${config.apiKeyCacheMs} (the default${config.apiKeyCacheMs === 0 ? ": every authenticated call looks the key up in the database" : ""})`
        : `${config.apiKeyCacheMs} (from BENCH_API_KEY_CACHE_MS)`;

    progress(`starting the server ${settings.inProcess ? "in-process" : "in a child process"} (API_KEY_CACHE_MS=${config.apiKeyCacheMs})`);
    server = settings.inProcess ? await startInProcessServer(serverEnv) : await startChildServer(serverEnv);
    const serverPort = server.port;
    const baseUrl = `http://127.0.0.1:${serverPort}`;
    progress(`server ready at ${baseUrl}`);

    // Subjects for GetSubject, created through the API itself.
    const seedAgent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const ids: string[] = [];
    const seedWorker = async () => {
      while (createSeq < settings.seedSubjects) {
        const res = await restRequest(seedAgent, serverPort, "POST", "/subjects", restSubjectBody(nextSubject()), API_KEY);
        expect200(res, '"id":"subj_');
        ids.push((JSON.parse(res.body) as { id: string }).id);
      }
    };
    await Promise.all(Array.from({ length: 8 }, seedWorker));
    seedAgent.destroy();
    progress(`created ${ids.length} subjects for GetSubject`);

    let died: string | undefined;
    const running = server;
    const serverGone = () => running.exited() !== undefined;
    const grpcHeaders = { "x-api-key": API_KEY };
    const results: CaseResult[] = [];
    for (const concurrency of settings.concurrencies) {
      if (serverGone()) break;
      const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
      const sessionManager = new Http2SessionManager(baseUrl);
      const transport = createGrpcTransport({ baseUrl, sessionManager, defaultTimeoutMs: REQUEST_TIMEOUT_MS });
      const health = createClient(HealthService, transport);
      const subjects = createClient(SubjectService, transport);
      let next = 0;
      const nextId = () => ids[next++ % ids.length] as string;

      const cases: { name: string; protocol: CaseResult["protocol"]; kind: CaseResult["kind"]; call: Call }[] = [
        {
          name: "REST `GET /ping` (no-op)",
          protocol: "REST",
          kind: "ping",
          call: async () => expect200(await restRequest(agent, serverPort, "GET", "/ping"), '"ok":true'),
        },
        {
          name: "REST `GET /subjects/{id}`",
          protocol: "REST",
          kind: "get",
          call: async () => {
            const id = nextId();
            expect200(await restRequest(agent, serverPort, "GET", `/subjects/${id}`, undefined, API_KEY), `"id":"${id}"`);
          },
        },
        {
          name: "REST `POST /subjects`",
          protocol: "REST",
          kind: "create",
          call: async () => {
            const s = nextSubject();
            expect200(await restRequest(agent, serverPort, "POST", "/subjects", restSubjectBody(s), API_KEY), `"external_id":"${s.externalId}"`);
          },
        },
        {
          name: "gRPC `HealthService.Ping` (no-op)",
          protocol: "gRPC",
          kind: "ping",
          call: async () => {
            const res = await health.ping({});
            if (res.ok !== true) throw new Error("Ping answered ok=false");
          },
        },
        {
          name: "gRPC `SubjectService.GetSubject`",
          protocol: "gRPC",
          kind: "get",
          call: async () => {
            const id = nextId();
            const res = await subjects.getSubject({ subjectId: id }, { headers: grpcHeaders });
            if (res.subject?.id !== id) throw new Error(`GetSubject answered subject ${res.subject?.id}, not ${id}`);
          },
        },
        {
          name: "gRPC `SubjectService.CreateSubject`",
          protocol: "gRPC",
          kind: "create",
          call: async () => {
            const s = nextSubject();
            const res = await subjects.createSubject(s, { headers: grpcHeaders });
            if (res.subject?.externalId !== s.externalId || !res.subject.id.startsWith("subj_")) {
              throw new Error(`CreateSubject answered ${JSON.stringify(res.subject)}`);
            }
          },
        },
      ];

      for (const c of cases) {
        if (interrupted) return 130;
        if (serverGone()) break;
        progress(`${c.name}, concurrency ${concurrency}: ${settings.warmupSeconds} s warm-up + ${settings.seconds} s`);
        const r = { name: c.name, protocol: c.protocol, kind: c.kind, ...(await measure(concurrency, c.call, serverGone)) };
        results.push(r);
        progress(`  ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, ${r.errors} errors`);
        const why = running.exited();
        if (why) {
          died = `${why} during ${c.name} at concurrency ${concurrency}; the run was cut short there`;
          progress(died);
        }
      }
      agent.destroy();
      sessionManager.abort();
    }

    // Stop the server now, so that its last log lines are in before the report.
    const problems = server.problems;
    const stopped = await server.stop();
    const stopNote = died ?? stopped;
    server = undefined;
    report(results, { dbVersion, cacheNote, stopNote, problems });
    return died !== undefined || results.some((r) => r.errors > 0) ? 1 : 0;
  } finally {
    if (!interrupted) await cleanup();
  }
}

// ---------------------------------------------------------------------------------------------
// Report (stdout, Markdown)

function report(results: CaseResult[], info: { dbVersion: string; cacheNote: string; stopNote: string; problems: string[] }): void {
  const cpus = cpuCount();
  const out: string[] = [];
  out.push("## Subject API benchmark", "");
  out.push(machineLine(info.dbVersion));
  out.push(
    `The load generator and the server (${settings.inProcess ? "in the same process and event loop" : "a child process"}) share these ${cpus} CPUs, ` +
      "so the numbers are a lower bound for a dedicated server.",
  );
  out.push(
    `Closed loop, ${settings.warmupSeconds} s warm-up + ${settings.seconds} s measured per case; ` +
      `GetSubject round-robin over ${settings.seedSubjects} subjects; REST over HTTP/1.1 keep-alive (one connection per worker), ` +
      "gRPC over one HTTP/2 connection.",
  );
  out.push(`Server config: API_KEY_CACHE_MS=${info.cacheNote}; LOG_LEVEL=${settings.serverLogLevel}.`, "");

  out.push(
    ...markdownTable(
      ["Case", "Concurrency", "Requests/s", "p50 ms", "p99 ms", "Errors"],
      results.map((r) => [r.name, String(r.concurrency), fmt(r.rps, 0), fmt(r.p50, 2), fmt(r.p99, 2), String(r.errors)]),
    ),
    "",
  );

  const ratioRows = (["REST", "gRPC"] as const).map((protocol) => {
    const cells = settings.concurrencies.map((c) => {
      const get = results.find((r) => r.protocol === protocol && r.kind === "get" && r.concurrency === c);
      const ping = results.find((r) => r.protocol === protocol && r.kind === "ping" && r.concurrency === c);
      return get && ping && ping.rps > 0 ? `${(get.rps / ping.rps).toFixed(2)}` : "–";
    });
    return [`${protocol} GetSubject / ${protocol} no-op`, ...cells];
  });
  out.push(...markdownTable(["Ratio (throughput)", ...settings.concurrencies.map((c) => `Concurrency ${c}`)], ratioRows), "");

  const failed = results.filter((r) => r.errors > 0);
  if (failed.length > 0) {
    out.push("**Errors** (warm-up included):", "");
    for (const r of failed) {
      for (const [reason, n] of r.errorReasons) out.push(`- ${r.name}, concurrency ${r.concurrency}: ${n} × ${reason}`);
    }
    out.push("");
  }
  out.push(...serverReportLines(info.stopNote, info.problems));
  process.stdout.write(`${out.join("\n")}\n`);
}

await runBenchmark(main);
