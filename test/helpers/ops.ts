/**
 * Helpers of the operations tests: scraping GET /metrics and reading one sample of the
 * Prometheus text format, and a grpc-js SubjectService client from the project's protos.
 */
import * as grpc from "@grpc/grpc-js";
import { grpcPackage } from "./grpc-package.js";

/** The text of GET /metrics (with the bearer token when given); throws unless it is a 200. */
export async function scrape(url: string, token?: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status} ${text}`);
  return text;
}

/** The value of the sample `name` whose labels are exactly `labels` (0 when there is none: a series not yet seen). */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const want = Object.entries(labels);
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line === "") continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = new Map([...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (got.size === want.length && want.every(([k, v]) => got.get(k) === v)) return Number(m[3]);
  }
  return 0;
}

/** Whether the text has a sample of `name` (any labels). */
export function hasMetric(text: string, name: string): boolean {
  return text.split("\n").some((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
}

const pkg = grpcPackage(["billing/v1/subject_service.proto", "grpc/health/v1/health.proto"], { enums: String, defaults: true, oneofs: true });

// biome-ignore lint: generated client methods are untyped
export type Untyped = grpc.Client & Record<string, any>;

const target = (url: string) => url.replace(/^http:\/\//, "");

export function grpcSubjects(url: string, options: grpc.ChannelOptions = {}): Untyped {
  return new pkg.billing.v1.SubjectService(target(url), grpc.credentials.createInsecure(), options) as Untyped;
}

export function grpcHealth(url: string): Untyped {
  return new pkg.grpc.health.v1.Health(target(url), grpc.credentials.createInsecure()) as Untyped;
}

/** A unary grpc-js call: its answer or error, and the response header metadata it received. */
export function grpcUnary<T>(client: Untyped, method: string, req: unknown, md: Record<string, string> = {}): Promise<{ ok?: T; err?: grpc.ServiceError; headers: grpc.Metadata | undefined }> {
  const metadata = new grpc.Metadata();
  for (const [k, v] of Object.entries(md)) metadata.set(k, v);
  return new Promise((resolve) => {
    let headers: grpc.Metadata | undefined;
    const call = client[method](req, metadata, (err: grpc.ServiceError | null, res: T) => resolve(err ? { err, headers } : { ok: res, headers }));
    call.on("metadata", (m: grpc.Metadata) => {
      headers = m;
    });
  });
}
