/**
 * Preloaded into a benchmark's server child (`node --import ./bench/loop-delay.mjs …`): measures
 * the server's event-loop delay with perf_hooks.monitorEventLoopDelay (5 ms resolution: an idle loop shows about 5 ms). On
 * SIGUSR2 it writes what it measured since the previous SIGUSR2 (p50, p99, max, mean in ms) as JSON
 * to BENCH_LOOP_DELAY_FILE, then starts over: the benchmark signals once when a phase starts and
 * once when it ends, and reads the file.
 */
import { writeFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";

const file = process.env.BENCH_LOOP_DELAY_FILE;
if (file) {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  process.on("SIGUSR2", () => {
    const ms = (ns) => Math.round(ns / 1e4) / 100;
    writeFileSync(file, JSON.stringify({ p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max), mean: ms(h.mean), samples: h.count }));
    h.reset();
  });
}
