/**
 * What the fake Stripe serves that Stripe does not:
 *
 * The checkout page (the session's `url`): `GET /checkout/{session}` lists the test cards;
 * `POST /checkout/{session}` with `card=<token or number>` completes the session as the customer
 * would (setup mode: PaymentMethod created and attached, SetupIntent succeeded; payment mode: the
 * PaymentIntent succeeded with that card; webhooks sent) and redirects
 * (303) to the session's `success_url`, `{CHECKOUT_SESSION_ID}` filled in; `cancel=1` redirects
 * to `cancel_url`.
 *
 * The control API (JSON, no key), for tests that drive the fake over HTTP:
 *   POST /__test/checkout/sessions/{id}/complete   {"card": "4242424242424242"}
 *   POST /__test/payment_intents/{id}/authenticate
 *   POST /__test/webhook                           {"url", "secret", "twice"?, "out_of_order"?, "bad_signature"?}
 *   POST /__test/webhook/release                   sends the events held by out_of_order, newest first
 *   GET  /__test/payment_intents | /__test/events | /__test/deliveries | /__test/requests | /__test/drift | /__test/invalid_requests
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { TEST_CARDS } from "./cards.js";
import type { FakeStripe } from "./fake-stripe.js";
import { StripeFail } from "./objects.js";

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function json(res: ServerResponse, status: number, value: unknown) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(value, null, 2));
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export async function handleCheckoutPage(fake: FakeStripe, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  const id = decodeURIComponent(url.pathname.slice("/checkout/".length));
  const session = fake.state.sessions.get(id);
  if (!session) return json(res, 404, { error: { type: "invalid_request_error", message: `No such checkout.session: '${id}'` } });
  if (req.method === "POST") {
    const form = new URLSearchParams(await body(req));
    if (form.get("cancel")) {
      res.writeHead(303, { location: session.cancel_url ?? session.success_url });
      return void res.end();
    }
    await fake.completeCheckout(id, form.get("card") ?? "pm_card_visa");
    res.writeHead(303, { location: String(session.success_url).replaceAll("{CHECKOUT_SESSION_ID}", id) });
    return void res.end();
  }
  const cards = TEST_CARDS.map((c) => `<li><button name="card" value="${c.token}">${esc(c.brand)} ${c.number.replace(/(\d{4})/g, "$1 ").trim()}</button></li>`).join("");
  const state = session.status === "open" ? `<form method="post"><ul>${cards}</ul><button name="cancel" value="1">Cancel</button></form>` : `<p>This session is ${esc(session.status)}.</p>`;
  res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
  res.end(
    `<!doctype html><title>Fake Stripe Checkout</title><h1>${session.mode === "payment" ? `Pay ${esc(String(session.amount_total))} ${esc(String(session.currency))}` : "Save a card"} (fake Stripe, ${esc(session.mode)} mode)</h1><p>Session ${esc(id)}</p>${state}`,
  );
}

export async function controlRoute(fake: FakeStripe, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  const p = url.pathname;
  const method = req.method ?? "GET";
  try {
    if (method === "GET") {
      const lists: Record<string, () => unknown> = {
        "/__test/payment_intents": fake.paymentIntents,
        "/__test/events": fake.events,
        "/__test/deliveries": fake.deliveries,
        "/__test/requests": fake.requests,
        "/__test/drift": fake.drift,
        "/__test/invalid_requests": fake.invalidRequests,
      };
      const list = lists[p];
      if (list) return json(res, 200, list());
    }
    if (method === "POST") {
      const raw = await body(req);
      const args = (raw ? JSON.parse(raw) : {}) as Record<string, unknown>;
      let m = p.match(/^\/__test\/checkout\/sessions\/([^/]+)\/complete$/);
      if (m) return json(res, 200, await fake.completeCheckout(decodeURIComponent(m[1] as string), String(args.card ?? "pm_card_visa")));
      m = p.match(/^\/__test\/payment_intents\/([^/]+)\/authenticate$/);
      if (m) return json(res, 200, await fake.completeAuthentication(decodeURIComponent(m[1] as string)));
      if (p === "/__test/webhook") {
        fake.setWebhook(String(args.url), String(args.secret));
        fake.webhookOptions({ twice: args.twice === true, outOfOrder: args.out_of_order === true, badSignature: args.bad_signature === true });
        return json(res, 200, { ok: true });
      }
      if (p === "/__test/webhook/release") {
        await fake.releaseHeld();
        return json(res, 200, { ok: true });
      }
    }
    json(res, 404, { error: { type: "invalid_request_error", message: `fake stripe: no such page or control route: ${method} ${p}` } });
  } catch (e) {
    if (e instanceof StripeFail) return json(res, e.status, { error: e.error });
    json(res, 400, { error: { type: "invalid_request_error", message: (e as Error).message } });
  }
}
