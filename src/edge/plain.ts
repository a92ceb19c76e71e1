/** The plain routes, answered before anything else (no key, no admission): GET /healthz, /readyz and /metrics. */
import { timingSafeEqual } from "node:crypto";
import type { Logger } from "../log.js";
import type { Readiness } from "../ops/health.js";
import type { Metrics } from "../ops/metrics.js";
import { traceOf } from "../ops/trace.js";
import type { Req, Res } from "./listener.js";

/** Their paths, which are also their metrics' procedure label. */
export const PLAIN = new Set(["/healthz", "/readyz", "/metrics"]);

/** Whether `header` (an Authorization value) is `Bearer <token>`, compared in constant time. */
function bearerMatches(header: string | undefined, token: string): boolean {
  if (typeof header !== "string" || !header.startsWith("Bearer ")) return false;
  const given = Buffer.from(header.slice(7).trim());
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

function json(res: Res, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/** `metricsToken`: the bearer token a scrape must send (undefined: none). */
export function createPlainRoutes(readiness: Readiness, metrics: Metrics, metricsToken: string | undefined, log: Logger) {
  return (path: string, req: Req, res: Res): void => {
    if (req.method !== "GET" && req.method !== "HEAD") json(res, 405, { status: "method not allowed" }, { allow: "GET" });
    // Liveness: the process answers. Nothing else is looked at (a database outage must not restart it).
    else if (path === "/healthz") json(res, 200, { status: "ok" });
    else if (path === "/readyz") {
      readiness.check().then(
        (r) => json(res, r.ready ? 200 : 503, { status: r.ready ? "ready" : "not ready", checks: r.checks }, { "cache-control": "no-store" }),
        () => json(res, 503, { status: "not ready" }),
      );
    } else if (metricsToken !== undefined && !bearerMatches(req.headers.authorization, metricsToken)) {
      json(res, 401, { status: "unauthenticated: send Authorization: Bearer <METRICS_TOKEN>" }, { "www-authenticate": 'Bearer realm="metrics"' });
    } else {
      metrics.expose().then(
        ({ contentType, text }) => {
          res.writeHead(200, { "content-type": contentType, "cache-control": "no-store" });
          res.end(text);
        },
        (err) => {
          log.error("metrics failed", { request_id: traceOf(res)?.id, err });
          if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
          res.end("metrics failed\n");
        },
      );
    }
  };
}
