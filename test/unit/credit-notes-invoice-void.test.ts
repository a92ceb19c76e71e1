/**
 * What voiding an invoice does to its credit notes (src/billing/credit-notes/invoice-void.ts):
 * issued reduce_amount_due notes become void, amount_credited lowered by their total; a note that
 * refunded money or credited the balance refuses the void (INVOICE_HAS_CREDIT_NOTES, naming it),
 * nothing written; void notes are left as they are.
 */
import test from "ava";
import { voidNotesWithInvoice } from "../../src/billing/credit-notes/invoice-void.js";
import type { InvoiceVoidNoteWrites } from "../../src/billing/credit-notes/ports.js";
import type { CreditNote } from "../../src/billing/credit-notes/types.js";
import { FailedPreconditionError } from "../../src/billing/errors.js";

const cn = (id: string, outcome: CreditNote["outcome"], total: string, status: CreditNote["status"] = "issued") => ({ id, number: `INV-CN-${id}`, outcome, total, status }) as CreditNote;

function tx(notes: CreditNote[]) {
  const writes: [string[], string, string][] = [];
  const t: InvoiceVoidNoteWrites = {
    ofInvoice: async () => notes,
    voidNotes: async (_env, _inv, ids, total, at) => {
      writes.push([[...ids], total, at.toISOString()]);
    },
  };
  return { t, writes };
}

const inv = { environmentId: "env_1", id: "inv_1" };
const AT = new Date("2026-03-05T00:00:00Z");

test("issued reduce_amount_due notes are voided, what they credited (3000 + 1000 = 4000) taken off; a void one is left", async (t) => {
  const { t: x, writes } = tx([cn("1", "reduce_amount_due", "3000"), cn("2", "reduce_amount_due", "500", "void"), cn("3", "reduce_amount_due", "1000")]);
  const out = await voidNotesWithInvoice(x, inv, AT);
  t.deepEqual(
    out.map((n) => [n.id, n.status]),
    [
      ["1", "void"],
      ["3", "void"],
    ],
  );
  t.deepEqual(writes, [[["1", "3"], "4000", "2026-03-05T00:00:00.000Z"]]);
});

test("no note: nothing written", async (t) => {
  const { t: x, writes } = tx([]);
  t.deepEqual(await voidNotesWithInvoice(x, inv, AT), []);
  t.deepEqual(writes, []);
});

for (const outcome of ["refund", "credit_balance"] as const) {
  test(`a ${outcome} note (money moved) refuses the void, naming it; nothing written`, async (t) => {
    const { t: x, writes } = tx([cn("1", "reduce_amount_due", "3000"), cn("2", outcome, "700")]);
    const err = await t.throwsAsync(voidNotesWithInvoice(x, inv, AT), { instanceOf: FailedPreconditionError });
    t.is((err as FailedPreconditionError).reason, "INVOICE_HAS_CREDIT_NOTES");
    t.regex(err?.message ?? "", new RegExp(`INV-CN-2 \\(2, ${outcome} 700\\)`));
    t.deepEqual(writes, []);
  });
}
