/**
 * DESIGN §15 with §12: a credit note's refund is never made twice. A note whose transaction rolls
 * back after the provider refunded (its commit lost), run again, is written with that refund (its
 * ID, total and refund kept), the provider not asked again: the note is written once with it. On MariaDB and SQLite, over the real stores and the test provider (which refuses any
 * refund beyond the charge, so a second refund of 1000 on a charge of 1500 would fail).
 */
import test from "ava";
import { CreditNotes } from "../../src/billing/credit-notes/credit-notes.js";
import type { CreditNoteStore } from "../../src/billing/credit-notes/ports.js";
import { AbortedError } from "../../src/billing/errors.js";
import { Lookups } from "../../src/billing/subscriptions/lookups.js";
import { chargeKey } from "../../src/billing/subscriptions/types.js";
import { createDatabase } from "../../src/db/datasource.js";
import { SqlCreditNoteStore } from "../../src/db/stores/credit-note-store.js";
import { eventEncoder } from "../../src/rpc/event-payload.js";
import { buildServices } from "../../src/wiring/services.js";
import { seats } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { startTestServer } from "../helpers/server.js";

for (const store of STORES) {
  test(`${store}: a refund whose commit was lost, asked again, is the first refund: one note, refunded once`, async (t) => {
    const server = await startTestServer(store);
    const db = await createDatabase(server.db.url, { poolSize: 2 });
    try {
      await db.dataSource.initialize();
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
      const rc = await s.card({ fixed_rates: [seats(1500)] });
      await s.subscribe({ rate_card_id: rc, fixed_rate_quantities: { seats: 1 } }, CARD_OK);
      const [inv] = await s.invoices();
      const [row] = (await db.dataSource.query("SELECT environment_id AS e FROM invoices WHERE id = ?", [inv.id])) as { e: string }[];
      const caller = { environmentId: row?.e as string, mode: "test" as const, keyKind: "secret" as const };

      // Services of their own, whose test provider learns of the invoice's charge (made by the server's).
      const { engine } = buildServices(
        db,
        () => "http://localhost",
        () => new Date(),
      );
      const provider = engine.payments.forMode("test");
      if (!provider) throw new Error("no test provider");
      t.true((await provider.charge({ behavior: "succeeds" } as never, "1500", "USD", chargeKey(inv.id, 1))).ok);
      const refunds: string[] = [];
      const refund = provider.refund.bind(provider);
      provider.refund = async (...a) => {
        const out = await refund(...a);
        refunds.push(out.ok ? out.refundId : `refused: ${out.message}`);
        return out;
      };

      // The first attempt's transaction does everything, then its commit is lost.
      const real = new SqlCreditNoteStore(
        db.sql,
        db.entities,
        eventEncoder(() => "http://localhost"),
      );
      let lose = true;
      const flaky: CreditNoteStore = {
        get: (e, id) => real.get(e, id),
        list: (e, f, p) => real.list(e, f, p),
        transaction: (fn) =>
          real.transaction(async (tx) => {
            const out = await fn(tx);
            if (lose) {
              lose = false;
              throw new AbortedError("TRANSACTION_CONFLICT", "the commit was lost");
            }
            return out;
          }),
      };
      const notes = new CreditNotes(flaky, new Lookups(engine, { get: async () => undefined }), () => "http://localhost");
      const ask = { invoiceId: inv.id, reason: "other", outcome: "refund", amount: "1000", lines: [], metadata: {} };
      // The lost commit is an AbortedError: the call runs its transaction again (retryingRaces) and
      // succeeds, writing the note of the refund made, without asking the provider again.
      const note = await notes.create(caller, ask);
      t.false(lose, "the first commit was lost");
      t.is(refunds.length, 1, "the provider was asked once");
      t.is(note.refundId, refunds[0] as string);
      t.is((await s.call("GET", `/credit-notes?invoice_id=${inv.id}`)).credit_notes.length, 1);
      t.is((await s.call("GET", `/invoices/${inv.id}`)).amount_credited.value, "1000");
      // What is left of the charge (500) can still be refunded: 1000 was refunded once.
      const rest = await notes.create(caller, { ...ask, amount: "500" });
      t.not(rest.id, note.id);
      t.regex(rest.refundId ?? "", /^re_test_/);
    } finally {
      await db.dataSource.destroy().catch(() => undefined);
      await server.stop();
    }
  });
}
