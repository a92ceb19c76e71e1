/**
 * This service's server processes for the harness: `node --import tsx src/main.ts` (what
 * `npm start` runs, without a build), each on its own loopback port, its log in a file.
 */
import type { ChildProcess } from "node:child_process";
import http from "node:http";
import { join } from "node:path";
import { REPO_ROOT, START_NODE_ARGS, freePort, serverEnvironment } from "../../bench/lib.js";
import { sleep } from "./cluster.js";
import { exited, signal, startProcess } from "./processes.js";

export class ServiceProcess {
  proc: ChildProcess | undefined;
  starts = 0;
  private constructor(
    readonly name: string,
    readonly port: number,
    readonly env: Record<string, string>,
    readonly logFile: string,
  ) {}

  /** A server named `name` on a free port with `vars` (PORT and HOST added), logging to `dir`. */
  static async create(name: string, dir: string, vars: Record<string, string>): Promise<ServiceProcess> {
    const port = await freePort();
    const env = serverEnvironment(process.env, { ...vars, PORT: String(port), HOST: "127.0.0.1" });
    return new ServiceProcess(name, port, env, join(dir, `${name}.log`));
  }

  /** Starts the process and waits until GET /readyz answers 200. */
  async start(timeoutMs = 120_000): Promise<void> {
    this.starts++;
    this.proc = startProcess(process.execPath, [...START_NODE_ARGS, "--import", "tsx", "src/main.ts"], this.logFile, { cwd: REPO_ROOT, env: this.env });
    const t0 = Date.now();
    for (;;) {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) throw new Error(`${this.name} exited during start; see ${this.logFile}`);
      if ((await readyz(this.port)) === 200) return;
      if (Date.now() - t0 > timeoutMs) throw new Error(`${this.name} not ready within ${timeoutMs} ms; see ${this.logFile}`);
      await sleep(250);
    }
  }

  /** kill -9 (with WORKERS above 1 its workers end when their primary's channel closes). */
  async kill9(): Promise<void> {
    if (!this.proc) return;
    signal(this.proc, "SIGKILL");
    await exited(this.proc);
  }

  async stop(): Promise<void> {
    if (!this.proc) return;
    signal(this.proc, "SIGTERM");
    const timer = setTimeout(() => this.proc && signal(this.proc, "SIGKILL"), 30_000);
    await exited(this.proc);
    clearTimeout(timer);
  }
}

/** GET /readyz's status, 0 when nothing answers. */
function readyz(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/readyz", timeout: 2000, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
  });
}
