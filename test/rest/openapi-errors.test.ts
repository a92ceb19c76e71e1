/**
 * Every status the server answers an operation with is declared for that operation in
 * openapi/openapi.json, and its body matches the declared error schema. Against the real server,
 * each REST operation (from the bridge's own route table) is sent the error cases that apply to
 * any operation of its kind: no key, an unknown key, a publishable key, unknown ids in the path,
 * a body that is no JSON, bad paging values, a declared Content-Length over the method's bound,
 * a compressed body; then the documented cases that need a valid request naming an unknown
 * resource (NOT_FOUND for a subject, rate card, event…) or a conflict (ALREADY_EXISTS).
 */
import { request } from "node:http";
import test from "ava";
import { loadOpenApi } from "../../src/pages/docs.js";
import { REST_ONLY, restOnlyRoute } from "../../src/openapi/rest-only.js";
import { buildRoutes } from "../../src/rest/gateway.js";
import { restServices } from "../../src/rpc/routes.js";
import { ok, rest } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { responseValidator } from "../helpers/openapi.js";
import { useServer } from "../helpers/server.js";

/** A request that declares `length` body bytes and sends none (the server refuses it unread). */
function declaring(url: string, method: string, path: string, key: string, length: number): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers: { "x-api-key": key, "content-type": "application/json", "content-length": String(length) } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("error", reject);
    req.flushHeaders();
  });
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: every status an operation answers its error cases with is declared for it`, async (t) => {
    const validator = responseValidator(loadOpenApi());
    const problems: string[] = [];
    const answered = new Map<string, Set<number>>();
    const record = (method: string, path: string, status: number, body: unknown, expect?: number) => {
      const { operation, problems: found } = validator.check(method, path, status, body);
      for (const p of found) problems.push(`${method} ${path} → ${status}: ${p}`);
      if (expect !== undefined && status !== expect) problems.push(`${method} ${path}: expected ${expect}, got ${status} ${JSON.stringify(body)}`);
      if (status !== 200) answered.set(operation, new Set([...(answered.get(operation) ?? []), status]));
    };
    const send = async (method: string, path: string, key: string | undefined, body?: unknown, expect?: number) => {
      const r = await rest(server.url, method, path, key, body);
      record(method, path, r.status, r.body, expect);
      return r;
    };

    const key = await server.freshKey("test");
    const publishable = server.keys.aPublishable;
    const subject = await ok(server, key, "POST", "/subjects", { name: "Known", external_id: "known" });
    const metric = await ok(server, key, "POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "count" } });
    const card = await ok(server, key, "POST", "/rate-cards", {
      name: "Card",
      billing_interval: "monthly",
      fixed_rates: [{ code: "base", name: "Base", price: { amount: { currency_code: "USD", value: "10" } } }],
    });
    const endpoint = await ok(server, key, "POST", "/webhook-endpoints", { url: "https://hooks.example.com/x" });
    await ok(server, key, "POST", "/usage-events", { idempotency_key: "k1", subject_id: subject.id, event_name: "api", data: {} });

    // What applies to every operation of its kind.
    for (const route of [...buildRoutes(restServices), ...REST_ONLY.map(restOnlyRoute)]) {
      const method = route.httpMethod;
      const path = route.template.replace(/\{[^}]+\}/g, "missing_id");
      const body = route.body === "" ? undefined : {};
      await send(method, path, undefined, body);
      await send(method, path, "sk_test_unknown", body);
      await send(method, path, publishable, body);
      await send(method, path, key, body); // unknown ids in the path (404), or bad input (400)
      if (route.body !== "") {
        await send(method, path, key, "{not json");
        const r = await fetch(`${server.url}${path}`, { method, headers: { "x-api-key": key, "content-type": "application/json", "content-encoding": "gzip" }, body: "{}" });
        record(method, path, r.status, await r.json(), 415);
      }
      if (route.method.input.fields.some((f) => f.name === "limit")) await send(method, `${path}?limit=0`, key, body, 400);
      const big = await declaring(server.url, method, path, key, 64 * 1024 * 1024);
      record(method, path, big.status, big.body, 413);
    }

    // The documented cases of a valid request that names an unknown resource, or conflicts.
    const event = (over: object) => ({ idempotency_key: "k2", subject_id: subject.id, event_name: "api", data: {}, ...over });
    await send("POST", "/usage-events", key, event({ subject_id: "subj_nobody" }), 404);
    await send("POST", "/usage-events", key, event({ idempotency_key: "k1", data: { other: 1 } }), 409);
    await send("GET", "/subscriptions?subject_id=subj_nobody", key, undefined, 404);
    await send("GET", "/invoices?subject_id=subj_nobody", key, undefined, 404);
    await send("POST", "/subjects", key, { name: "Again", external_id: "known" }, 409);
    await send("POST", "/subscriptions", key, { subject_id: "subj_nobody", rate_card_id: card.id, fixed_rate_quantities: { base: 1 } }, 404);
    await send("POST", "/subscriptions", key, { subject_id: subject.id, rate_card_id: "rc_nobody" }, 404);
    await send("POST", "/subscription-timelines", key, { subject_id: subject.id, rate_card_id: "rc_nobody" }, 404);
    const callbacks = { checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/no" } };
    await send("POST", "/checkout", key, { subject_id: "subj_nobody", rate_card_id: card.id, ...callbacks }, 404);
    await send("POST", "/customer-portal/sessions", key, { subject_id: "subj_nobody", return_url: "https://app.example/account" }, 404);
    const period = { start: "2026-01-01T00:00:00Z", end: "2026-02-01T00:00:00Z" };
    await send("POST", `/pricing-metrics/${metric.id}/summary`, key, { subject_id: "subj_nobody", period }, 404);
    await send("GET", "/events?after=evt_nobody", key, undefined, 404);
    await send("POST", `/webhook-endpoints/${endpoint.id}/replay`, key, { event_id: "evt_nobody" }, 404);
    await send("GET", `/customer-access/subj_nobody/billing-state`, publishable, undefined, 404);
    // Stripe's webhooks (rest-only.ts REST_ONLY_CALLBACKS, no key): an environment not on Stripe is a 400 with the route's own body.
    const hook = await fetch(`${server.url}/providers/stripe/webhooks/env_nobody`, { method: "POST", headers: { "content-type": "application/json", "stripe-signature": "t=1,v1=x" }, body: "{}" });
    record("POST", "/providers/stripe/webhooks/env_nobody", hook.status, await hook.json(), 400);

    t.deepEqual(problems, []);
    // Every operation was sent its error cases and answered with at least one error.
    t.deepEqual(
      validator.operations().filter((op) => !answered.has(op)),
      [],
    );
    const statuses = new Set([...answered.values()].flatMap((s) => [...s]));
    for (const s of [400, 401, 403, 404, 409, 413, 415]) t.true(statuses.has(s), `some operation answered ${s}`);
  });
}
