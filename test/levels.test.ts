/**
 * Every test file is in exactly one level (test/levels.ts), so that the four `npm run test:<level>`
 * commands together run what `npm test` runs, each file once; and package.json's scripts run
 * each level through scripts/test-level.ts.
 */
import { readFileSync } from "node:fs";
import test from "ava";
import { testFiles } from "../scripts/test-level.js";
import { LEVEL_NAMES, LEVELS, levelsOf } from "./levels.js";

test("every test file is in exactly one level", (t) => {
  const files = testFiles();
  t.true(files.length > 50, `${files.length} test files found`);
  const nowhere = files.filter((f) => levelsOf(f).length === 0);
  const twice = files.filter((f) => levelsOf(f).length > 1).map((f) => `${f} (${levelsOf(f).join(", ")})`);
  t.deepEqual(nowhere, [], "in no level: add each to test/levels.ts");
  t.deepEqual(twice, [], "in more than one level");
  t.true(levelsOf("test/levels.test.ts").includes("unit"));
});

test("every level has test files, and npm run test:<level> runs it", (t) => {
  const files = testFiles();
  const { scripts } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };
  for (const level of LEVEL_NAMES) {
    t.true(
      files.some((f) => levelsOf(f).includes(level)),
      `${level}: ${LEVELS[level].join(", ")}`,
    );
    t.regex(scripts[`test:${level}`] ?? "", new RegExp(`scripts/test-level\\.ts ${level}$`), `test:${level}`);
  }
});
