/**
 * The structure checks CI runs (scripts/check-cycles.ts, scripts/check-structure.ts), each on a
 * small made-up repository: a cycle through type-only imports is a cycle, an import that does not
 * resolve is reported; files are counted by lines, src/gen and the page modules left out where
 * the limits say so.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import test from "ava";
import { analyse, problems } from "../scripts/check-cycles.js";
import { figures, verdict } from "../scripts/check-structure.js";

function repository(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "structure-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const TSCONFIG = readFileSync(new URL("../tsconfig.json", import.meta.url), "utf8");
const linesOf = (n: number) => "x;\n".repeat(n);

test("check:cycles: a cycle of type-only imports is a cycle; an unresolved relative import is reported; a tree without either passes", (t) => {
  const root = repository({
    "tsconfig.json": TSCONFIG,
    "src/a.ts": 'import type { B } from "./b.js";\nexport type A = B | 1;\n',
    "src/b.ts": 'import type { A } from "./a.js";\nexport type B = A | 2;\n',
    "src/c.ts": 'import { d } from "./missing.js";\nexport const c = d;\n',
    "src/ok/e.ts": 'import { f } from "./f.js";\nexport const e = f;\n',
    "src/ok/f.ts": "export const f = 1;\n",
  });
  try {
    const found = problems(analyse(root));
    t.is(found.cycles.length, 1, found.cycles.join("\n"));
    t.regex(found.cycles[0] ?? "", /^src\/(a|b)\.ts -> src\/(a|b)\.ts -> src\/(a|b)\.ts$/);
    t.deepEqual(found.unresolved, ["src/c.ts imports ./missing.js, which does not resolve"]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("check:structure: lines per file outside src/gen, the serving layer without page modules, the two READMEs", (t) => {
  const root = repository({
    "src/gen/big_pb.ts": linesOf(900),
    "src/billing/long.ts": linesOf(401),
    "src/billing/short.ts": linesOf(400),
    "src/edge/listener.ts": linesOf(100),
    "src/rpc/errors.ts": linesOf(20),
    "src/rest/gateway.ts": linesOf(3),
    "src/pages/docs.ts": linesOf(300),
    "src/pages/dashboard/page.ts": linesOf(300),
    "src/openapi/build.ts": linesOf(50),
    "README.md": linesOf(251),
    "bench/README.md": `${linesOf(299)}no newline at the end`,
  });
  try {
    const f = figures(root);
    t.deepEqual(f.longFiles, [["src/billing/long.ts", 401]]);
    t.deepEqual(f.longestFile, ["src/billing/long.ts", 401]);
    t.is(f.serving, 123);
    t.is(f.servingFiles, 3);
    t.deepEqual(f.servingBy, { "src/edge/": 100, "src/rpc/": 20, "src/rest/": 3 });
    t.is(f.readme, 251);
    t.is(f.benchReadme, 299);
    // Over: the long file and README.md; the serving layer (123 lines) is under its limit.
    t.is(verdict(f, false).failed, 2);
    const over = { ...f, serving: 2_501 };
    t.is(verdict(over, false).failed, 3, "the serving layer over its limit fails");
    const asGoal = verdict(over, true);
    t.is(asGoal.failed, 2, "--serving-as-goal: shown, not failed on");
    t.true(asGoal.lines.some((l) => l.startsWith("GOAL  2501 /  2500 lines  serving layer")));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
