/**
 * Outbound webhook HTTP: one POST per attempt with a total timeout, redirects never followed (a
 * 3xx is a failed attempt), at most 64 KiB of the response read and 1,000 characters of it kept.
 * The host guard is asked before connecting, twice: about the URL's literal host (Node never calls
 * a custom `lookup` for an IP literal, so this is the only check an address like
 * `[::ffff:127.0.0.1]` meets) and about every address a name resolves to (so a name that resolves
 * to a private address is refused at connection time too). A refused attempt sends nothing and
 * records why as its error. With tracing on, each attempt is a span of its own (a new trace: the
 * delivery runs later than the request that wrote its event), whose `traceparent` goes with it.
 */
import { lookup as dnsLookup } from "node:dns";
import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import type { WebhookRequest, WebhookResponse, WebhookSender } from "../billing/events/delivery.js";
import { SpanKind, SpanStatusCode, type Tracing } from "../ops/tracing.js";
import { type HostGuard, addressProblem } from "./guard.js";

const READ_LIMIT = 64 * 1024;
const EXCERPT = 1000;

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Every address of a name (dns.lookup with `all: true`; tests give a resolver of their own). */
export type Resolver = (hostname: string, options: { family?: number; hints?: number }, callback: (err: NodeJS.ErrnoException | null, addresses: ResolvedAddress[]) => void) => void;

const systemResolver: Resolver = (hostname, options, callback) =>
  dnsLookup(hostname, { family: options.family ?? 0, hints: options.hints, all: true }, (err, addresses) => callback(err, err ? [] : addresses));

export class HttpWebhookSender implements WebhookSender {
  private readonly httpAgent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 32 });

  constructor(
    private readonly guard: HostGuard,
    private readonly resolve: Resolver = systemResolver,
    private readonly tracing?: Tracing,
  ) {}

  private readonly lookup: LookupFunction = (hostname, options, callback) => {
    const family = typeof options.family === "number" ? options.family : options.family === "IPv6" ? 6 : options.family === "IPv4" ? 4 : undefined;
    this.resolve(hostname, { family, hints: options.hints }, (err, list) => {
      if (err) return callback(err, "", 0);
      const blocked = list.find((a) => !this.guard.allowsAddress(a.address));
      if (blocked) {
        const why = addressProblem(blocked.address);
        return callback(
          Object.assign(new Error(`not sent: ${hostname} resolves to ${blocked.address}${why ? ` (${why})` : ""}, an address webhooks may not reach (WEBHOOK_ALLOW_PRIVATE_HOSTS=true allows it)`), {
            code: "EBLOCKED",
          }),
          "",
          0,
        );
      }
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), "", 0);
      if (options.all) return (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, list);
      callback(null, first.address, first.family);
    });
  };

  send(req: WebhookRequest): Promise<WebhookResponse> {
    const tracing = this.tracing;
    if (tracing === undefined) return this.attempt(req);
    let host = "";
    try {
      host = new URL(req.url).host;
    } catch {}
    const h = req.headers;
    const attributes = {
      "server.address": host,
      "billing.webhook.delivery_id": h["billing-delivery-id"] ?? "",
      "billing.webhook.event_id": h["billing-event-id"] ?? "",
      "billing.webhook.event_type": h["billing-event-type"] ?? "",
    };
    return tracing.inSpan(
      "webhook.deliver",
      SpanKind.CLIENT,
      attributes,
      async (span) => {
        const out = await this.attempt({ ...req, headers: tracing.inject(span, { ...req.headers }) });
        if (out.statusCode !== null) span.setAttribute("http.response.status_code", out.statusCode);
        if (out.error !== null) span.setStatus({ code: SpanStatusCode.ERROR, message: out.error });
        return out;
      },
      true,
    );
  }

  private attempt(req: WebhookRequest): Promise<WebhookResponse> {
    const started = performance.now();
    return new Promise((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (r: Omit<WebhookResponse, "latencyMs">) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ ...r, latencyMs: performance.now() - started });
      };
      let url: URL;
      try {
        url = new URL(req.url);
      } catch {
        finish({ statusCode: null, excerpt: null, error: "invalid URL" });
        return;
      }
      // The literal host, before any connection: `lookup` below is not called for an IP literal.
      const refused = this.guard.checkUrl(url);
      if (refused) {
        const why = addressProblem(url.hostname);
        finish({ statusCode: null, excerpt: null, error: `not sent: the URL ${refused}${why ? `; ${url.hostname} is ${why}` : ""}` });
        return;
      }
      const isHttps = url.protocol === "https:";
      const body = Buffer.from(req.body);
      const request = (isHttps ? https : http).request(url, {
        method: "POST",
        headers: { ...req.headers, "content-length": String(body.length) },
        agent: isHttps ? this.httpsAgent : this.httpAgent,
        lookup: this.lookup,
      });
      timer = setTimeout(() => {
        request.destroy(new Error(`timed out after ${req.timeoutMs} ms`));
      }, req.timeoutMs);
      request.on("error", (err: Error & { code?: string }) => finish({ statusCode: null, excerpt: null, error: err.message || err.code || "request failed" }));
      request.on("response", (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () => {
          const text = Buffer.concat(chunks).toString("utf8").slice(0, EXCERPT);
          const code = res.statusCode ?? null;
          const redirect = code !== null && code >= 300 && code < 400 ? ` (redirect to ${res.headers.location ?? "?"} not followed)` : "";
          finish({ statusCode: code, excerpt: text === "" ? null : text, error: code !== null && code >= 200 && code < 300 ? null : `HTTP ${code}${redirect}` });
        };
        res.on("data", (c: Buffer) => {
          if (size < READ_LIMIT) chunks.push(c.subarray(0, READ_LIMIT - size));
          size += c.length;
          if (size >= READ_LIMIT) {
            // Enough read: the rest is not wanted (and the socket is not reused).
            res.destroy();
            done();
          }
        });
        res.on("end", done);
        res.on("error", done);
      });
      request.end(body);
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
