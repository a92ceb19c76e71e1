/**
 * What the hand-written protobuf codecs saved against protobuf-es, the codec alone, in process:
 *   - fast-binary.ts's GetSubject answer writer against `toBinary(GetSubjectResponseSchema, …)`
 *     (the lean unary path's encode of its most frequent answer);
 *   - usage-event-wire.ts's reader against `fromBinary(UsageEventInputSchema, …)` (the lean ingest
 *     stream's decode of each event);
 *   - usage-event-wire.ts's plain-message check against `fromBinary` (the request check of the
 *     connect-node path, which decoded every streamed event once only to see that it decodes).
 * Both files are read from git at CODEC_COMMIT (their last version before protobuf-es replaced
 * them), written to a temporary directory with their imports pointed at this checkout's src/gen,
 * and imported from there; each pair is checked to give the same bytes or the same message first.
 *
 * Each operation runs BENCH_CODEC_ITERATIONS times per sample, samples alternating between the
 * hand-written codec and protobuf-es, BENCH_CODEC_SAMPLES samples each; the figure is the median
 * sample's CPU ns per operation (process.cpuUsage: this process's user + system time, its
 * garbage collector's threads included), so a busy machine makes the figures noisier but not
 * larger (the load average is reported).
 *
 * Run: npx tsx bench/codecs.ts   (no database; needs the git history, as in any full clone)
 * Env: BENCH_CODEC_ITERATIONS=20000 BENCH_CODEC_SAMPLES=15
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { type DescMessage, type Message, create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { SubjectSchema } from "../src/gen/billing/v1/subject_pb.js";
import { GetSubjectResponseSchema } from "../src/gen/billing/v1/subject_service_pb.js";
import { type UsageEventInput, UsageEventInputSchema } from "../src/gen/billing/v1/usage_event_pb.js";
import { REPO_ROOT, envNumber, fmt, markdownTable, progress, runBenchmark } from "./lib.js";

/** The last commit with src/rpc/fast-binary.ts and src/rpc/usage-event-wire.ts as the server used them. */
const CODEC_COMMIT = "73fef8909b819c177e18fea9eb3902c4c97f7570";

const settings = {
  iterations: Math.floor(envNumber("BENCH_CODEC_ITERATIONS", 20_000, 1)),
  samples: Math.floor(envNumber("BENCH_CODEC_SAMPLES", 15, 1)),
};

interface FastBinary {
  fastBinaryWriters: Map<DescMessage, (message: Message) => Uint8Array | undefined>;
}
interface UsageEventWire {
  plainUsageEventInput(b: Uint8Array): boolean;
  readPlainUsageEventInput(b: Uint8Array): UsageEventInput | undefined;
}

/** The two modules at CODEC_COMMIT, importable from a temporary directory. */
async function loadCodecs(): Promise<{ fast: FastBinary; wire: UsageEventWire }> {
  const dir = mkdtempSync(join(os.tmpdir(), "bench-codecs-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const gen = pathToFileURL(join(REPO_ROOT, "src", "gen")).href;
  const load = async (path: string) => {
    let text: string;
    try {
      text = execFileSync("git", ["show", `${CODEC_COMMIT}:${path}`], { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch {
      throw new Error(`git show ${CODEC_COMMIT}:${path} failed: this benchmark needs the repository's history (a full clone, not --depth 1)`);
    }
    const file = join(dir, path.split("/").pop() as string);
    writeFileSync(file, text.replaceAll('"../gen/', `"${gen}/`));
    return import(pathToFileURL(file).href);
  };
  return { fast: (await load("src/rpc/fast-binary.ts")) as FastBinary, wire: (await load("src/rpc/usage-event-wire.ts")) as UsageEventWire };
}

/** Median CPU ns per operation (this process, user + system) over alternating samples of `a` and `b`. */
function race(a: () => unknown, b: () => unknown): [number, number] {
  const sample = (f: () => unknown) => {
    const t = process.cpuUsage();
    for (let i = 0; i < settings.iterations; i++) f();
    const d = process.cpuUsage(t);
    return ((d.user + d.system) * 1000) / settings.iterations;
  };
  // Warm-up: the JIT settles.
  for (let i = 0; i < 3; i++) {
    sample(a);
    sample(b);
  }
  const as: number[] = [];
  const bs: number[] = [];
  for (let i = 0; i < settings.samples; i++) {
    as.push(sample(a));
    bs.push(sample(b));
  }
  const median = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
  return [median(as), median(bs)];
}

async function main(): Promise<number> {
  const loadBefore = os.loadavg();
  const { fast, wire } = await loadCodecs();
  progress(`codecs from ${CODEC_COMMIT.slice(0, 7)}; ${settings.samples} samples of ${settings.iterations} operations each`);

  // A subject as GetSubject answers one: every field set, two metadata entries.
  const answer = create(GetSubjectResponseSchema, {
    subject: create(SubjectSchema, {
      id: "subj_GuiEotxnIK5HxPptOE8SgT",
      name: "Acme Corporation",
      externalId: "acme-4711",
      email: "billing@acme.example",
      metadata: { plan: "pro", region: "eu" },
      createdAt: timestampFromDate(new Date("2026-11-27T09:30:00.123Z")),
      hasPaymentMethod: true,
    }),
  });
  // By type name: the copy imports src/gen by another URL, so its schema objects are not ours.
  const writer = [...fast.fastBinaryWriters].find(([schema]) => schema.typeName === GetSubjectResponseSchema.typeName)?.[1];
  if (!writer) throw new Error("fast-binary has no GetSubject writer");
  const written = writer(answer);
  if (!written || !Buffer.from(written).equals(Buffer.from(toBinary(GetSubjectResponseSchema, answer)))) throw new Error("fast-binary and toBinary differ on the GetSubject answer");

  // An event as the ingest stream carries it (bench:grpc's form).
  const event = toBinary(
    UsageEventInputSchema,
    create(UsageEventInputSchema, {
      idempotencyKey: "3f9a1c2e-41877",
      subjectId: "subj_GuiEotxnIK5HxPptOE8SgT",
      eventName: "api_call",
      data: { n: "1", region: "eu" },
      timestamp: timestampFromDate(new Date("2026-11-27T09:12:34.567Z")),
    }),
  );
  const read = wire.readPlainUsageEventInput(event);
  if (!read || !equals(UsageEventInputSchema, read, fromBinary(UsageEventInputSchema, event))) throw new Error("usage-event-wire and fromBinary differ on the event");
  if (!wire.plainUsageEventInput(event)) throw new Error("usage-event-wire does not find the event plain");

  const rows: string[][] = [];
  const add = (what: string, hand: number, es: number, unit: string) => rows.push([what, fmt(hand, 0), fmt(es, 0), fmt(es - hand, 0), `${fmt(es / hand, 1)}×`, unit]);
  let [hand, es] = race(
    () => writer(answer),
    () => toBinary(GetSubjectResponseSchema, answer),
  );
  add("GetSubject answer: fast-binary writer vs toBinary", hand, es, "per call");
  [hand, es] = race(
    () => wire.readPlainUsageEventInput(event),
    () => fromBinary(UsageEventInputSchema, event),
  );
  add("UsageEventInput: usage-event-wire reader vs fromBinary", hand, es, "per event (lean stream)");
  [hand, es] = race(
    () => wire.plainUsageEventInput(event),
    () => fromBinary(UsageEventInputSchema, event),
  );
  add("UsageEventInput: plain check vs fromBinary", hand, es, "per event (connect-node's request check)");

  const lines = [
    "## Hand-written protobuf codecs against protobuf-es, the codec alone",
    "",
    `Node ${process.version}, ${os.cpus()[0]?.model.trim() ?? "unknown CPU"}; codecs as of ${CODEC_COMMIT.slice(0, 7)}; median of ${settings.samples} samples of ${settings.iterations} operations, alternating; load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} before, ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} after.`,
    `GetSubject answer ${written.byteLength} bytes; event ${event.byteLength} bytes.`,
    "",
    ...markdownTable(["operation", "hand-written CPU ns", "protobuf-es CPU ns", "saved CPU ns", "protobuf-es ÷ hand", ""], rows),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  return 0;
}

await runBenchmark(main);
