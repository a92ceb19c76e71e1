/**
 * What this server was built from, for billing_build_info: the version in package.json, the
 * commit (the BUILD_COMMIT setting, else `git rev-parse HEAD` in the code's directory when it is
 * a checkout, else "unknown"), and the Node.js version running it. Read once, at start.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface BuildInfo {
  version: string;
  commit: string;
  node: string;
}

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

function packageVersion(): string {
  try {
    const { version } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown };
    return typeof version === "string" && version !== "" ? version : "unknown";
  } catch {
    return "unknown";
  }
}

/** The checkout's HEAD, or undefined when the code is no git checkout or git is not installed. */
function gitCommit(): string | undefined {
  try {
    const out = execFileSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, stdio: ["ignore", "pipe", "ignore"], timeout: 2_000, encoding: "utf8" }).trim();
    return /^[0-9a-f]{7,64}$/.test(out) ? out : undefined;
  } catch {
    return undefined;
  }
}

/** `commit`: the BUILD_COMMIT setting (config.ts), which wins over git. */
export function buildInfo(commit: string | undefined): BuildInfo {
  return { version: packageVersion(), commit: commit ?? gitCommit() ?? "unknown", node: process.version };
}
