/**
 * Every process the harness starts, so that all of them are ended however the harness ends (a
 * normal end, a failure, SIGINT or SIGTERM): stopped ones are continued first, then killed.
 */
import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";
import { createWriteStream, rmSync } from "node:fs";

const children = new Set<ChildProcess>();
const dirs = new Set<string>();
let installed = false;

/** Starts `cmd` with `args`, its output appended to `logFile`; ended by cleanup(). */
export function startProcess(cmd: string, args: string[], logFile: string, options: SpawnOptions = {}): ChildProcess {
  installCleanup();
  const log = createWriteStream(logFile, { flags: "a" });
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  children.add(child);
  child.once("exit", () => {
    children.delete(child);
    setTimeout(() => log.end(), 100);
  });
  return child;
}

/** Marks a directory to be removed at cleanup (unless HA_KEEP=1). */
export function removeAtCleanup(dir: string): void {
  dirs.add(dir);
}

/** Sends `signal` to `child` if it runs. */
export function signal(child: ChildProcess, sig: NodeJS.Signals): void {
  if (child.exitCode === null && child.signalCode === null) {
    try {
      child.kill(sig);
    } catch {
      // gone meanwhile
    }
  }
}

/** Resolves when `child` has exited (at once if it has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once("exit", () => r()));
}

/** Ends every process still running (continue, then SIGKILL) and removes the temporary directories. */
export function cleanup(): void {
  for (const c of children) {
    signal(c, "SIGCONT");
    signal(c, "SIGKILL");
  }
  children.clear();
  if (process.env.HA_KEEP !== "1") for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs.clear();
}

function installCleanup(): void {
  if (installed) return;
  installed = true;
  process.once("exit", cleanup);
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(sig, () => {
      process.stderr.write(`[ha] ${sig}: ending every process started\n`);
      cleanup();
      process.exit(130);
    });
  }
  process.once("uncaughtException", (err) => {
    process.stderr.write(`[ha] ${err.stack ?? err.message}\n`);
    cleanup();
    process.exit(1);
  });
}
