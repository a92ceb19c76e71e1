/**
 * A proxy in front of the fake Stripe (test/stripe/fake-stripe.ts; a `front` of useStripeServer in
 * payment-flows.ts) that fails only its charges (POST /v1/payment_intents) while `outage` is set:
 * the connection dropped before an answer (Stripe unreachable), Stripe's 503, Stripe's 401 for
 * a secret key it no longer takes (revoked: a refusal for good, not an outage), or the charge made
 * at Stripe and its answer lost (the connection dropped after Stripe answered, as a timeout on our
 * side). Everything else passes through unchanged. stripeProxy, what it is made of, serves the
 * other proxies of the Stripe tests (stripe-waiting.ts).
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { StripeFront } from "./payment-flows.js";
import type { Json } from "./subjects-api.js";

/** How the proxy fails a charge: the connection dropped before an answer, Stripe's 503, Stripe's 401 (the key revoked), or made and its answer lost. */
export type Outage = "unreachable" | "503" | "401" | "answer-lost";

/** A proxy in front of the fake Stripe that fails its charges (POST /v1/payment_intents) while `outage` is set. */
export interface OutageProxy {
  url: string;
  outage: Outage | undefined;
  /** The charges it failed. */
  failed: number;
  stop(): Promise<void>;
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Answers `res` as Stripe would, with `status` and a JSON `body`. */
export function answerJson(res: ServerResponse, status: number, body: Json): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/**
 * What a proxy does with one request (its body read, and given), asked before passing it on:
 * "answered" (the rule answered it or dropped its connection itself), "answer-lost" (passed on to
 * Stripe, the connection then dropped without its answer), or undefined (passed through). A rule
 * may wait (hold the request) before it says.
 */
export type ProxyRule = (req: IncomingMessage, res: ServerResponse, body: Buffer) => "answered" | "answer-lost" | undefined | Promise<"answered" | "answer-lost" | undefined>;

/**
 * Starts a proxy in front of the fake Stripe at `target` that applies `rule` to each request and
 * passes the others through unchanged; `lost` is told of each answer dropped, once Stripe gave it.
 */
export async function stripeProxy(target: string, rule: ProxyRule, lost: () => void = () => {}): Promise<StripeFront> {
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      const ruled = await rule(req, res, body);
      if (ruled === "answered") return;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) headers[k] = v;
      const out = await fetch(`${target}${req.url}`, { method: req.method, headers, body: req.method === "GET" ? undefined : new Uint8Array(body) });
      const answer = Buffer.from(await out.arrayBuffer());
      if (ruled === "answer-lost") {
        lost();
        return void req.socket.destroy();
      }
      const back: Record<string, string> = {};
      out.headers.forEach((v, k) => {
        if (!["content-encoding", "transfer-encoding", "content-length", "connection"].includes(k)) back[k] = v;
      });
      res.writeHead(out.status, back);
      res.end(answer);
    })().catch((err) => {
      res.writeHead(502);
      res.end(String(err));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Stripe's 503 (an outage). */
export const UNAVAILABLE = { error: { type: "api_error", message: "Stripe is unavailable." } };
/** Stripe's 401 for a secret key it no longer takes (revoked). */
export const KEY_REVOKED = { error: { type: "invalid_request_error", message: "Invalid API Key provided: sk_test_****oked" } };

/** Starts the proxy in front of the fake Stripe at `target`, passing everything through until `outage` is set. */
export async function outageProxy(target: string): Promise<OutageProxy> {
  const proxy: OutageProxy = { url: "", outage: undefined, failed: 0, stop: async () => {} };
  const started = await stripeProxy(
    target,
    (req, res) => {
      const charge = req.method === "POST" && req.url?.startsWith("/v1/payment_intents");
      if (!proxy.outage || !charge) return undefined;
      if (proxy.outage === "answer-lost") return "answer-lost";
      proxy.failed++;
      if (proxy.outage === "unreachable") req.socket.destroy();
      else answerJson(res, proxy.outage === "401" ? 401 : 503, proxy.outage === "401" ? KEY_REVOKED : UNAVAILABLE);
      return "answered";
    },
    () => proxy.failed++,
  );
  proxy.url = started.url;
  proxy.stop = started.stop;
  return proxy;
}
