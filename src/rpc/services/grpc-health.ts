/**
 * The standard gRPC health service (grpc.health.v1.Health), for Kubernetes gRPC probes, load
 * balancers and grpc_health_probe. The server is SERVING when it is ready (the checks /readyz
 * makes: database, migrations, scheduler; src/ops/health.ts) and NOT_SERVING otherwise; every served service has the server's status, and
 * "" names the server itself. Needs no API key and is never refused by admission control.
 */
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";

export interface HealthOptions {
  /** Names a client may ask about, besides "" (the whole server). */
  services: string[];
  /** Whether the server is ready (bounded in time by the caller). */
  check: () => Promise<boolean>;
  /** How often Watch looks again while anyone watches. */
  watchIntervalMs: number;
  /** Aborted when the server stops: open Watch calls end (OK) so that shutdown need not wait for them. */
  stopped: AbortSignal;
}

/** Resolves after `ms`, or at once when either signal aborts. */
function sleep(ms: number, ...signals: AbortSignal[]): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      for (const s of signals) s.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const s of signals) {
      if (s.aborted) return done();
      s.addEventListener("abort", done, { once: true });
    }
  });
}

export function grpcHealthService(o: HealthOptions): ServiceImpl<typeof Health> {
  const known = new Set(["", ...o.services]);
  const status = async (): Promise<Status> => ((await o.check().catch(() => false)) ? Status.SERVING : Status.NOT_SERVING);
  // Watchers share one look per interval: a hundred watchers cost the database what one does.
  let shared: { at: number; status: Promise<Status> } | undefined;
  const watchedStatus = (): Promise<Status> => {
    const now = Date.now();
    if (!shared || now - shared.at >= o.watchIntervalMs / 2) shared = { at: now, status: status() };
    return shared.status;
  };
  return {
    async check(req) {
      if (!known.has(req.service)) throw new ConnectError(`unknown service ${JSON.stringify(req.service)}`, Code.NotFound);
      return { status: await status() };
    },
    async *watch(req, ctx) {
      const signals = [ctx.signal, o.stopped];
      const open = () => !ctx.signal.aborted && !o.stopped.aborted;
      if (!known.has(req.service)) {
        // The set of services never changes while the server runs: unknown it stays.
        yield { status: Status.SERVICE_UNKNOWN };
        while (open()) await sleep(60_000, ...signals);
        if (ctx.signal.aborted) throw ctx.signal.reason;
        return;
      }
      let last: Status | undefined;
      while (open()) {
        const now = await watchedStatus();
        if (!open()) break;
        if (now !== last) {
          last = now;
          yield { status: now };
        }
        await sleep(o.watchIntervalMs, ...signals);
      }
      // The call's own end (its deadline: DEADLINE_EXCEEDED; a cancel) is the call's status; the
      // server stopping ends it OK.
      if (ctx.signal.aborted) throw ctx.signal.reason;
    },
  };
}
