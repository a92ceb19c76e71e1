/**
 * DESIGN §15: the credit notes of an invoice never credit more than its total, whatever runs at
 * the same time. On MariaDB, eight servers (each its own connection pool) issue a credit note of
 * 40% of one paid invoice at once: exactly two are written (80%), the others are refused with
 * CREDIT_EXCEEDS_INVOICE, the numbers are gapless and amount_credited never passes the total.
 * Then the database alone: eight transactions that only raise amount_credited (no row lock
 * taken first) by 400 of a 1500 invoice: three succeed, the conditional UPDATE refuses the rest.
 */
import type { CreditNote } from "../../src/billing/credit-notes/types.js";
import { FailedPreconditionError } from "../../src/billing/errors.js";
import { createDatabase } from "../../src/db/datasource.js";
import { eventEncoder } from "../../src/rpc/event-payload.js";
import { SqlCreditNoteStore } from "../../src/db/stores/credit-note-store.js";
import { buildServices } from "../../src/wiring/services.js";
import { seats } from "../helpers/catalog-bodies.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const SERVERS = 8;

/** A paid invoice of 1500 (Seats 1000 + Support 500); the scenario and the invoice. */
async function paidInvoice(s: Scenario): Promise<Json> {
  const rc = await s.card({ fixed_rates: [seats(1000), seats(500, "support", "Support")] });
  await s.subscribe({ rate_card_id: rc, fixed_rate_quantities: { seats: 1, support: 1 } }, CARD_OK);
  const [inv] = await s.invoices();
  return inv;
}

mysqlOnly("mysql: eight credit notes of 40% of one invoice at once from eight servers: exactly two, never beyond the total", async (t) => {
  const server = await startTestServer("mysql");
  const runners = await Promise.all(Array.from({ length: SERVERS }, () => createDatabase(server.db.url, { poolSize: 4 })));
  try {
    await Promise.all(runners.map((db) => db.dataSource.initialize()));
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const inv = await paidInvoice(s);
    t.deepEqual([inv.status, inv.total_amount.value], ["paid", "1500"]);
    const envOf = async (invoiceId: string): Promise<string> => {
      const rows = (await (runners[0] as (typeof runners)[number]).dataSource.query("SELECT environment_id AS e FROM invoices WHERE id = ?", [invoiceId])) as { e: string }[];
      return rows[0]?.e as string;
    };
    const caller = { environmentId: await envOf(inv.id), mode: "test" as const, keyKind: "secret" as const };

    const services = runners.map(
      (db) =>
        buildServices(
          db,
          () => "http://localhost",
          () => new Date(),
        ).creditNotes,
    );
    const results = await Promise.all(
      services.map((notes) => notes.create(caller, { invoiceId: inv.id, reason: "other", outcome: "credit_balance", amount: "600", lines: [], metadata: {} }).catch((err: unknown) => err)),
    );
    const written = results.filter((r): r is CreditNote => !(r instanceof Error));
    const refused = results.filter((r) => r instanceof Error);
    t.is(written.length, 2);
    t.deepEqual(written.map((n) => n.number).sort(), ["INV-CN-000001", "INV-CN-000002"]);
    t.is(refused.length, SERVERS - 2);
    for (const err of refused) {
      t.true(err instanceof FailedPreconditionError, String(err));
      t.is((err as FailedPreconditionError).reason, "CREDIT_EXCEEDS_INVOICE");
    }
    const after = await s.call("GET", `/invoices/${inv.id}`);
    t.is(after.amount_credited.value, "1200");
    const grants = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
    t.deepEqual(
      grants.map((g) => g.amount.value),
      ["600", "600"],
    );

    // The database alone refuses: raising amount_credited without the invoice's row lock.
    const other = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const second = await paidInvoice(other);
    const secondEnv = await envOf(second.id);
    const stores = runners.map(
      (db) =>
        new SqlCreditNoteStore(
          db.sql,
          db.entities,
          eventEncoder(() => "http://localhost"),
        ),
    );
    const raised = await Promise.all(stores.map((st) => st.transaction((tx) => tx.addCredited(secondEnv, second.id, "400")).catch((err: unknown) => err)));
    t.deepEqual(raised.filter((r) => r === true).length, 3, JSON.stringify(raised));
    t.true(raised.every((r) => typeof r === "boolean"));
    t.is((await other.call("GET", `/invoices/${second.id}`)).amount_credited.value, "1200");
  } finally {
    await Promise.all(runners.map((r) => r.dataSource.destroy().catch(() => undefined)));
    await server.stop();
  }
});
