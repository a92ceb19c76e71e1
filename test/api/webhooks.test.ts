/**
 * Outgoing events and webhooks (DESIGN §10, issue 16) through the public API, on MariaDB and
 * SQLite, with a real HTTP receiver on a port: events of a billing lifecycle, signed; retries with
 * the same id and the delivery log; replay; the URL guard; WatchEvents resuming from a cursor; a
 * commit that wrote events wakes the delivery worker (no waiting for its poll).
 */
import { createHmac } from "node:crypto";
import test from "ava";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { EventService } from "../../src/gen/billing/v1/event_service_pb.js";
import { rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";
import { CARD_DECLINED, CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { startTestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** Fast retries (100 ms doubling, a 2 s window) so that a test sees retries run out. */
export const FAST = { WEBHOOK_ALLOW_PRIVATE_HOSTS: "true", WEBHOOK_DELIVERY_INTERVAL_MS: "50", WEBHOOK_RETRY_BASE_MS: "100", WEBHOOK_RETRY_WINDOW_SECONDS: "2", WEBHOOK_TIMEOUT_MS: "2000" };

/** The README's verification, as a receiver would write it. */
function verify(secret: string, header: string, body: string, toleranceSeconds = 300): boolean {
  const parts = Object.fromEntries(header.split(",").map((p) => p.split("=", 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isFinite(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = createHmac("sha256", secret).update(`${parts.t}.${body}`).digest("hex");
  return expected === parts.v1;
}

const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });

/** A request's headers as a receiver hands them to the standardwebhooks library. */
const headersOf = (r: { headers: Record<string, string | string[] | undefined> }): Record<string, string> =>
  Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : String(v)]));

for (const store of STORES) {
  const server = useServer(store, FAST);
  const receivers: Receiver[] = [];
  test.after.always(async () => {
    for (const r of receivers) await r.close();
  });
  const receiver = async () => {
    const r = await startReceiver();
    receivers.push(r);
    return r;
  };

  test.serial(`${store}: a billing lifecycle's events arrive signed, each with its resource as the API returns it`, async (t) => {
    const hook = await receiver();
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const ep = await s.call("POST", "/webhook-endpoints", { url: hook.url, description: "all events" });
    t.regex(ep.secret, /^whsec_/);
    t.is(ep.status, "enabled");
    t.deepEqual(ep.event_types, []);
    t.is(ep.failing_since, null);
    const got = await s.call("GET", `/webhook-endpoints/${ep.id}`);
    t.is(got.secret, null, "the secret is shown on create and rotate only");

    const subject = await s.call("POST", "/subjects", { name: "Ada", email: "ada@example.com", test_clock_id: s.clockId });
    await s.call("PUT", `/subjects/${subject.id}`, { name: "Ada L." });
    const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(1000) }] });
    s.subjectId = subject.id;
    const sub = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    t.is(sub.result_type, "success_after_checkout");
    const subscriptionId = sub.subscription.id;
    await s.call("POST", `/subscriptions/${subscriptionId}/cancel`, {});

    const want = [
      "subject.created",
      "subject.updated",
      "checkout.completed",
      "subscription.created",
      "subscription.activated",
      "invoice.created",
      "invoice.finalized",
      "invoice.paid",
      "subscription.cancelled",
    ];
    await hook.until((l) => want.every((w) => l.some((r) => r.json?.type === w && (w.startsWith("subject.") ? r.json.data.id === subject.id : true))));
    for (const r of hook.received) {
      t.true(verify(ep.secret, String(r.headers["billing-signature"]), r.body), "the signature verifies with the endpoint's secret");
      t.false(verify("whsec_wrong", String(r.headers["billing-signature"]), r.body));
      t.is(r.headers["billing-event-id"], r.json.id);
      t.regex(r.json.id, /^evt_/);
      t.is(r.json.mode, "test");
      t.truthy(Date.parse(r.json.created_at));
    }
    const byType = (type: string) => hook.received.filter((r) => r.json.type === type).map((r) => r.json);
    const created = byType("subject.created").find((e) => e.data.id === subject.id);
    t.deepEqual(created.data, subject, "subject.created carries the subject as POST /subjects returned it");
    t.is(byType("subject.updated")[0].data.name, "Ada L.");
    t.is(byType("subscription.created")[0].data.id, subscriptionId);
    t.is(byType("subscription.cancelled")[0].data.status, "cancelled");
    const paid = byType("invoice.paid")[0].data;
    t.is(paid.status, "paid");
    const invoice = await s.call("GET", `/invoices/${paid.id}`);
    t.deepEqual(paid, invoice, "invoice.paid carries the invoice as GET /invoices/{id} returns it");
    t.is(byType("checkout.completed")[0].data.status, "completed");

    // The same events are readable by REST, oldest first, by cursor.
    const page = await s.call("GET", "/events?types=subscription.created&types=subscription.cancelled");
    t.deepEqual(
      page.events.map((e: Json) => e.type),
      ["subscription.created", "subscription.cancelled"],
    );
    t.deepEqual(page.events[0].data, byType("subscription.created")[0].data, "GET /events gives data as the object the webhook carried");
    const one = await s.call("GET", `/events/${page.events[0].id}`);
    t.is(one.id, page.events[0].id);
    // And every delivery of the endpoint succeeded at its first attempt.
    const deliveries = await s.call("GET", `/webhook-endpoints/${ep.id}/deliveries?limit=100`);
    t.true(deliveries.deliveries.length >= want.length);
    t.true(deliveries.deliveries.every((d: Json) => d.status === "succeeded" && d.attempts === 1));
  });

  test.serial(`${store}: a commit that wrote events wakes this server's worker: with a poll of ten minutes, the events arrive anyway, each once`, async (t) => {
    const slow = await startTestServer(store, { ...FAST, WEBHOOK_DELIVERY_INTERVAL_MS: "600000" });
    try {
      const hook = await receiver();
      const key = await slow.freshKey();
      await rest(slow.url, "POST", "/webhook-endpoints", key, { url: hook.url, event_types: ["subject.created", "subject.updated"] });
      const subject = (await rest(slow.url, "POST", "/subjects", key, { name: "Woken" })).body;
      // Another path to the outbox: an update in a transaction of TypeORM's (not the pipelined create).
      await rest(slow.url, "PUT", `/subjects/${subject.id}`, key, { name: "Woken again" });
      const made = await Promise.all(Array.from({ length: 20 }, (_, i) => rest(slow.url, "POST", "/subjects", key, { name: `w${i}` })));
      await hook.until((l) => l.length >= 22, 60_000);
      await new Promise((r) => setTimeout(r, 300));
      t.is(hook.received.length, 22);
      t.deepEqual(
        hook.received.map((r) => `${r.json.type} ${r.json.data.id}`).sort(),
        [...[subject, ...made.map((m) => m.body)].map((b) => `subject.created ${b.id}`), `subject.updated ${subject.id}`].sort(),
      );
    } finally {
      await slow.stop();
    }
  });

  test.serial(`${store}: a receiver failing twice then succeeding gets the event three times with the same id, and the log shows it`, async (t) => {
    const hook = await receiver();
    hook.answer = (_, n) => (n <= 2 ? 500 : 200);
    const key = await server.freshKey();
    const ep = (await rest(server.url, "POST", "/webhook-endpoints", key, { url: hook.url, event_types: ["subject.created"] })).body;
    const subject = (await rest(server.url, "POST", "/subjects", key, { name: "Grace" })).body;
    await rest(server.url, "PUT", `/subjects/${subject.id}`, key, { name: "Grace H." }); // not a type it takes
    await hook.until((l) => l.length >= 3);
    await new Promise((r) => setTimeout(r, 300));
    t.is(hook.received.length, 3);
    t.deepEqual(
      hook.received.map((r) => r.json.id),
      Array(3).fill(hook.received[0]?.json.id),
    );
    t.true(hook.received.every((r) => r.json.type === "subject.created" && r.json.data.id === subject.id));
    const attempts = (await rest(server.url, "GET", `/webhook-endpoints/${ep.id}/attempts`, key)).body.attempts;
    t.deepEqual(
      attempts.map((a: Json) => [a.succeeded, a.status_code, a.event_id]),
      [
        [true, 200, hook.received[0]?.json.id],
        [false, 500, hook.received[0]?.json.id],
        [false, 500, hook.received[0]?.json.id],
      ],
    );
    t.is(attempts[1].response_excerpt, "failing with 500");
    t.true(attempts.every((a: Json) => typeof a.latency_ms === "number" && a.latency_ms >= 0));
    const [d] = (await rest(server.url, "GET", `/webhook-endpoints/${ep.id}/deliveries`, key)).body.deliveries;
    t.like(d, { status: "succeeded", attempts: 3, last_status_code: 200, last_error: null, event_type: "subject.created" });
  });

  test.serial(`${store}: retries run out: the delivery fails, the endpoint is marked failing; replay of one event and of all failed since a time`, async (t) => {
    const hook = await receiver();
    hook.answer = () => 503;
    const key = await server.freshKey();
    const ep = (await rest(server.url, "POST", "/webhook-endpoints", key, { url: hook.url })).body;
    const since = new Date().toISOString();
    const a = (await rest(server.url, "POST", "/subjects", key, { name: "A" })).body;
    const b = (await rest(server.url, "POST", "/subjects", key, { name: "B" })).body;
    const failed = async () => (await rest(server.url, "GET", `/webhook-endpoints/${ep.id}/deliveries?status=failed`, key)).body.deliveries;
    for (let i = 0; (await failed()).length < 2; i++) {
      if (i > 200) throw new Error("deliveries never failed");
      await new Promise((r) => setTimeout(r, 100));
    }
    const endpoint = (await rest(server.url, "GET", `/webhook-endpoints/${ep.id}`, key)).body;
    t.truthy(endpoint.failing_since, "the endpoint is marked failing");
    const tries = hook.received.length;
    t.true(tries >= 4, `each was retried (${tries} attempts)`);

    hook.answer = () => 200;
    // One event, by id.
    const eventOfA = hook.received.find((r) => r.json.data.id === a.id)?.json.id;
    const one = await rest(server.url, "POST", `/webhook-endpoints/${ep.id}/replay`, key, { event_id: eventOfA });
    t.deepEqual(one.body, { replayed: 1 });
    await hook.until((l) => l.length > tries);
    await hook.until((l) => l.slice(tries).some((r) => r.json.id === eventOfA));
    // All failed since a time: the other one.
    const all = await rest(server.url, "POST", `/webhook-endpoints/${ep.id}/replay`, key, { failed_since: since });
    t.deepEqual(all.body, { replayed: 1 });
    await hook.until((l) => l.slice(tries).some((r) => r.json.data.id === b.id));
    // Each replay is a new delivery (its own id); the failed ones stay in the log as they were.
    const replays = async () => (await rest(server.url, "GET", `/webhook-endpoints/${ep.id}/deliveries?status=succeeded`, key)).body.deliveries;
    for (let i = 0; (await replays()).length < 2; i++) {
      if (i > 200) throw new Error("the replays never succeeded");
      await new Promise((r) => setTimeout(r, 50));
    }
    const stillFailed = await failed();
    t.deepEqual(stillFailed.map((d: Json) => d.event_id).sort(), [eventOfA, hook.received.find((r) => r.json.data.id === b.id)?.json.id].sort());
    t.deepEqual((await replays()).map((d: Json) => d.event_id).sort(), stillFailed.map((d: Json) => d.event_id).sort());
    t.true(
      (await replays()).every((d: Json) => !stillFailed.some((f: Json) => f.id === d.id)),
      "a replay has its own delivery id",
    );
    const again = await rest(server.url, "POST", `/webhook-endpoints/${ep.id}/replay`, key, { failed_since: since });
    t.deepEqual(again.body, { replayed: 0 }, "a failed delivery already replayed is not replayed again by failed_since");
    const healed = (await rest(server.url, "GET", `/webhook-endpoints/${ep.id}`, key)).body;
    t.is(healed.failing_since, null, "a success clears failing");
    // Neither or both: a 400.
    const bad = await rest(server.url, "POST", `/webhook-endpoints/${ep.id}/replay`, key, {});
    t.is(bad.status, 400);
    const unknown = await rest(server.url, "POST", `/webhook-endpoints/${ep.id}/replay`, key, { event_id: "evt_nope" });
    t.is(unknown.status, 404);
  });

  test.serial(`${store}: Standard Webhooks: each delivery verifies with the standardwebhooks library and the secret the API gave; a tampered body, another id or another secret fails`, async (t) => {
    const hook = await receiver();
    const key = await server.freshKey();
    const ep = (await rest(server.url, "POST", "/webhook-endpoints", key, { url: hook.url, event_types: ["subject.created", "subject.updated"] })).body;
    const other = (await rest(server.url, "POST", "/webhook-endpoints", key, { url: `${hook.url}/other`, event_types: ["subject.deleted"] })).body;
    const subject = (await rest(server.url, "POST", "/subjects", key, { name: "Ada", metadata: { plan: "pro" } })).body;
    await rest(server.url, "PUT", `/subjects/${subject.id}`, key, { name: "Ada L." });
    await hook.until((l) => l.length >= 2);
    const wh = new Webhook(ep.secret);
    for (const r of hook.received) {
      const h = headersOf(r);
      t.deepEqual(wh.verify(r.body, h), r.json, "verified with the endpoint's secret as the API gave it");
      t.is(h["webhook-id"], h["billing-delivery-id"], "webhook-id is the delivery's id");
      t.regex(h["webhook-id"] ?? "", /^whd_/);
      t.regex(h["webhook-timestamp"] ?? "", /^\d+$/);
      t.is(`t=${h["webhook-timestamp"]}`, (h["billing-signature"] ?? "").split(",")[0], "the attempt's time, in seconds, in both signatures");
      t.regex(h["webhook-signature"] ?? "", /^v1,[A-Za-z0-9+/]+={0,2}$/);
      t.true(verify(ep.secret, h["billing-signature"] ?? "", r.body), "Billing-Signature is still sent");
      t.throws(() => wh.verify(r.body.replace('"Ada', '"Eve'), h), { instanceOf: WebhookVerificationError }, "a tampered body fails");
      t.throws(() => new Webhook(other.secret).verify(r.body, h), { instanceOf: WebhookVerificationError }, "another endpoint's secret fails");
      t.throws(() => wh.verify(r.body, { ...h, "webhook-id": "whd_someotherdelivery000000" }), { instanceOf: WebhookVerificationError }, "the id is signed");
    }
    t.not(headersOf(hook.received[0] as never)["webhook-id"], headersOf(hook.received[1] as never)["webhook-id"]);

    // The events as GET /events, GetEvent and ListEvents give them: `data` is the object the webhook carried.
    const page = (await rest(server.url, "GET", "/events?types=subject.created&types=subject.updated", key)).body;
    t.is(page.events.length, 2);
    for (const e of page.events) {
      const sent = hook.received.find((r) => r.json.id === e.id)?.json;
      t.deepEqual(e, sent, "GET /events gives the event as the webhook body has it");
      t.deepEqual((await rest(server.url, "GET", `/events/${e.id}`, key)).body, sent);
      for (const protocol of ["grpc", "connect"] as const) {
        const client = rpcClient(EventService, server.url, protocol, key);
        t.deepEqual((await client.getEvent({ eventId: e.id })).event?.data, sent.data, `${protocol}: GetEvent`);
        const listed = (await client.listEvents({ types: [e.type] })).events.find((x) => x.id === e.id);
        t.deepEqual(listed?.data, sent.data, `${protocol}: ListEvents`);
      }
    }
    t.is(page.events[0].data.metadata.plan, "pro");
  });

  test.serial(`${store}: Standard Webhooks: a retried attempt keeps webhook-id, with a new timestamp and signature, and verifies`, async (t) => {
    const slow = await startTestServer(store, { ...FAST, WEBHOOK_RETRY_BASE_MS: "300", WEBHOOK_RETRY_WINDOW_SECONDS: "60" });
    try {
      const hook = await receiver();
      let first = 0;
      // Failing for 1.5 s: the retry that succeeds is at least a second after the first attempt.
      hook.answer = (r, n) => {
        if (n === 1) first = r.at;
        return r.at - first < 1500 ? 500 : 200;
      };
      const key = await slow.freshKey();
      const ep = (await rest(slow.url, "POST", "/webhook-endpoints", key, { url: hook.url, event_types: ["subject.created"] })).body;
      await rest(slow.url, "POST", "/subjects", key, { name: "Retried" });
      await hook.until((l) => l.some((r) => r.at - first >= 1500), 30_000);
      const all = hook.received.map(headersOf);
      t.true(all.length >= 2);
      const firstH = all[0] as Record<string, string>;
      const lastH = all.at(-1) as Record<string, string>;
      t.true(
        all.every((h) => h["webhook-id"] === firstH["webhook-id"]),
        "the same webhook-id on every attempt",
      );
      t.true(
        hook.received.every((r) => r.body === hook.received[0]?.body),
        "the same body",
      );
      t.true(Number(lastH["webhook-timestamp"]) > Number(firstH["webhook-timestamp"]), "the attempt's own time");
      t.not(lastH["webhook-signature"], firstH["webhook-signature"]);
      const wh = new Webhook(ep.secret);
      for (const [i, r] of hook.received.entries()) t.deepEqual(wh.verify(r.body, all[i] as Record<string, string>), r.json);
      // Another attempt's timestamp with this attempt's signature does not verify.
      t.throws(() => wh.verify(hook.received[0]?.body ?? "", { ...firstH, "webhook-timestamp": lastH["webhook-timestamp"] as string }), { instanceOf: WebhookVerificationError });
    } finally {
      await slow.stop();
    }
  });

  test.serial(`${store}: a replay of a delivered event is a new delivery: a new webhook-id, the same event`, async (t) => {
    const hook = await receiver();
    const key = await server.freshKey();
    const ep = (await rest(server.url, "POST", "/webhook-endpoints", key, { url: hook.url, event_types: ["subject.created"] })).body;
    await rest(server.url, "POST", "/subjects", key, { name: "Replayed" });
    await hook.until((l) => l.length === 1);
    const eventId = hook.received[0]?.json.id;
    const deliveries = async () => (await rest(server.url, "GET", `/webhook-endpoints/${ep.id}/deliveries?event_id=${eventId}`, key)).body.deliveries;
    for (let i = 0; (await deliveries())[0]?.status !== "succeeded"; i++) {
      if (i > 200) throw new Error("the delivery never succeeded");
      await new Promise((r) => setTimeout(r, 50));
    }
    for (let n = 2; n <= 3; n++) {
      t.deepEqual((await rest(server.url, "POST", `/webhook-endpoints/${ep.id}/replay`, key, { event_id: eventId })).body, { replayed: 1 });
      await hook.until((l) => l.length === n);
      for (let i = 0; (await deliveries()).some((d: Json) => d.status !== "succeeded"); i++) {
        if (i > 200) throw new Error("the replay never succeeded");
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const ids = hook.received.map((r) => headersOf(r)["webhook-id"]);
    t.is(new Set(ids).size, 3, "each replay has its own webhook-id");
    t.true(
      hook.received.every((r) => r.body === hook.received[0]?.body),
      "the same event, byte for byte",
    );
    const wh = new Webhook(ep.secret);
    for (const r of hook.received) t.deepEqual(wh.verify(r.body, headersOf(r)), r.json);
    const log = await deliveries();
    t.deepEqual(
      log.map((d: Json) => d.id),
      [...ids].reverse(),
      "the delivery log lists the three deliveries of the event, newest first",
    );
    t.true(log.every((d: Json) => d.status === "succeeded" && d.attempts === 1 && d.event_id === eventId));
  });

  test.serial(`${store}: endpoints: update, filter, disable, rotate, delete, validation`, async (t) => {
    const hook = await receiver();
    const key = await server.freshKey();
    const bad = await rest(server.url, "POST", "/webhook-endpoints", key, { url: "ftp://x", event_types: ["nope.happened"] });
    t.is(bad.status, 400);
    t.deepEqual(violatedFields(bad.body).sort(), ["event_types[0]", "url"]);
    const ep = (await rest(server.url, "POST", "/webhook-endpoints", key, { url: hook.url, event_types: ["subject.deleted"] })).body;
    const rotated = (await rest(server.url, "POST", `/webhook-endpoints/${ep.id}/rotate-secret`, key, {})).body;
    t.regex(rotated.secret, /^whsec_/);
    t.not(rotated.secret, ep.secret);
    const disabled = (await rest(server.url, "PUT", `/webhook-endpoints/${ep.id}`, key, { status: "disabled", event_types: ["subject.created"] })).body;
    t.like(disabled, { status: "disabled", event_types: ["subject.created"], url: hook.url });
    await rest(server.url, "POST", "/subjects", key, { name: "held" });
    await new Promise((r) => setTimeout(r, 400));
    t.is(hook.received.length, 0, "a disabled endpoint gets nothing");
    await rest(server.url, "PUT", `/webhook-endpoints/${ep.id}`, key, { status: "enabled" });
    await hook.until((l) => l.length === 1);
    t.true(verify(rotated.secret, String(hook.received[0]?.headers["billing-signature"]), hook.received[0]?.body ?? ""), "signed with the rotated secret");
    const list = (await rest(server.url, "GET", "/webhook-endpoints", key)).body;
    t.is(list.webhook_endpoints.length, 1);
    t.false(list.has_more);
    t.deepEqual((await rest(server.url, "DELETE", `/webhook-endpoints/${ep.id}`, key)).body, { id: ep.id, deleted: true });
    t.is((await rest(server.url, "GET", `/webhook-endpoints/${ep.id}`, key)).status, 404);
    // Another environment's endpoints are not visible.
    const other = await server.freshKey();
    t.is((await rest(server.url, "GET", `/webhook-endpoints/${ep.id}`, other)).status, 404);
  });

  test.serial(`${store}: WatchEvents resumes from a cursor with nothing missed (gRPC and Connect)`, async (t) => {
    const key = await server.freshKey();
    for (const protocol of ["grpc", "connect"] as const) {
      const client = rpcClient(EventService, server.url, protocol, key);
      const ac = new AbortController();
      const first = client.watchEvents({ types: ["subject.created"] }, { signal: ac.signal });
      const it = first[Symbol.asyncIterator]();
      // Three subjects while connected; the stream gives them in order.
      const made: string[] = [];
      const reading = (async () => {
        const out: string[] = [];
        while (out.length < 3) {
          const n = await it.next();
          if (n.done) break;
          out.push(n.value.event?.id ?? "");
          t.is(n.value.event?.type, "subject.created");
        }
        return out;
      })();
      await new Promise((r) => setTimeout(r, 300)); // the stream starts "from now"
      for (let i = 0; i < 3; i++) made.push((await rest(server.url, "POST", "/subjects", key, { name: `${protocol}${i}` })).body.id);
      const seen = await reading;
      ac.abort();
      await it.return?.().catch(() => undefined);
      // Three more while disconnected.
      for (let i = 3; i < 6; i++) made.push((await rest(server.url, "POST", "/subjects", key, { name: `${protocol}${i}` })).body.id);
      const ac2 = new AbortController();
      const resumed: string[] = [];
      const subjects: string[] = [];
      for await (const m of client.watchEvents({ after: seen.at(-1) ?? "", types: ["subject.created"] }, { signal: ac2.signal })) {
        resumed.push(m.event?.id ?? "");
        subjects.push(String(m.event?.data?.id));
        if (resumed.length === 3) break;
      }
      ac2.abort();
      t.is(new Set([...seen, ...resumed]).size, 6);
      t.deepEqual(subjects, made.slice(3), `${protocol}: the three made while disconnected, in order`);
    }
  });

  test.serial(`${store}: the other events: a declined checkout, a failed payment, void, pause, resume, rate-card change`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const seats = (value: number) => ({ fixed_rates: [{ code: "seats", name: "Seats", price: usd(value) }] });
    const cheap = await s.card(seats(1000));
    const dear = await s.card(seats(3000));
    const declined = await s.subscribe({ rate_card_id: cheap, fixed_rate_quantities: { seats: 1 } }, CARD_DECLINED);
    t.is(declined.result_type, "declined");
    const sub = (await s.subscribe({ rate_card_id: cheap, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER)).subscription;
    const types = async () => (await s.call("GET", "/events?limit=100")).events.map((e: Json) => e.type);
    // The first invoice's charge is declined: it stays open, and can be voided.
    const [first] = await s.invoices();
    t.is(first.status, "open");
    await s.call("POST", `/invoices/${first.id}/void`, {});
    await s.call("POST", `/subscriptions/${sub.id}/pause`, {});
    await s.advance("2026-01-10T00:00:00Z");
    await s.call("POST", `/subscriptions/${sub.id}/resume`, {});
    await s.call("POST", `/subscriptions/${sub.id}/change-rate-card`, { rate_card_id: dear, upgrade_behavior: "prorate" });
    const seen = await types();
    for (const type of [
      "checkout.failed",
      "checkout.completed",
      "subscription.created",
      "invoice.created",
      "invoice.finalized",
      "invoice.payment_failed",
      "invoice.voided",
      "subscription.paused",
      "subscription.resumed",
      "subscription.rate_card_changed",
    ]) {
      t.true(seen.includes(type), `${type} in ${seen.join(", ")}`);
    }
    t.false(seen.includes("invoice.paid"), "nothing was paid");
    const events = (await s.call("GET", "/events?limit=100")).events;
    const data = (type: string) => events.find((e: Json) => e.type === type).data;
    t.is(data("checkout.failed").status, "open");
    t.truthy(data("checkout.failed").failure_message);
    t.is(data("invoice.voided").status, "void");
    t.is(data("subscription.paused").status, "paused");
    t.is(data("subscription.resumed").status, "active");
    t.is(data("subscription.rate_card_changed").rate_card_id, dear);
  });

  test.serial(`${store}: usage.threshold_crossed fires once per period and threshold (80% and 100% of included units)`, async (t) => {
    const s = await Scenario.start(server, "2026-01-01T00:00:00Z");
    const m = await s.metric();
    const card = await s.card({ usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: m, included_units: 100, price: usd("0.5") }] });
    const sub = (await s.subscribe({ rate_card_id: card })).subscription;
    const crossed = async () =>
      (await s.call("GET", "/events?types=usage.threshold_crossed&limit=100")).events.map((e: Json) => {
        const d = e.data;
        t.is(d.subscription_id, sub.id);
        t.is(d.rate_code, "api");
        t.is(d.included_units, "100");
        return [d.threshold_percent, d.period.start, d.used_units];
      });
    await s.events([["2026-01-02T00:00:00Z", "50"]]);
    await s.advance("2026-01-03T00:00:00Z");
    t.deepEqual(await crossed(), [], "50% crosses nothing");
    await s.events([["2026-01-03T00:00:00Z", "35"]]);
    await s.advance("2026-01-04T00:00:00Z");
    t.deepEqual(await crossed(), [[80, "2026-01-01T00:00:00Z", "85"]]);
    await s.events([["2026-01-04T00:00:00Z", "30"]]);
    await s.advance("2026-01-05T00:00:00Z");
    await s.events([["2026-01-05T00:00:00Z", "30"]]);
    await s.advance("2026-01-06T00:00:00Z");
    await s.advance("2026-01-07T00:00:00Z");
    t.deepEqual(await crossed(), [
      [80, "2026-01-01T00:00:00Z", "85"],
      [100, "2026-01-01T00:00:00Z", "115"],
    ]);
    // The next period starts afresh: 90% crosses 80% again, once.
    await s.advance("2026-02-02T00:00:00Z");
    await s.events([["2026-02-02T00:00:00Z", "90"]]);
    await s.advance("2026-02-03T00:00:00Z");
    await s.advance("2026-02-04T00:00:00Z");
    t.deepEqual(await crossed(), [
      [80, "2026-01-01T00:00:00Z", "85"],
      [100, "2026-01-01T00:00:00Z", "115"],
      [80, "2026-02-01T00:00:00Z", "90"],
    ]);
  });

  test.serial(`${store}: the URL guard refuses this service's own host and private addresses unless allowed`, async (t) => {
    const strict = await startTestServer(store, { PUBLIC_BASE_URL: "https://billing.example.com" });
    try {
      const key = await strict.freshKey();
      for (const url of ["http://127.0.0.1:9/hook", "http://localhost/x", "http://10.1.2.3/x", "http://169.254.169.254/latest", "https://billing.example.com/hook", "http://[::1]/x"]) {
        const r = await rest(strict.url, "POST", "/webhook-endpoints", key, { url });
        t.is(r.status, 400, url);
        t.deepEqual(violatedFields(r.body), ["url"], url);
      }
      t.is((await rest(strict.url, "POST", "/webhook-endpoints", key, { url: "https://hooks.example.org/billing" })).status, 200);
    } finally {
      await strict.stop();
    }
  });
}
