/**
 * Redocly CLI lints the committed OpenAPI document with the project's redocly.yaml
 * (`recommended-strict`: every warning an error), as CI does (.ci/run): no error, no warning. A
 * second case shows the lint catches a document without a license or an operation without 4xx.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { loadOpenApi } from "../../src/pages/docs.js";

const redocly = (file: string) =>
  promisify(execFile)("node_modules/.bin/redocly", ["lint", file, "--config", "redocly.yaml", "--format", "json"], { maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, stdout: r.stdout }),
    (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
  );

interface Report {
  totals: { errors: number; warnings: number };
  problems: { ruleId: string; severity: string; message: string }[];
}

test("the committed document passes Redocly's recommended-strict lint with no warnings", async (t) => {
  const r = await redocly("openapi/openapi.json");
  const report = JSON.parse(r.stdout) as Report;
  t.deepEqual(
    report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message}`),
    [],
  );
  t.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 });
  t.is(r.code, 0);
});

test("the lint fails on what the document once lacked: a license, a 4xx on every operation", async (t) => {
  const doc = structuredClone(loadOpenApi()) as unknown as { info: Record<string, unknown>; paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
  delete doc.info.license;
  const ping = doc.paths["/ping"]?.get;
  if (ping) for (const s of Object.keys(ping.responses)) if (s.startsWith("4")) delete ping.responses[s];
  const dir = mkdtempSync(join(tmpdir(), "openapi-lint-"));
  const file = join(dir, "openapi.json");
  writeFileSync(file, JSON.stringify(doc));
  const r = await redocly(file);
  const report = JSON.parse(r.stdout) as Report;
  t.deepEqual(report.problems.map((p) => p.ruleId).sort(), ["info-license", "operation-4xx-response"]);
  t.not(r.code, 0);
});
