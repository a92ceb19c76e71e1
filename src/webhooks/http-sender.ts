/**
 * Outbound webhook HTTP: one POST per attempt with a total timeout, redirects never followed (a
 * 3xx is a failed attempt), at most 64 KiB of the response read and 1,000 characters of it kept,
 * and every resolved address checked by the host guard before connecting (so a name that
 * resolves to a private address is refused at connection time too).
 */
import { lookup as dnsLookup } from "node:dns";
import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import type { WebhookRequest, WebhookResponse, WebhookSender } from "../billing/events/delivery.js";
import type { HostGuard } from "./guard.js";

const READ_LIMIT = 64 * 1024;
const EXCERPT = 1000;

export class HttpWebhookSender implements WebhookSender {
  private readonly httpAgent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 32 });

  constructor(private readonly guard: HostGuard) {}

  private readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 0);
      const list = addresses as unknown as { address: string; family: number }[];
      const blocked = list.find((a) => !this.guard.allowsAddress(a.address));
      if (blocked) return callback(Object.assign(new Error(`${hostname} resolves to ${blocked.address}, a private address webhooks may not reach`), { code: "EBLOCKED" }), "", 0);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: unknown) => void)(null, list);
      const first = list[0] as { address: string; family: number };
      callback(null, first.address, first.family);
    });
  };

  send(req: WebhookRequest): Promise<WebhookResponse> {
    const started = performance.now();
    return new Promise((resolve) => {
      let settled = false;
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
      const isHttps = url.protocol === "https:";
      const body = Buffer.from(req.body);
      const request = (isHttps ? https : http).request(url, {
        method: "POST",
        headers: { ...req.headers, "content-length": String(body.length) },
        agent: isHttps ? this.httpsAgent : this.httpAgent,
        lookup: this.lookup,
      });
      const timer = setTimeout(() => {
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
