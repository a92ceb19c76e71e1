/**
 * DESIGN §15: invoice numbers are gapless and unique under concurrency. Fifty drafts of fifty
 * subjects are finalized at once through POST /invoices/{id}/finalize, split between two servers
 * (two app instances, each with its own connection pool, on one database): they end up numbered
 * INV-000001 … INV-000050, each number once, none skipped; the environment's next number is 51.
 * Likewise fifty subscriptions created at once (final at once: each opens with a numbered invoice).
 * On MariaDB (the race that matters: two servers, row locks), and on SQLite as well (two apps on
 * one file).
 */
import test from "ava";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { rest } from "../helpers/clients.js";
import { STORES, type Store } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { startAppOn, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const SUBJECTS = 50;

async function race(t: import("ava").ExecutionContext, store: Store): Promise<void> {
  const server = await startTestServer(store);
  const second = await startAppOn(server.db.url);
  try {
    // Given fifty subjects on one usage card, each with usage, and a month later fifty drafts.
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    const m = await s.metric();
    const card = await s.card({ usage_based_rates: [simple(m, usd(100))] });
    const subjects: string[] = [];
    for (let i = 0; i < SUBJECTS; i++) {
      const id = (await s.call("POST", "/subjects", { name: `Race ${i}`, test_clock_id: s.clockId })).id as string;
      await s.call("POST", "/subscriptions", { subject_id: id, rate_card_id: card });
      subjects.push(id);
    }
    const events = subjects.map((id, i) => ({ idempotency_key: `race-${i}`, subject_id: id, event_name: "usage", timestamp: "2026-01-20T00:00:00Z", data: { n: String(i + 1) } }));
    t.is((await s.call("POST", "/usage-events/batch", { events })).rejected, 0);
    await s.advance("2026-02-15T00:00:00Z");
    const drafts = ((await s.call("GET", "/invoices?status=draft&limit=100")).invoices as Json[]).filter((i) => i.line_items.length > 0);
    t.is(drafts.length, SUBJECTS);
    t.deepEqual(
      (await s.call("GET", "/invoices?limit=100")).invoices.filter((i: Json) => i.number),
      [],
      "no invoice has a number yet",
    );

    // When every draft is finalized at once, every other one through the second server.
    const urls = [server.url, second.url];
    const results = await Promise.all(drafts.map((d, k) => rest(urls[k % 2] as string, "POST", `/invoices/${d.id}/finalize`, s.key, {})));
    t.deepEqual(
      results.filter((r) => r.status !== 200).map((r) => [r.status, r.body]),
      [],
    );

    // Then fifty numbers, consecutive from 1, each once; the invoices say so through either server.
    const numbers = results.map((r) => r.body.number as string).sort();
    t.deepEqual(numbers, numbersTo(SUBJECTS));
    const listed = ((await rest(second.url, "GET", "/invoices?status=open&limit=100", s.key)).body.invoices as Json[]).map((i) => i.number as string).sort();
    t.deepEqual(listed, numbers);
    const settings = await rest(server.url, "GET", "/invoice-settings", s.key);
    if (settings.status === 200) t.is(String(settings.body.next_invoice_sequence), String(SUBJECTS + 1));
  } finally {
    await second.stop();
    await server.stop();
  }
}

const numbersTo = (n: number) => Array.from({ length: n }, (_, i) => `INV-${String(i + 1).padStart(6, "0")}`);

/** Fifty subscriptions of one subject (its card on file) created at once from two servers, final at once. */
async function subscriptionsRace(t: import("ava").ExecutionContext, store: Store): Promise<void> {
  const server = await startTestServer(store);
  const second = await startAppOn(server.db.url);
  try {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const card = await s.card({ fixed_rates: [seats()] });
    // The first subscription's checkout puts a card on file (and is INV-000001); the others start at once.
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
    const urls = [server.url, second.url];
    const results = await Promise.all(
      Array.from({ length: SUBJECTS }, (_, k) => rest(urls[k % 2] as string, "POST", "/subscriptions", s.key, { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { seats: 1 } })),
    );
    t.deepEqual(
      results.filter((r) => r.status !== 200).map((r) => [r.status, r.body]),
      [],
    );
    const numbers = ((await s.call("GET", "/invoices?limit=100")).invoices as Json[]).map((i) => i.number as string).sort();
    t.deepEqual(numbers, numbersTo(SUBJECTS + 1));
  } finally {
    await second.stop();
    await server.stop();
  }
}

for (const store of STORES) {
  test(`${store}: fifty drafts finalized at once from two servers are numbered INV-000001 to INV-000050, no gap, no repeat`, (t) => race(t, store));
  test(`${store}: fifty subscriptions created at once from two servers open invoices numbered without gap or repeat`, (t) => subscriptionsRace(t, store));
}
