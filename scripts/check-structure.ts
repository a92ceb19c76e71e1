/**
 * The size limits of the project's structure (`npm run check:structure`; CI's setup): prints each
 * figure with its limit and exits 1 when one is over.
 *
 *   - no source file in src (outside src/gen, which is generated) over 400 lines;
 *   - the serving layer (src/edge, src/rpc, src/rest, without the page modules below) at most
 *     2,500 lines in all;
 *   - README.md at most 250 lines, bench/README.md at most 300.
 *
 * Lines are counted as `wc -l` does (newline characters). `--serving-as-goal` prints the serving
 * layer's figure against its limit without failing on it (CI, while the serving layer is still
 * being brought under it: the figure is shown on every run, the other limits are enforced).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

/** The serving layer: the listener and its admit chain, the RPC protocols, the REST bridge. */
const SERVING_LAYER = ["src/edge/", "src/rpc/", "src/rest/"];

/**
 * The modules that render pages for people, not counted in the serving layer (they may sit under
 * it): the dashboard, the hosted checkout and invoice pages, the portal's pages, the API docs
 * page, and the OpenAPI document's builder. A directory ends in "/".
 */
const PAGE_MODULES = ["src/pages/", "src/openapi/"];

const LIMITS = { file: 400, serving: 2_500, readme: 250, benchReadme: 300 };

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const under = (entry: string, file: string) => (entry.endsWith("/") ? file.startsWith(entry) : file === entry);

function lines(root: string, file: string): number {
  const text = readFileSync(join(root, file), "utf8");
  let n = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

/** The TypeScript files of src outside src/gen, as paths from the repository root with "/". */
function sourceFiles(root: string): string[] {
  return readdirSync(join(root, "src"), { recursive: true, encoding: "utf8" })
    .map((f) =>
      relative(root, join(root, "src", f))
        .split(sep)
        .join("/"),
    )
    .filter((f) => f.endsWith(".ts") && !f.startsWith("src/gen/"))
    .sort();
}

export interface Figures {
  /** Files over the limit, with their lines, longest first. */
  longFiles: [string, number][];
  longestFile: [string, number];
  serving: number;
  servingFiles: number;
  /** The serving layer's lines by its directories. */
  servingBy: Record<string, number>;
  readme: number;
  benchReadme: number;
}

/** The figures of the repository at `root` (default: this one). */
export function figures(root = ROOT): Figures {
  const counted = sourceFiles(root).map((f) => [f, lines(root, f)] as [string, number]);
  counted.sort((a, b) => b[1] - a[1]);
  const serving = counted.filter(([f]) => SERVING_LAYER.some((e) => under(e, f)) && !PAGE_MODULES.some((e) => under(e, f)));
  const doc = (f: string) => (existsSync(join(root, f)) ? lines(root, f) : 0);
  return {
    longFiles: counted.filter(([, n]) => n > LIMITS.file),
    longestFile: counted[0] ?? ["", 0],
    serving: serving.reduce((sum, [, n]) => sum + n, 0),
    servingFiles: serving.length,
    servingBy: Object.fromEntries(SERVING_LAYER.map((dir) => [dir, serving.filter(([file]) => file.startsWith(dir)).reduce((sum, [, n]) => sum + n, 0)])),
    readme: doc("README.md"),
    benchReadme: doc("bench/README.md"),
  };
}

/** The report's lines and how many limits fail; `servingAsGoal`: the serving layer's limit is shown, not failed on. */
export function verdict(f: Figures, servingAsGoal: boolean): { lines: string[]; failed: number } {
  const rows: [string, number, number][] = [
    [`longest source file (${f.longestFile[0]})`, f.longestFile[1], LIMITS.file],
    [`serving layer (${SERVING_LAYER.join(", ")} without the page modules; ${f.servingFiles} files)`, f.serving, LIMITS.serving],
    ["README.md", f.readme, LIMITS.readme],
    ["bench/README.md", f.benchReadme, LIMITS.benchReadme],
  ];
  const lines: string[] = [];
  let failed = 0;
  rows.forEach(([what, n, limit], i) => {
    const ok = n <= limit;
    const goal = servingAsGoal && i === 1;
    if (!ok && !goal) failed++;
    lines.push(`${ok ? "ok  " : goal ? "GOAL" : "OVER"} ${String(n).padStart(5)} / ${String(limit).padStart(5)} lines  ${what}${!ok && goal ? " (a goal not met yet: not failed on)" : ""}`);
  });
  lines.push(
    `             serving layer by directory: ${Object.entries(f.servingBy)
      .map(([dir, n]) => `${dir} ${n}`)
      .join(", ")}`,
  );
  for (const [file, n] of f.longFiles) lines.push(`OVER ${String(n).padStart(5)} / ${String(LIMITS.file).padStart(5)} lines  ${file}`);
  if (failed > 0) lines.push(`check:structure: ${failed} limit(s) exceeded${f.longFiles.length ? `; ${f.longFiles.length} source file(s) over ${LIMITS.file} lines` : ""}`);
  return { lines, failed };
}

function main(servingAsGoal: boolean): number {
  const { lines, failed } = verdict(figures(), servingAsGoal);
  for (const line of lines) process.stdout.write(`${line}\n`);
  return failed > 0 ? 1 : 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main(process.argv.includes("--serving-as-goal"));
