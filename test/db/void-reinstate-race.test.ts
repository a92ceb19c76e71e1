/**
 * DESIGN §14: voiding an invoice gives back the credit it spent once, whatever runs at the same
 * time. On MariaDB, eight servers (each its own connection pool) void one open invoice that a
 * 5,000 grant paid 5,000 of (8,000 total, the charge failed): one void moves it and reinstates the
 * 5,000, the others are refused INVOICE_NOT_OPEN, and the ledger has one reinstatement. Then the
 * database alone: eight transactions that reinstate another invoice's applications at once,
 * without any status move first: the ledger's unique key lets one commit, the others are refused
 * CREDIT_MOVEMENT_EXISTS and change nothing.
 */
import { AlreadyExistsError, FailedPreconditionError } from "../../src/billing/errors.js";
import type { Invoice } from "../../src/billing/subscriptions/types.js";
import { createDatabase } from "../../src/db/datasource.js";
import { buildServices } from "../../src/wiring/services.js";
import { seats } from "../helpers/catalog-bodies.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { money } from "../helpers/price-bodies.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const SERVERS = 8;

/** Subscribed Jan 15 at 8,000 a month with a card whose charges fail, 5,000 granted, then Feb 15: its open invoice (5,000 applied, 3,000 due). */
async function openInvoice(s: Scenario): Promise<Json> {
  const card = await s.card({ fixed_rates: [seats(8000)] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER);
  await s.call("POST", "/credit-grants", { subject_id: s.subjectId, category: "promotional", amount: money(5000) });
  await s.advance("2026-02-15T00:00:00Z");
  return (await s.invoices()).at(-1) as Json;
}

const ledgerOf = async (s: Scenario): Promise<[string, string][]> =>
  ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);

mysqlOnly("mysql: eight voids of one invoice at once from eight servers reinstate its credit once", async (t) => {
  const server = await startTestServer("mysql");
  const runners = await Promise.all(Array.from({ length: SERVERS }, () => createDatabase(server.db.url, { poolSize: 4 })));
  t.teardown(async () => {
    await Promise.all(runners.map((r) => r.dataSource.destroy().catch(() => undefined)));
    await server.stop();
  });
  await Promise.all(runners.map((db) => db.dataSource.initialize()));
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const inv = await openInvoice(s);
  t.deepEqual([inv.status, inv.amount_due.value], ["open", "3000"]);
  const envOf = async (invoiceId: string): Promise<string> => {
    const rows = (await (runners[0] as (typeof runners)[number]).dataSource.query("SELECT environment_id AS e FROM invoices WHERE id = ?", [invoiceId])) as { e: string }[];
    return rows[0]?.e as string;
  };
  const caller = { environmentId: await envOf(inv.id), mode: "test" as const, keyKind: "secret" as const };
  const services = runners.map((db) =>
    buildServices(
      db,
      () => "http://localhost",
      () => new Date(),
    ),
  );

  const results = await Promise.all(services.map((x) => x.invoices.setInvoiceStatus(caller, inv.id, "void").catch((err: unknown) => err)));
  const moved = results.filter((r): r is Invoice => !(r instanceof Error));
  const refused = results.filter((r) => r instanceof Error);
  t.is(moved.length, 1);
  t.is(refused.length, SERVERS - 1);
  for (const err of refused) {
    t.true(err instanceof FailedPreconditionError, String(err));
    t.is((err as FailedPreconditionError).reason, "INVOICE_NOT_OPEN");
  }
  t.deepEqual(await ledgerOf(s), [
    ["grant", "5000"],
    ["application", "-5000"],
    ["reinstatement", "5000"],
  ]);
  const [g] = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
  t.deepEqual([g?.status, g?.remaining_amount.value], ["active", "5000"]);

  // The database alone: reinstatements of another subject's open invoice, no status move first.
  const o = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const other = await openInvoice(o);
  const environmentId = await envOf(other.id);
  const at = new Date("2026-02-15T00:00:00Z");
  const direct = await Promise.all(
    services.map((x) =>
      x.engine.stores
        .transaction(async (tx) => {
          if (!tx.credits?.reinstate) throw new Error("the SQL store reinstates credit");
          return tx.credits.reinstate(environmentId, o.subjectId, other.id, at);
        })
        .catch((err: unknown) => err),
    ),
  );
  const done = direct.filter((r): r is unknown[] => !(r instanceof Error));
  const duplicates = direct.filter((r) => r instanceof Error);
  t.deepEqual(
    done.map((entries) => entries.length),
    [1],
  );
  for (const err of duplicates) {
    t.true(err instanceof AlreadyExistsError, String(err));
    t.is((err as AlreadyExistsError).reason, "CREDIT_MOVEMENT_EXISTS");
  }
  t.deepEqual(await ledgerOf(o), [
    ["grant", "5000"],
    ["application", "-5000"],
    ["reinstatement", "5000"],
  ]);
  const [h] = (await o.call("GET", `/credit-grants?subject_id=${o.subjectId}`)).credit_grants as Json[];
  t.deepEqual([h?.status, h?.remaining_amount.value], ["active", "5000"]);
});
