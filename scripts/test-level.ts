/**
 * Runs one test level (test/levels.ts) with ava: `npm run test:unit`, `test:api`, `test:db`,
 * `test:browser`. Arguments after the level go to ava (`npm run test:api -- --tap`).
 *
 *   tsx scripts/test-level.ts <unit|api|db|browser> [ava arguments…]
 *   tsx scripts/test-level.ts --list <level>      the level's test files, one a line
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { LEVEL_NAMES, type Level, levelsOf } from "../test/levels.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Every test file under test/, as a path from the repository root with "/", sorted. */
export function testFiles(root = ROOT): string[] {
  return readdirSync(join(root, "test"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".test.ts") && !f.split(sep).includes("node_modules"))
    .map((f) =>
      relative(root, join(root, "test", f))
        .split(sep)
        .join("/"),
    )
    .sort();
}

function usage(message: string): never {
  process.stderr.write(`${message}\nusage: tsx scripts/test-level.ts [--list] <${LEVEL_NAMES.join("|")}> [ava arguments…]\n`);
  process.exit(2);
}

function main(argv: string[]): number {
  const list = argv[0] === "--list";
  const level = (list ? argv[1] : argv[0]) as Level | undefined;
  if (!level || !LEVEL_NAMES.includes(level)) usage(level ? `unknown level ${level}` : "no level given");
  const files = testFiles().filter((f) => levelsOf(f).includes(level));
  if (list) {
    for (const f of files) process.stdout.write(`${f}\n`);
    return 0;
  }
  if (files.length === 0) usage(`no test file is in the level ${level}`);
  const ava = join(ROOT, "node_modules", "ava", "entrypoints", "cli.mjs");
  const r = spawnSync(process.execPath, [ava, ...argv.slice(1), ...files], { cwd: ROOT, stdio: "inherit" });
  return r.status ?? 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main(process.argv.slice(2));
