/**
 * `npm start`: reads the configuration, starts the service, stops it cleanly on SIGTERM/SIGINT.
 * WORKERS > 1: this process is the primary of that many server processes (src/cluster.ts), each
 * of which runs this file again as a cluster worker.
 */
import cluster from "node:cluster";
import { startApp } from "./app.js";
import { runPrimary } from "./cluster.js";
import { ConfigError, loadConfig } from "./config.js";
import { readSettings, takeEnvFile } from "./env-file.js";
import { createLogger } from "./log.js";

let config: ReturnType<typeof loadConfig>;
try {
  // `npm start -- --env-file PATH` (or ENV_FILE): the settings of that file over the environment.
  const args = takeEnvFile(process.argv.slice(2));
  if ("error" in args) throw new ConfigError([args.error]);
  config = loadConfig(readSettings(process.env, args.envFile).env);
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  throw err;
}
const log = createLogger(config.logLevel);
if (cluster.isPrimary && config.workers > 1) {
  await runPrimary(config, log).catch((err) => {
    log.error("could not start", { err });
    process.exit(1);
  });
} else {
  await serve();
}

async function serve(): Promise<void> {
  const app = await startApp(config, log).catch((err) => {
    log.error("could not start", { err });
    process.exit(1);
  });

  let signalled = false;
  const stop = (signal: string) => {
    if (signalled) return;
    signalled = true;
    log.info("stopping: finishing requests in flight", { signal, shutdown_timeout_ms: config.shutdownTimeoutMs });
    app.stop().then(
      () => {
        log.info("stopped");
        process.exit(0);
      },
      (err) => {
        log.error("unclean stop", { err });
        process.exit(1);
      },
    );
  };
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => stop(signal));
  // A cluster worker whose primary is gone (killed) exits at once: node:cluster's own 'disconnect' handling.
}
