/**
 * A proxy in front of the fake Stripe (test/stripe/fake-stripe.ts; a `front` of useStripeServer in
 * payment-flows.ts) that fails only its charges (POST /v1/payment_intents) while `outage` is set:
 * the connection dropped before an answer (Stripe unreachable), Stripe's 503, Stripe's 401 for
 * a secret key it no longer takes (revoked: a refusal for good, not an outage), or the charge made
 * at Stripe and its answer lost (the connection dropped after Stripe answered, as a timeout on our
 * side). Everything else passes through unchanged.
 */
import { type IncomingMessage, type Server, createServer } from "node:http";

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

/** Starts the proxy in front of the fake Stripe at `target`, passing everything through until `outage` is set. */
export async function outageProxy(target: string): Promise<OutageProxy> {
  const proxy: OutageProxy = { url: "", outage: undefined, failed: 0, stop: async () => {} };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readAll(req);
      const charge = req.method === "POST" && req.url?.startsWith("/v1/payment_intents");
      const lost = charge && proxy.outage === "answer-lost";
      if (proxy.outage && !lost && charge) {
        proxy.failed++;
        if (proxy.outage === "unreachable") return void req.socket.destroy();
        if (proxy.outage === "401") {
          res.writeHead(401, { "content-type": "application/json" });
          return void res.end(JSON.stringify({ error: { type: "invalid_request_error", message: "Invalid API Key provided: sk_test_****oked" } }));
        }
        res.writeHead(503, { "content-type": "application/json" });
        return void res.end(JSON.stringify({ error: { type: "api_error", message: "Stripe is unavailable." } }));
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) headers[k] = v;
      const out = await fetch(`${target}${req.url}`, { method: req.method, headers, body: req.method === "GET" ? undefined : new Uint8Array(body) });
      const answer = Buffer.from(await out.arrayBuffer());
      if (lost) {
        proxy.failed++;
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
  proxy.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  proxy.stop = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return proxy;
}
