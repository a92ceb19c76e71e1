/**
 * No import cycles in src (`npm run check:cycles`; CI's setup): dpdm reads every module of src
 * (src/gen included) with tsconfig.json's resolution, type-only imports counted as imports, and
 * this prints each cycle it finds and exits 1. A relative import that dpdm cannot resolve fails
 * too, since a cycle through it would go unseen.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

interface Dependency {
  issuer: string;
  request: string;
  id: string | null;
}

interface Report {
  tree: Record<string, Dependency[] | null>;
  circulars: string[][];
}

/** dpdm's analysis of `root`'s src (root: the repository's): every module's imports, and the cycles among them. */
export function analyse(root = ROOT): Report {
  const dir = mkdtempSync(join(tmpdir(), "check-cycles-"));
  try {
    const out = join(dir, "dpdm.json");
    const r = spawnSync(
      process.execPath,
      [join(ROOT, "node_modules", "dpdm", "lib", "bin", "dpdm.js"), "--no-tree", "--no-warning", "--no-circular", "--no-progress", "--tsconfig", "tsconfig.json", "-o", out, "src/**/*.ts"],
      { cwd: root, encoding: "utf8" },
    );
    if (r.status !== 0) throw new Error(`dpdm failed (exit ${r.status}): ${r.stderr || r.stdout}`);
    return JSON.parse(readFileSync(out, "utf8")) as Report;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The problems in `report`: each cycle, and each relative import that does not resolve. */
export function problems({ tree, circulars }: Report): { cycles: string[]; unresolved: string[] } {
  return {
    cycles: circulars.map((cycle) => [...cycle, cycle[0]].join(" -> ")),
    unresolved: Object.values(tree)
      .flatMap((deps) => deps ?? [])
      .filter((d) => d.request.startsWith(".") && d.id === null)
      .map((d) => `${d.issuer} imports ${d.request}, which does not resolve`),
  };
}

function main(): number {
  const report = analyse();
  const { tree, circulars } = report;
  const { cycles, unresolved } = problems(report);
  const modules = Object.keys(tree).filter((m) => m.startsWith("src/")).length;
  process.stdout.write(`${modules} modules of src read, ${circulars.length} import cycle(s)\n`);
  for (const [i, cycle] of cycles.entries()) process.stdout.write(`  ${i + 1}) ${cycle}\n`);
  for (const line of unresolved) process.stdout.write(`  ${line}\n`);
  return circulars.length > 0 || unresolved.length > 0 ? 1 : 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main();
