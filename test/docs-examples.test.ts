/**
 * Every shell example in README.md, CONTRIBUTING.md, ARCHITECTURE.md and docs/ runs, and shows
 * what it prints. The convention (docs/README.md, "How the examples are checked"):
 *
 * - A ```sh block runs. Every other fence is shown only: ```text, ```console, ```yaml, ```json,
 *   ```python, ```go, ```ts, ```proto (SHOWN below). Any other fence, or none, fails this test,
 *   so that an example cannot stop running by a typo in its fence.
 * - Inside a ```sh block, the `# ` lines right after a command line (no blank line between) are
 *   that command's expected output: everything the lines since the previous expected output
 *   print on stdout. `…` stands for any text (newlines included). When the output is one JSON
 *   document, both sides are compared without the whitespace between JSON tokens, so a long
 *   answer may be shown over several lines. A comment after a blank line is prose.
 * - Each step must exit 0.
 * - A line `[NAME=value …] npm start` is not run: the test starts the server itself (a fresh
 *   SQLite database, a free port, SCHEDULER_INTERVAL_MS=0), with those variables, before the
 *   page's first block. `localhost:8080` means that server, in the commands and in the outputs.
 * - `npm run [-s] billing -- …` runs the CLI from source (`node --import tsx src/cli/billing.ts`),
 *   the same program as the compiled one, so that each example does not build the project first;
 *   `npx buf …` runs buf's binary directly (the same program without npx's Node start).
 * - Each page runs its blocks in order in one bash shell (variables carry from block to block),
 *   against a fresh server of its own; the pages of docs/guides/walkthrough/ share one server
 *   and run in the order of their file names, each in its own shell and its own test.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import test, { type ExecutionContext } from "ava";
import { createTestDatabase } from "./helpers/db.js";
import { startAppOn } from "./helpers/server.js";

const run = promisify(execFile);
const ROOT = new URL("..", import.meta.url).pathname;
const RUN = "sh";
const SHOWN = new Set(["text", "console", "yaml", "json", "python", "go", "ts", "proto"]);
const START = /^((?:[A-Z][A-Z0-9_]*=\S+ )*)npm start\s*$/;
const WALKTHROUGH = "docs/guides/walkthrough/";
/** buf's own binary, which `npx buf` runs through a Node wrapper: called directly, a call costs no Node start. */
const BUF = [`${ROOT}node_modules/@bufbuild/buf-${process.platform}-${process.arch}/bin/buf`].find((p) => existsSync(p));

interface Block {
  file: string;
  line: number;
  lang: string;
  body: string[];
}

interface Step {
  block: Block;
  code: string[];
  expected?: string[];
}

function markdownFiles(): string[] {
  const docs: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const p = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".md")) docs.push(p);
    }
  };
  walk("docs");
  return ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md", ...docs.sort()].filter((f) => {
    try {
      readFileSync(join(ROOT, f));
      return true;
    } catch {
      return false;
    }
  });
}

function blocksOf(file: string): Block[] {
  const lines = readFileSync(join(ROOT, file), "utf8").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i] as string);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== "```"; i++) body.push(lines[i] as string);
    blocks.push({ file, line: start + 1, lang: (open[1] as string).trim(), body });
  }
  return blocks;
}

const isComment = (l: string) => /^#( |$)/.test(l);

/** A block's steps: code lines, each run closed by the `# ` lines right after its last line. */
function stepsOf(block: Block): Step[] {
  const steps: Step[] = [];
  let code: string[] = [];
  for (let i = 0; i < block.body.length; i++) {
    const l = block.body[i] as string;
    const prev = block.body[i - 1];
    if (isComment(l) && prev !== undefined && prev.trim() !== "" && !isComment(prev)) {
      const expected: string[] = [];
      for (; i < block.body.length && isComment(block.body[i] as string); i++) expected.push((block.body[i] as string).replace(/^# ?/, ""));
      i--;
      steps.push({ block, code, expected });
      code = [];
    } else code.push(l);
  }
  if (code.some((l) => l.trim() !== "" && !isComment(l))) steps.push({ block, code });
  return steps;
}

/** Drops the whitespace between JSON tokens (not inside strings). */
function compactJson(s: string): string {
  let out = "";
  let inString = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (inString) {
      out += c;
      if (c === "\\") out += s[++i] ?? "";
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (!/\s/.test(c)) out += c;
  }
  return out;
}

function asJson(s: string): string | undefined {
  try {
    return JSON.stringify(JSON.parse(s));
  } catch {
    return undefined;
  }
}

/** Whether `actual` is what `expected` shows, `…` standing for any text. */
function matches(expected: string, actual: string): boolean {
  const json = asJson(actual);
  const [e, a] = json !== undefined && /^\s*[[{]/.test(expected) ? [compactJson(expected), json] : [expected.trimEnd(), actual.trimEnd()];
  const pattern = e
    .split("…")
    .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[\\s\\S]*?");
  return new RegExp(`^${pattern}$`).test(a);
}

const MARK = "\u001e";

function scriptOf(steps: Step[], port: number, errDir: string): string {
  const lines = [
    "set -o pipefail",
    'npm() { if [ "$1" = run ] && { [ "$2" = billing ] || { [ "$2" = -s ] && [ "$3" = billing ]; }; }; then shift 2; [ "$1" = billing ] && shift; [ "$1" = -- ] && shift; node --import tsx src/cli/billing.ts "$@"; else command npm "$@"; fi; }',
    ...(BUF ? [`npx() { if [ "$1" = buf ]; then shift; "${BUF}" "$@"; else command npx "$@"; fi; }`] : []),
  ];
  steps.forEach((s, i) => {
    const code = s.code.filter((l) => !START.test(l)).map((l) => l.replaceAll("localhost:8080", `localhost:${port}`));
    lines.push(`printf '\\n${MARK}start ${i}\\n'`, "{", ...code, `} 2>"${errDir}/${i}"`, "__rc=$?", `printf '\\n${MARK}end ${i} %d\\n' "$__rc"`);
  });
  return lines.join("\n");
}

interface Outcome {
  out: string;
  rc: number;
}

function outcomes(stdout: string): Map<number, Outcome> {
  const found = new Map<number, Outcome>();
  const re = new RegExp(`\\n${MARK}start (\\d+)\\n([\\s\\S]*?)\\n${MARK}end \\1 (\\d+)\\n`, "g");
  for (const m of stdout.matchAll(re)) found.set(Number(m[1]), { out: m[2] as string, rc: Number(m[3]) });
  return found;
}

/** Runs one page's steps in one shell; returns what went wrong, one message per step. */
async function runPage(file: string, steps: Step[], port: number, env: Record<string, string>): Promise<string[]> {
  const errDir = mkdtempSync(join(tmpdir(), "docs-examples-"));
  try {
    const r = await run("bash", ["-c", scriptOf(steps, port, errDir)], {
      cwd: ROOT,
      env: { ...process.env, ...env, PATH: `${ROOT}node_modules/.bin:${process.env.PATH}` },
      maxBuffer: 64 * 1024 * 1024,
      timeout: 150_000,
    }).catch((e: { stdout?: string; stderr?: string }) => ({ stdout: e.stdout ?? "", stderr: e.stderr ?? "" }));
    const got = outcomes(`\n${r.stdout}`);
    const problems: string[] = [];
    steps.forEach((s, i) => {
      const where = `${file}:${s.block.line} (block starting \`${s.block.body.find((l) => l.trim() !== "") ?? ""}\`), step ${i + 1} (\`${s.code.find((l) => l.trim() !== "" && !isComment(l)) ?? ""}\`)`;
      const o = got.get(i);
      const stderr = (() => {
        try {
          return readFileSync(join(errDir, String(i)), "utf8").slice(-2000);
        } catch {
          return "";
        }
      })();
      if (!o) problems.push(`${where}: did not finish\n${r.stderr.slice(-2000)}`);
      else if (o.rc !== 0) problems.push(`${where}: exit ${o.rc}\nstdout: ${o.out.slice(-2000)}\nstderr: ${stderr}`);
      else if (s.expected) {
        const actual = o.out.replaceAll(`localhost:${port}`, "localhost:8080");
        const expected = s.expected.join("\n");
        if (!matches(expected, actual)) problems.push(`${where}: output differs\n--- expected\n${expected}\n--- actual\n${actual}\n--- stderr\n${stderr}`);
      }
    });
    return problems;
  } finally {
    rmSync(errDir, { recursive: true, force: true });
  }
}

function serverEnv(steps: Step[]): Record<string, string> {
  const env: Record<string, string> = { SCHEDULER_INTERVAL_MS: "0" };
  for (const s of steps)
    for (const l of s.code) {
      const m = START.exec(l);
      if (m) for (const a of (m[1] as string).trim().split(/\s+/).filter(Boolean)) env[a.slice(0, a.indexOf("="))] = a.slice(a.indexOf("=") + 1);
    }
  return env;
}

interface Page {
  file: string;
  steps: Step[];
}

/** A fresh server for the given pages (its variables from their `npm start` lines), stopped by `stop`. */
async function serverFor(pages: Page[]) {
  const db = await createTestDatabase("sqlite");
  const app = await startAppOn(db.url, serverEnv(pages.flatMap((p) => p.steps)));
  return {
    run: (p: Page) => runPage(p.file, p.steps, app.port, { DATABASE_URL: db.url }),
    async stop() {
      await app.stop();
      await db.drop();
    },
  };
}

const files = markdownFiles();
const pages = files.map((file) => {
  const blocks = blocksOf(file);
  return { file, blocks, steps: blocks.filter((b) => b.lang === RUN).flatMap(stepsOf) };
});

test("every fenced block is a ```sh block that runs, or one of the fences shown only", (t) => {
  const wrong = pages.flatMap((p) => p.blocks.filter((b) => b.lang !== RUN && !SHOWN.has(b.lang)).map((b) => `${b.file}:${b.line}: \`\`\`${b.lang}`));
  t.deepEqual(wrong, [], `use \`\`\`sh for an example that runs, or one of ${[...SHOWN].join(", ")}`);
});

test("the wildcard and JSON comparison", (t) => {
  t.true(matches('{"id":"subj_…","deleted":true}', '{"id":"subj_abc","deleted":true}'));
  t.true(matches('{ "received": 2,\n  "accepted": 2 }', '{\n  "received": 2,\n  "accepted": 2\n}'));
  t.true(matches("3.1.0\n…", "3.1.0\n44"));
  t.false(matches('{"status":"ok"}', '{"status":"not ready"}'));
  t.false(matches("200", "404"));
});

function report(t: ExecutionContext, problems: string[]) {
  if (problems.length > 0) t.fail(problems.join("\n\n"));
  else t.pass();
}

// The walk-through's pages run one after another on one server, each its own test (so that a
// result arrives after each page), while the other pages run beside them.
const walkthrough = pages.filter((p) => p.file.startsWith(WALKTHROUGH) && p.steps.length > 0);
let walk: { server: ReturnType<typeof serverFor>; runs: Promise<string[]>[]; last: Promise<unknown> } | undefined;
/** Starts the walk-through (its server, then its pages in order) the first time one of its tests asks. */
function walkthroughRun(i: number): Promise<string[]> {
  if (!walk) {
    const server = serverFor(walkthrough);
    let last: Promise<unknown> = server;
    const runs = walkthrough.map((p) => {
      const done = last.then(async () => (await server).run(p));
      last = done.catch(() => undefined);
      return done;
    });
    walk = { server, runs, last };
  }
  return walk.runs[i] as Promise<string[]>;
}
test.after.always(async () => {
  if (!walk) return;
  await walk.last;
  await (await walk.server).stop();
});
walkthrough.forEach((p, i) => {
  test(`the walk-through: ${relative(WALKTHROUGH, p.file)} runs on the walk-through's server and shows what it prints`, async (t) => report(t, await walkthroughRun(i)));
});

for (const p of pages.filter((p) => !p.file.startsWith(WALKTHROUGH) && p.steps.length > 0))
  test(`${p.file} runs and shows what it prints`, async (t) => {
    const server = await serverFor([p]);
    try {
      report(t, await server.run(p));
    } finally {
      await server.stop();
    }
  });

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

test("every relative link points at a file that exists, and at a heading of it", (t) => {
  const broken: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), "utf8")
      .replace(/^```[\s\S]*?^```$/gm, "")
      .replace(/`[^`\n]*`/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1] as string;
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split("#") as [string, string | undefined];
      const resolved = path === "" ? file : join(file, "..", path);
      let body: string;
      try {
        body = readFileSync(join(ROOT, resolved), "utf8");
      } catch (e) {
        if ((e as { code?: string }).code === "EISDIR") continue;
        broken.push(`${file}: ${target} (no such file)`);
        continue;
      }
      if (anchor && resolved.endsWith(".md")) {
        const anchors = [...body.replace(/^```[\s\S]*?^```$/gm, "").matchAll(/^#+ (.*)$/gm)].map((h) => anchorOf(h[1] as string));
        if (!anchors.includes(anchor)) broken.push(`${file}: ${target} (no such heading)`);
      }
    }
  }
  t.deepEqual(broken, []);
});
