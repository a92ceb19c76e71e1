/**
 * A small structured logger: one JSON object per line on stderr. A line written while a span is
 * in progress (tracing on: ops/tracing.ts) carries its `trace_id` and `span_id`, unless its
 * fields give their own.
 */
import type { LogLevel } from "./config.js";
import { activeSpanIds } from "./ops/span-ids.js";

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** Whether lines of `level` are written: hot paths skip building a line nobody reads. */
  enabled(level: LogLevel): boolean;
}

/**
 * Anything shaped like a secret (a Stripe or API secret key, a webhook signing secret) masked in a
 * log line, whatever field carries it (an error message quoting a request, say): only its kind
 * prefix and "…" are kept. A second guard: secrets are never passed to the logger (DESIGN §16).
 */
const SECRET_SHAPES = /\b((?:sk|rk)_(?:test|live)_|whsec_)[A-Za-z0-9+/=_-]{8,}/g;
export function redactSecrets(line: string): string {
  return line.replace(SECRET_SHAPES, "$1…");
}

export function createLogger(level: LogLevel, write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const min = ORDER[level];
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < min) return;
    const extra: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(fields ?? {})) {
      extra[k] = v instanceof Error ? { name: v.name, message: v.message, stack: v.stack } : v;
    }
    if (extra.trace_id === undefined) {
      const ids = activeSpanIds();
      if (ids) Object.assign(extra, ids);
    }
    write(`${redactSecrets(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...extra }))}\n`);
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    enabled: (lvl) => ORDER[lvl] >= min,
  };
}
