/**
 * Webhook endpoints and their deliveries against the delivery worker and other writes, on
 * MariaDB and SQLite (DESIGN §10, docs/guides/webhooks.md: "A disabled endpoint's deliveries are
 * held and sent when it is enabled again"):
 * - an attempt out while its endpoint is disabled records its failure and leaves the delivery
 *   held, and claimDue claims no delivery of a disabled endpoint;
 * - a rotate-secret whose read came before a disable does not enable the endpoint again or un-hold
 *   its deliveries; an update whose read came before the worker marked the endpoint failing keeps
 *   the mark;
 * - a replay of an event whose delivery a worker is sending leaves its lease alone: the attempt is
 *   recorded (succeeded), not dropped and sent again.
 */
import test from "ava";
import { WebhookEndpoints } from "../../src/billing/events/endpoints.js";
import type { AttemptOutcome, ClaimedDelivery, WebhookEndpoint, WebhookStore } from "../../src/billing/events/webhooks.js";
import { newId } from "../../src/billing/ids.js";
import type { Caller } from "../../src/billing/tenancy.js";
import type { Database } from "../../src/db/datasource.js";
import { dbTime } from "../../src/db/raw.js";
import { SqlAuthStore } from "../../src/db/stores/auth-store.js";
import { SqlWebhookStore } from "../../src/db/stores/webhook-store.js";
import { STORES, withMigratedDatabase } from "../helpers/db.js";

interface World {
  db: Database;
  store: SqlWebhookStore;
  endpoints: WebhookEndpoints;
  caller: Caller;
  endpoint: WebhookEndpoint;
}

async function world(db: Database): Promise<World> {
  const env = { id: newId("env"), name: newId("env"), mode: "test" as const, createdAt: new Date(Date.now() - 60_000) };
  await new SqlAuthStore(db.sql, db.entities).insertEnvironment(env);
  const store = new SqlWebhookStore(
    db.sql,
    db.entities,
    () => "{}",
    () => new Date(),
  );
  const endpoints = new WebhookEndpoints(
    store,
    () => undefined,
    () => new Date(),
  );
  const caller: Caller = { environmentId: env.id, mode: "test", keyKind: "secret" };
  const at = new Date(Date.now() - 30_000);
  const endpoint: WebhookEndpoint = {
    id: newId("we"),
    environmentId: env.id,
    url: "https://hooks.example.com/in",
    description: null,
    eventTypes: [],
    secret: "whsec_test",
    status: "enabled",
    failingSince: null,
    createdAt: at,
    updatedAt: at,
  };
  await store.insertEndpoint(endpoint);
  return { db, store, endpoints, caller, endpoint };
}

/** One event of the world's environment, marked for fan-out; its id. */
async function event(w: World): Promise<string> {
  const id = newId("evt");
  await w.db.sql.query("INSERT INTO events (id, environment_id, type, data, created_at, fanout) VALUES (?, ?, ?, ?, ?, 1)", [
    id,
    w.caller.environmentId,
    "subject.created",
    "{}",
    dbTime(new Date(Date.now() - 10_000)),
  ]);
  return id;
}

/** The event fanned out: its one delivery, claimed by this "worker" for a minute. */
async function claimed(w: World): Promise<ClaimedDelivery> {
  const { claims } = await w.store.fanOut(10, new Date(Date.now() + 60_000));
  if (claims.length !== 1) throw new Error(`expected one claim, got ${claims.length}`);
  return claims[0] as ClaimedDelivery;
}

function outcome(c: ClaimedDelivery, ok: boolean): AttemptOutcome {
  const at = new Date();
  return {
    status: ok ? "succeeded" : "pending",
    nextAttemptAt: ok ? null : new Date(at.getTime() - 1_000),
    attempt: {
      id: newId("wha"),
      deliveryId: c.id,
      endpointId: c.endpoint.id,
      eventId: c.event.id,
      attemptedAt: at,
      succeeded: ok,
      statusCode: ok ? 200 : 500,
      latencyMs: 5,
      responseExcerpt: null,
      error: ok ? null : "HTTP 500",
    },
  };
}

async function delivery(w: World): Promise<{ status: string; attempts: number; lease_token: string | null }> {
  const [d] = await w.db.sql.query<{ status: string; attempts: unknown; lease_token: string | null }[]>("SELECT status, attempts, lease_token FROM webhook_deliveries WHERE endpoint_id = ?", [
    w.endpoint.id,
  ]);
  if (!d) throw new Error("no delivery");
  return { status: d.status, attempts: Number(d.attempts), lease_token: d.lease_token };
}

const later = () => new Date(Date.now() + 3_600_000);

/** The world's store with `before` run once right after the endpoint's next read (an API call's read racing another write). */
function afterRead(w: World, before: () => Promise<void>): WebhookEndpoints {
  let armed = true;
  const racing = new Proxy(w.store, {
    get(target, prop, receiver) {
      if (prop === "getEndpoint")
        return async (environmentId: string, id: string) => {
          const e = await target.getEndpoint(environmentId, id);
          if (armed) {
            armed = false;
            await before();
          }
          return e;
        };
      const v = Reflect.get(target, prop, receiver);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as WebhookStore;
  return new WebhookEndpoints(
    racing,
    () => undefined,
    () => new Date(),
  );
}

for (const store of STORES) {
  test.serial(`${store}: an attempt out while its endpoint is disabled leaves the delivery held; claimDue takes no delivery of a disabled endpoint`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const w = await world(db);
      await event(w);
      const c = await claimed(w);
      await w.endpoints.update(w.caller, w.endpoint.id, { status: "disabled" });
      t.is((await delivery(w)).status, "held", "the disable holds the delivery");
      // The attempt that was out fails; it is recorded, and the delivery stays held.
      await w.store.recordAttempts([{ claim: c, outcome: outcome(c, false) }]);
      const d = await delivery(w);
      t.is(d.attempts, 1, "the attempt is recorded");
      t.is(d.status, "held", "held until the endpoint is enabled again");
      t.deepEqual(await w.store.claimDue(later(), 10, later()), [], "no retry to a disabled endpoint");

      // A pending delivery of a disabled endpoint (however it came to be) is not claimed either.
      await db.sql.query("UPDATE webhook_deliveries SET status = 'pending' WHERE endpoint_id = ?", [w.endpoint.id]);
      t.deepEqual(await w.store.claimDue(later(), 10, later()), [], "claimDue takes deliveries of enabled endpoints only");

      // Enabled again: it is sent.
      await w.endpoints.update(w.caller, w.endpoint.id, { status: "enabled" });
      t.is((await w.store.claimDue(later(), 10, later())).length, 1);
    });
  });

  test.serial(`${store}: a rotate-secret read before a disable neither enables the endpoint nor un-holds its deliveries`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const w = await world(db);
      await event(w);
      await claimed(w);
      const rotating = afterRead(w, async () => {
        await w.endpoints.update(w.caller, w.endpoint.id, { status: "disabled" });
      });
      const rotated = await rotating.rotateSecret(w.caller, w.endpoint.id);
      t.not(rotated.secret, w.endpoint.secret);
      const now = await w.endpoints.get(w.caller, w.endpoint.id);
      t.is(now.secret, rotated.secret, "the new secret is written");
      t.is(now.status, "disabled", "the disable made meanwhile stands");
      t.is(rotated.status, "disabled", "the answer shows the endpoint as it is");
      t.is((await delivery(w)).status, "held", "its delivery stays held");
      t.deepEqual(await w.store.claimDue(later(), 10, later()), []);
    });
  });

  test.serial(`${store}: an update read before the worker marked the endpoint failing keeps the mark`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const w = await world(db);
      await event(w);
      const c = await claimed(w);
      const updating = afterRead(w, async () => {
        // The worker's attempt runs out of retries meanwhile: the endpoint is failing.
        const o = outcome(c, false);
        await w.store.recordAttempts([{ claim: c, outcome: { ...o, status: "failed", nextAttemptAt: null } }]);
      });
      const updated = await updating.update(w.caller, w.endpoint.id, { description: "renamed" });
      const now = await w.endpoints.get(w.caller, w.endpoint.id);
      t.is(now.description, "renamed");
      t.not(now.failingSince, null, "the failing mark the worker set is kept");
      t.not(updated.failingSince, null);
      t.is(now.status, "enabled");
    });
  });

  test.serial(`${store}: a replay of an event whose delivery is being sent leaves the lease alone: the attempt is recorded, not dropped`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const w = await world(db);
      const eventId = await event(w);
      const c = await claimed(w);
      t.is(await w.endpoints.replay(w.caller, w.endpoint.id, { eventId, failedSince: undefined }), 1, "counted as due");
      t.is((await delivery(w)).lease_token, c.leaseToken, "the worker's lease stands");
      t.deepEqual(await w.store.claimDue(new Date(), 10, later()), [], "not claimed again while it is out");
      await w.store.recordAttempts([{ claim: c, outcome: outcome(c, true) }]);
      const d = await delivery(w);
      t.is(d.status, "succeeded", "the attempt's success is recorded");
      t.is(d.attempts, 1);
      const attempts = await db.sql.query<{ id: string }[]>("SELECT id FROM webhook_attempts WHERE endpoint_id = ?", [w.endpoint.id]);
      t.is(attempts.length, 1, "one attempt in the log");
      t.deepEqual(await w.store.claimDue(later(), 10, later()), [], "not sent again");
    });
  });
}
