/**
 * Webhook endpoint URLs that reach this service's own network (issue 30, item 2), through the real
 * server on a port, on MariaDB and SQLite: every spelling of a loopback, private, link-local or
 * metadata address is refused when an endpoint is created or updated (400 invalid_argument naming
 * `url`, nothing saved); and an endpoint saved while WEBHOOK_ALLOW_PRIVATE_HOSTS=true, whose URL
 * reaches a receiver on 127.0.0.1 by an IPv6 or numeric spelling, gets no request through once the
 * switch is off: each attempt is logged with the reason and no response.
 */
import test from "ava";
import { rest, violatedFields } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { startReceiver } from "../helpers/receiver.js";
import { seedKeys, startAppOn, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";
import { ALLOWED_URLS, REFUSED_URLS } from "../helpers/webhook-urls.js";

for (const store of STORES) {
  test.serial(`${store}: ${REFUSED_URLS.length} private spellings are refused on create and on update, naming url; public ones are saved`, async (t) => {
    const server = await startTestServer(store, { PUBLIC_BASE_URL: "https://billing.example.com" });
    try {
      const key = await server.freshKey();
      const kept = (await rest(server.url, "POST", "/webhook-endpoints", key, { url: "https://hooks.example.org/kept" })).body;
      for (const url of [...REFUSED_URLS, "https://billing.example.com./hook", "https://BILLING.example.com:443/hook"]) {
        const created = await rest(server.url, "POST", "/webhook-endpoints", key, { url });
        t.is(created.status, 400, `create ${url}`);
        t.is(created.body.code, "invalid_argument", `create ${url}`);
        t.deepEqual(violatedFields(created.body), ["url"], `create ${url}`);
        const updated = await rest(server.url, "PUT", `/webhook-endpoints/${kept.id}`, key, { url });
        t.is(updated.status, 400, `update ${url}`);
        t.deepEqual(violatedFields(updated.body), ["url"], `update ${url}`);
      }
      const list = (await rest(server.url, "GET", "/webhook-endpoints?limit=100", key)).body;
      t.deepEqual(
        list.webhook_endpoints.map((e: Json) => e.url),
        ["https://hooks.example.org/kept"],
        "nothing was created and the kept endpoint's URL is unchanged",
      );
      for (const url of ALLOWED_URLS) t.is((await rest(server.url, "POST", "/webhook-endpoints", key, { url })).status, 200, url);
    } finally {
      await server.stop();
    }
  });

  test.serial(`${store}: endpoints saved while private hosts were allowed deliver nothing to 127.0.0.1 once they are not; the log says why`, async (t) => {
    const db = await createTestDatabase(store);
    const seeded = await seedKeys(db.url);
    const receiver = await startReceiver();
    try {
      const port = new URL(receiver.url).port;
      const urls = ["[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]", "2130706433", "127.1", "localhost."].map((h) => `http://${h}:${port}/hook`);
      const key = await seeded.freshKey();
      // Saved by a server that allows private hosts and delivers nothing itself.
      const permissive = await startAppOn(db.url, { WEBHOOK_ALLOW_PRIVATE_HOSTS: "true", WEBHOOK_DELIVERY_INTERVAL_MS: "0" });
      const ids: string[] = [];
      try {
        for (const url of urls) {
          const r = await rest(permissive.url, "POST", "/webhook-endpoints", key, { url, event_types: ["subject.created"] });
          t.is(r.status, 200, url);
          ids.push(r.body.id);
        }
        t.is((await rest(permissive.url, "POST", "/subjects", key, { name: "Probe" })).status, 200);
      } finally {
        await permissive.stop();
      }
      // Delivered by a server with the default rule.
      const strict = await startAppOn(db.url, { WEBHOOK_DELIVERY_INTERVAL_MS: "50", WEBHOOK_RETRY_BASE_MS: "100", WEBHOOK_RETRY_WINDOW_SECONDS: "2", WEBHOOK_TIMEOUT_MS: "2000" });
      try {
        const attemptsOf = async (id: string): Promise<Json[]> => (await rest(strict.url, "GET", `/webhook-endpoints/${id}/attempts`, key)).body.attempts;
        for (const [i, id] of ids.entries()) {
          let attempts = await attemptsOf(id);
          for (let n = 0; attempts.length === 0; n++) {
            if (n > 600) throw new Error(`no attempt logged for ${urls[i]}`);
            await new Promise((r) => setTimeout(r, 50));
            attempts = await attemptsOf(id);
          }
          for (const a of attempts) {
            t.like(a, { succeeded: false, status_code: null, response_excerpt: null }, urls[i]);
            t.regex(a.error, /^not sent: .*(loopback|WEBHOOK_ALLOW_PRIVATE_HOSTS)/, urls[i]);
          }
        }
        t.is(receiver.received.length, 0, "the receiver on 127.0.0.1 saw no request");
      } finally {
        await strict.stop();
      }
    } finally {
      await receiver.close();
      await seeded.close();
      await db.drop();
    }
  });
}
