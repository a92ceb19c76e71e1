import test from "ava";
/**
 * DESIGN §15: the credit notes of an invoice never credit more than its total, whatever runs at
 * the same time. On MariaDB, eight servers (each its own connection pool) issue a credit note of
 * 40% of one paid invoice at once: exactly two are written (80%), the others are refused with
 * CREDIT_EXCEEDS_INVOICE, the numbers are gapless and amount_credited never passes the total.
 * Then the database alone: eight transactions that only raise amount_credited (no row lock
 * taken first) by 400 of a 1500 invoice: three succeed, the conditional UPDATE refuses the rest.
 *
 * A refund note whose transaction loses a race after the provider refunded (an AbortedError, run
 * again), while another note of the invoice commits in between, on both stores: the retry keeps
 * the note's ID, so the provider, asked again under the same key, answers the first refund and
 * makes no second one; the same note committed in between (same state, same refund) took that
 * refund as its own, and the retry is another note with a refund of its own. On a credit
 * purchase's invoice, a retry whose credit was voided in between (nothing left to take back)
 * still writes the note of the refund made, rather than refusing it CREDIT_ALREADY_SPENT.
 */
import { CreditNotes } from "../../src/billing/credit-notes/credit-notes.js";
import type { CreditNoteStore } from "../../src/billing/credit-notes/ports.js";
import type { CreditNote } from "../../src/billing/credit-notes/types.js";
import { AbortedError, FailedPreconditionError } from "../../src/billing/errors.js";
import type { Lookups } from "../../src/billing/subscriptions/lookups.js";
import type { PaymentProvider } from "../../src/billing/subscriptions/types.js";
import { type Database, createDatabase } from "../../src/db/datasource.js";
import { eventEncoder } from "../../src/rpc/event-payload.js";
import { SqlCreditNoteStore } from "../../src/db/stores/credit-note-store.js";
import { buildServices } from "../../src/wiring/services.js";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { checkoutWithCard, paid } from "../helpers/credit-bodies.js";
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

/**
 * A provider that refunds anything once per idempotency key (a repeat answers the first refund),
 * and keeps what it refunded; a key sent again with another amount is refused, as Stripe does.
 */
function countingProvider(): { provider: PaymentProvider; refunds: Map<string, { refundId: string; amount: string }> } {
  const refunds = new Map<string, { refundId: string; amount: string }>();
  const refund = async (_charge: string, amount: string | null, _currency: string, key: string) => {
    const done = refunds.get(key) ?? { refundId: `re_${refunds.size + 1}`, amount: amount ?? "" };
    if (done.amount !== (amount ?? "")) return { ok: false as const, message: `idempotency key ${key} was used with amount ${done.amount}` };
    refunds.set(key, done);
    return { ok: true as const, ...done };
  };
  return { provider: { refund } as unknown as PaymentProvider, refunds };
}

/** The invoice's caller, its SQL credit note store, a counting provider and the lookups the credit notes read through them. */
async function refundRig(db: Database, invoiceId: string) {
  const [row] = (await db.dataSource.query("SELECT environment_id AS e FROM invoices WHERE id = ?", [invoiceId])) as { e: string }[];
  const caller = { environmentId: row?.e as string, mode: "test" as const, keyKind: "secret" as const };
  const real = new SqlCreditNoteStore(
    db.sql,
    db.entities,
    eventEncoder(() => "http://localhost"),
  );
  const { provider, refunds } = countingProvider();
  const lookups = {
    stores: { invoices: { get: (env: string, id: string) => real.transaction((tx) => tx.lockInvoice(env, id)) }, directory: { subject: async () => undefined } },
    engine: { now: () => new Date("2026-01-15T00:00:00Z") },
    paymentsFor: async () => provider,
  } as unknown as Lookups;
  return { caller, real, lookups, refunds };
}

/** A store over `real` whose first transaction loses its race when it writes its events (a deadlock), `between` run before it fails; the later ones are real. */
function losingStore(real: CreditNoteStore, between: () => Promise<unknown>): { store: CreditNoteStore; attempts: () => number } {
  let attempts = 0;
  const store: CreditNoteStore = {
    get: (env, id) => real.get(env, id),
    list: (env, filter, page) => real.list(env, filter, page),
    transaction: async (fn) => {
      attempts++;
      if (attempts > 1) return real.transaction(fn);
      try {
        return await real.transaction((tx) => fn({ ...tx, emit: async () => Promise.reject(new AbortedError("DEADLOCK", "deadlock")) }));
      } catch (err) {
        await between();
        throw err;
      }
    },
  };
  return { store, attempts: () => attempts };
}

for (const store of STORES) {
  for (const between of ["credit_balance", "refund", "credit_balance (the refund asking all that is left)"] as const) {
    test(`${store}: a refund note's transaction lost a race after the provider refunded, and a ${between} note of the invoice committed before the retry: ${between === "refund" ? "that same note took the refund, the retry makes its own" : "the retry writes the note with that refund, never a second"}`, async (t) => {
      // The last case: the note asks all that is left (1500), refunded; a balance note of 100 commits before the retry.
      const whole = between === "credit_balance (the refund asking all that is left)";
      const server = await startTestServer(store);
      const db = await createDatabase(server.db.url, { poolSize: 2 });
      try {
        await db.dataSource.initialize();
        const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
        const inv = await paidInvoice(s);
        const { caller, real, lookups, refunds } = await refundRig(db, inv.id);
        const other = new CreditNotes(real, lookups, () => "http://localhost");
        // The first attempt loses its race when it writes its events (after the refund, in any order of the writes); the other note commits before the retry.
        const losing = losingStore(real, () =>
          other.create(caller, { invoiceId: inv.id, reason: "other", outcome: whole ? "credit_balance" : between, amount: between === "refund" ? "500" : "100", lines: [], metadata: {} }),
        );
        const note = await new CreditNotes(losing.store, lookups, () => "http://localhost").create(caller, {
          invoiceId: inv.id,
          reason: "other",
          outcome: "refund",
          amount: whole ? undefined : "500",
          lines: [],
          metadata: {},
        });
        t.is(losing.attempts(), 2);
        const notes = (await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes as Json[];
        const made = [...refunds.values()];
        if (whole) {
          // The refund of 1500 made, recorded as made: its note of 1500 with 100 on the balance, 1600 credited on 1500.
          t.deepEqual(made, [{ refundId: "re_1", amount: "1500" }]);
          t.deepEqual(
            notes.map((n) => [n.outcome, n.total.value, n.refund_id]),
            [
              ["credit_balance", "100", null],
              ["refund", "1500", "re_1"],
            ],
          );
          t.is(note.refundId, "re_1");
          t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "1600");
        } else if (between === "credit_balance") {
          // One refund of 500, the note's; 100 to the balance: 500 + 100 = 600 credited.
          t.deepEqual(made, [{ refundId: "re_1", amount: "500" }]);
          t.deepEqual(
            notes.map((n) => [n.outcome, n.total.value, n.refund_id]),
            [
              ["credit_balance", "100", null],
              ["refund", "500", "re_1"],
            ],
          );
          t.is(note.refundId, "re_1");
          t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "600");
        } else {
          // Two notes of 500, each its own refund: 500 + 500 = 1000 refunded and credited.
          t.deepEqual(made, [
            { refundId: "re_1", amount: "500" },
            { refundId: "re_2", amount: "500" },
          ]);
          t.deepEqual(
            notes.map((n) => [n.outcome, n.total.value, n.refund_id]),
            [
              ["refund", "500", "re_1"],
              ["refund", "500", "re_2"],
            ],
          );
          t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "1000");
        }
      } finally {
        await db.dataSource.destroy().catch(() => undefined);
        await server.stop();
      }
    });
  }
}

for (const store of STORES) {
  test(`${store}: a purchase's refund note whose race was lost after the refund, its credit voided before the retry: the note of the refund made is written`, async (t) => {
    const server = await startTestServer(store);
    const db = await createDatabase(server.db.url, { poolSize: 2 });
    try {
      await db.dataSource.initialize();
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      await checkoutWithCard(s, await s.card({ fixed_rates: [seats(0)] }), CARD_OK);
      const grant = (await paid(s, "bought", 2500)).credit_grant;
      const inv = await s.call("GET", `/invoices/${grant.invoice_id}`);
      t.deepEqual([inv.status, inv.total_amount.value], ["paid", "2500"]);
      const { caller, real, lookups, refunds } = await refundRig(db, inv.id);
      const losing = losingStore(real, () => s.call("POST", `/credit-grants/${grant.id}/void`, {}));
      const note = await new CreditNotes(losing.store, lookups, () => "http://localhost").create(caller, { invoiceId: inv.id, reason: "other", outcome: "refund", lines: [], metadata: {} });
      t.is(losing.attempts(), 2);
      // The refund of 2500 made once, and recorded: its note, 2500 credited; the credit was voided (nothing left to take back).
      t.deepEqual([...refunds.values()], [{ refundId: "re_1", amount: "2500" }]);
      t.deepEqual([note.outcome, note.total, note.refundId], ["refund", "2500", "re_1"]);
      t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "2500");
      t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "voided" });
    } finally {
      await db.dataSource.destroy().catch(() => undefined);
      await server.stop();
    }
  });
}
