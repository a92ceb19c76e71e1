/**
 * Admission by cost (DESIGN §10): bulk requests (usage-event batches, rate cards, catalogs) each
 * cost the server's one thread tens of milliseconds, so only MAX_BULK_REQUESTS_IN_FLIGHT of them
 * run at once; one more waits, unread, first come first served, for BULK_QUEUE_TIMEOUT_MS and is
 * then answered 503 `unavailable` / OVERLOADED with Retry-After, on REST, Connect and gRPC, while
 * cheap requests and single events go on being served; and the slot is free again once the bulk
 * request is answered or its client has gone.
 */
import net from "node:net";
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { RateCardService } from "../../src/gen/billing/v1/rate_card_service_pb.js";
import { UsageEventService } from "../../src/gen/billing/v1/usage_event_service_pb.js";
import { reasonOf, rest, rpcClient } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { startTestServer } from "../helpers/server.js";

/** A batch whose body is declared but not yet sent: it holds its bulk slot until the body ends. */
function heldBatch(port: number, key: string, body: string): { socket: net.Socket; answer(): string; finish(): Promise<string> } {
  const socket = net.connect(port, "127.0.0.1");
  const head = `POST /usage-events/batch HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nx-api-key: ${key}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
  socket.write(head + body.slice(0, 10));
  let answer = "";
  socket.on("data", (c: Buffer) => (answer += c.toString()));
  return {
    socket,
    answer: () => answer,
    finish: () =>
      new Promise((resolve) => {
        socket.write(body.slice(10));
        const check = () => (/\r\n\r\n[\s\S]*\}$/.test(answer) ? resolve(answer) : setTimeout(check, 10));
        check();
      }),
  };
}

const event = (key: string) => ({ idempotency_key: key, subject_id: "bulk-user", event_name: "usage", data: { n: "1" } });

/** The lane's own tests hold and probe it with one-event batches: there, every bulk request takes a slot. */
const EVERY_BULK_IN_LANE = { BULK_LANE_MIN_BYTES: "0" };

/** A batch body of at least `bytes` (events padded with a long dimension value), its first event keyed `key`. */
function bigBatch(key: string, bytes: number): string {
  const events = [];
  for (let i = 0; JSON.stringify({ events }).length < bytes; i++) events.push({ ...event(i === 0 ? key : `${key}-${i}`), data: { n: "1", pad: "x".repeat(900) } });
  return JSON.stringify({ events });
}

/**
 * A held batch that has the one bulk slot: a probe batch sent after it is refused while the held
 * one has no answer yet. (The probe can get in first and take the slot itself; then try again.)
 */
async function holdSlot(url: string, key: string, tag: string) {
  const port = Number(new URL(url).port);
  for (let attempt = 0; attempt < 50; attempt++) {
    const held = heldBatch(port, key, JSON.stringify({ events: [event(`${tag}-held-${attempt}`)] }));
    await new Promise((ok) => setTimeout(ok, 20 + attempt * 10));
    const probe = await rest(url, "POST", "/usage-events/batch", key, { events: [event(`${tag}-probe-${attempt}`)] });
    if (probe.status === 503 && held.answer() === "") return { held, refusal: probe, refusedKey: `${tag}-probe-${attempt}`, heldKey: `${tag}-held-${attempt}` };
    held.socket.destroy();
  }
  throw new Error("no held batch ever had the bulk slot");
}

for (const store of STORES) {
  test(`${store}: one bulk request more than MAX_BULK_REQUESTS_IN_FLIGHT is answered 503 at once on every protocol; others go on; the slot frees`, async (t) => {
    const server = await startTestServer(store, { MAX_BULK_REQUESTS_IN_FLIGHT: "1", BULK_QUEUE_TIMEOUT_MS: "0", ...EVERY_BULK_IN_LANE });
    const key = server.keys.a;
    const sockets: net.Socket[] = [];
    try {
      t.is((await rest(server.url, "POST", "/subjects", key, { name: "Bulk user", external_id: "bulk-user" })).status, 200);
      const first = await holdSlot(server.url, key, "first");
      const { held, refusal: r } = first;
      sockets.push(held.socket);
      t.is(r.status, 503);
      t.is(r.body.code, "unavailable");
      t.is(r.headers.get("retry-after"), "1");
      t.is(reasonOf(r.body), "OVERLOADED");
      t.regex(r.body.message, /bulk requests/);
      // A rate card is bulk too; over gRPC the refusal is UNAVAILABLE with retry-after.
      const cards = rpcClient(RateCardService, server.url, "grpc", key);
      const err = ConnectError.from(await t.throwsAsync(cards.createRateCard({ name: "Plan", billingInterval: "monthly" })));
      t.is(err.code, Code.Unavailable);
      t.is(err.metadata.get("retry-after"), "1");
      // Cheap requests and single events are not bulk: served meanwhile.
      t.is((await rest(server.url, "GET", "/subjects", key)).status, 200);
      t.is((await rest(server.url, "POST", "/usage-events", key, event("single-1"))).status, 200);
      const usage = rpcClient(UsageEventService, server.url, "connect", key);
      t.is((await usage.createUsageEvent({ idempotencyKey: "single-2", subjectId: "bulk-user", eventName: "usage", data: { n: "1" } })).status, "accepted");
      // The held batch ends and is answered; at once, its slot is free for the next.
      t.regex(await held.finish(), /^HTTP\/1\.1 200/);
      const after = await rest(server.url, "POST", "/usage-events/batch", key, { events: [event("after-1")] });
      t.is(after.status, 200, JSON.stringify(after.body));
      // A client that goes away mid-body frees its slot too.
      const gone = await holdSlot(server.url, key, "gone");
      sockets.push(gone.held.socket);
      gone.held.socket.destroy();
      let freed = await rest(server.url, "POST", "/usage-events/batch", key, { events: [event("freed-1")] });
      for (let i = 0; i < 100 && freed.status === 503; i++) {
        await new Promise((ok) => setTimeout(ok, 20));
        freed = await rest(server.url, "POST", "/usage-events/batch", key, { events: [event("freed-1")] });
      }
      t.is(freed.status, 200);
      // Every acknowledged event is stored once; nothing of a refused or abandoned batch is.
      const stored = await withDatabase(server.db.url, async (db) => (await db.dataSource.query("SELECT idempotency_key AS k FROM usage_events")) as { k: string }[]);
      const keys = stored.map((row) => row.k);
      t.is(new Set(keys).size, keys.length);
      for (const k of ["after-1", "freed-1", "single-1", "single-2", first.heldKey]) t.true(keys.includes(k), `${k} is stored`);
      for (const k of [first.refusedKey, gone.refusedKey, gone.heldKey]) t.false(keys.includes(k), `${k} is not stored`);
    } finally {
      for (const s of sockets) s.destroy();
      await server.stop();
    }
  });
}

for (const store of STORES) {
  test(`${store}: a bulk request over the bound waits its turn, first come first served, and is refused only after BULK_QUEUE_TIMEOUT_MS`, async (t) => {
    const server = await startTestServer(store, { MAX_BULK_REQUESTS_IN_FLIGHT: "1", BULK_QUEUE_TIMEOUT_MS: "60000", ...EVERY_BULK_IN_LANE });
    const port = Number(new URL(server.url).port);
    const key = server.keys.a;
    const sockets: net.Socket[] = [];
    try {
      t.is((await rest(server.url, "POST", "/subjects", key, { name: "Bulk user", external_id: "bulk-user" })).status, 200);
      const first = heldBatch(port, key, JSON.stringify({ events: [event("q-first")] }));
      sockets.push(first.socket);
      await new Promise((ok) => setTimeout(ok, 100));
      // Behind it: one that will leave while waiting, then one that stays.
      const leaver = heldBatch(port, key, JSON.stringify({ events: [event("q-leaver")] }));
      sockets.push(leaver.socket);
      await new Promise((ok) => setTimeout(ok, 100));
      let answered = false;
      const waiting = rest(server.url, "POST", "/usage-events/batch", key, { events: [event("q-waiting")] }).then((r) => {
        answered = true;
        return r;
      });
      await new Promise((ok) => setTimeout(ok, 300));
      t.false(answered, "the third batch waits while the first holds the slot");
      t.is(first.answer(), "", "the first is still waiting for the rest of its body");
      t.is((await rest(server.url, "GET", "/subjects", key)).status, 200, "cheap requests are served meanwhile");
      leaver.socket.destroy();
      t.regex(await first.finish(), /^HTTP\/1\.1 200/);
      const r = await waiting;
      t.is(r.status, 200, JSON.stringify(r.body));
      t.is(r.body.accepted, 1);
    } finally {
      for (const s of sockets) s.destroy();
      await server.stop();
    }
  });
}

test("sqlite: a bulk request that waits longer than BULK_QUEUE_TIMEOUT_MS is answered 503 with Retry-After", async (t) => {
  const server = await startTestServer("sqlite", { MAX_BULK_REQUESTS_IN_FLIGHT: "1", BULK_QUEUE_TIMEOUT_MS: "300", ...EVERY_BULK_IN_LANE });
  const port = Number(new URL(server.url).port);
  const key = server.keys.a;
  const first = heldBatch(port, key, JSON.stringify({ events: [event("t-first")] }));
  try {
    await new Promise((ok) => setTimeout(ok, 100));
    const r = await rest(server.url, "POST", "/usage-events/batch", key, { events: [event("t-second")] });
    t.is(r.status, 503);
    t.is(r.headers.get("retry-after"), "1");
    t.is(reasonOf(r.body), "OVERLOADED");
    t.is(first.answer(), "", "the first still holds the slot");
  } finally {
    first.socket.destroy();
    await server.stop();
  }
});

for (const store of STORES) {
  test(`${store}: a bulk request declaring a body under BULK_LANE_MIN_BYTES is not held behind large ones; a large one still is`, async (t) => {
    // The lane's bound at 16 KiB (the default): a one-event batch or a small rate card is a few
    // milliseconds of the thread, and would otherwise wait (or, past BULK_QUEUE_TIMEOUT_MS, be
    // refused) behind a 1,000-event batch.
    const server = await startTestServer(store, { MAX_BULK_REQUESTS_IN_FLIGHT: "1", BULK_QUEUE_TIMEOUT_MS: "0", BULK_LANE_MIN_BYTES: String(16 * 1024) });
    const port = Number(new URL(server.url).port);
    const key = server.keys.a;
    const sockets: net.Socket[] = [];
    try {
      t.is((await rest(server.url, "POST", "/subjects", key, { name: "Bulk user", external_id: "bulk-user" })).status, 200);
      // A 20 KB batch, its body declared and not yet sent, holds the one slot; a large batch
      // sent after it is refused. (The large one can get in first and take the slot itself; then
      // both go and the next attempt starts over.)
      let held: ReturnType<typeof heldBatch> | undefined;
      let heldKey = "";
      let refusedKey = "";
      for (let attempt = 0; attempt < 50 && !refusedKey; attempt++) {
        const h = heldBatch(port, key, bigBatch(`lane-held-${attempt}`, 20 * 1024));
        sockets.push(h.socket);
        await new Promise((ok) => setTimeout(ok, 20 + attempt * 10));
        const large = await rest(server.url, "POST", "/usage-events/batch", key, JSON.parse(bigBatch(`lane-large-${attempt}`, 20 * 1024)));
        if (large.status === 503 && h.answer() === "") {
          held = h;
          heldKey = `lane-held-${attempt}`;
          refusedKey = `lane-large-${attempt}`;
          t.is(reasonOf(large.body), "OVERLOADED");
        } else h.socket.destroy();
      }
      if (!held) throw new Error("no held batch ever had the bulk slot");
      t.is(held.answer(), "", "the held batch still has the slot");
      // Small bulk requests are served meanwhile, on REST and on Connect.
      const small = await rest(server.url, "POST", "/usage-events/batch", key, { events: [event("lane-small")] });
      t.is(small.status, 200, JSON.stringify(small.body));
      t.is(small.body.accepted, 1);
      const card = await rest(server.url, "POST", "/rate-cards", key, { name: "Small plan", billing_interval: "monthly" });
      t.is(card.status, 200, JSON.stringify(card.body));
      // Connect with its length declared (a plain POST): served. connect-es's own client sends its
      // body chunked, with no length to judge it by: it takes the lane like any unknown length.
      const viaConnect = await fetch(`${server.url}/billing.v1.UsageEventService/CreateUsageEventBatch`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key },
        body: JSON.stringify({ events: [{ idempotencyKey: "lane-small-connect", subjectId: "bulk-user", eventName: "usage", data: { n: "1" } }] }),
      });
      t.is(viaConnect.status, 200, await viaConnect.clone().text());
      t.is(((await viaConnect.json()) as { accepted: number }).accepted, 1);
      const usage = rpcClient(UsageEventService, server.url, "connect", key);
      const chunked = ConnectError.from(
        await t.throwsAsync(usage.createUsageEventBatch({ events: [{ idempotencyKey: "lane-chunked", subjectId: "bulk-user", eventName: "usage", data: { n: "1" } }] })),
      );
      t.is(chunked.code, Code.Unavailable);
      t.regex(await held.finish(), /^HTTP\/1\.1 200/);
      const stored = await withDatabase(server.db.url, async (db) => (await db.dataSource.query("SELECT idempotency_key AS k FROM usage_events")) as { k: string }[]);
      const keys = new Set(stored.map((row) => row.k));
      for (const k of [heldKey, "lane-small", "lane-small-connect"]) t.true(keys.has(k), `${k} is stored`);
      t.false(keys.has(refusedKey), "the refused large batch is not stored");
      t.false(keys.has("lane-chunked"), "nor the refused chunked one");
    } finally {
      for (const s of sockets) s.destroy();
      await server.stop();
    }
  });
}
