/**
 * A credit_balance credit note on a paid credit purchase's invoice is refused (docs/guides/credits.md),
 * on MariaDB and SQLite through the real server: the purchased credit is on the balance already, so
 * a balance credit for it would be the same credit twice. The refusal is INVOICE_NOT_CREDITABLE
 * (failed_precondition, 400) naming the `outcome` field (a google.rpc.BadRequest field violation,
 * on REST and on Connect and gRPC) and telling the caller to issue a refund note, which takes the
 * unspent credit back with the money; nothing is written. A refund note on the same invoice still
 * works. The arithmetic is written beside each amount.
 */
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { CreditNoteService } from "../../src/gen/billing/v1/credit_note_service_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { reasonOf, rpcClient, violatedFields } from "../helpers/clients.js";
import { CALLBACKS, creditState } from "../helpers/credit-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";
const usd = (value: string) => ({ currency_code: "USD", value });

/** A paid grant of `value` bought with the card on file (charged at once): the grant. */
async function bought(s: Scenario, value: string): Promise<Json> {
  const r = await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: usd(value), category: "paid", checkout_callback_urls: CALLBACKS });
  if (r.credit_grant.status !== "active") throw new Error(`purchase: ${JSON.stringify(r)}`);
  return r.credit_grant;
}

/** The grant as [status, remaining], the ledger as [type, amount], the balance, the grants, and the purchase invoice's notes and amount credited. */
async function state(s: Scenario, grant: Json): Promise<Json> {
  const g = await s.call("GET", `/credit-grants/${grant.id}`);
  const ledger = ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger?limit=100`)).entries as Json[]).map((e) => [e.entry_type, e.amount.value]);
  const inv = await s.call("GET", `/invoices/${grant.invoice_id}`);
  const notes = (await s.call("GET", `/credit-notes?invoice_id=${grant.invoice_id}`)).credit_notes as Json[];
  const grants = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
  return {
    grant: [g.status, g.remaining_amount.value],
    ledger,
    balance: (await creditState(s))[0],
    grants: grants.length,
    credited: inv.amount_credited?.value ?? "0",
    notes: notes.map((n) => [n.outcome, n.total.value]),
  };
}

const errorInfo = (body: Json): Json | undefined => (body.details as Json[] | undefined)?.find((d) => d.type === "google.rpc.ErrorInfo")?.debug;

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a credit_balance note on a paid credit purchase is refused (the same credit twice), nothing written; a refund note still takes the credit back`, async (t) => {
    const s = await Scenario.start(server, AT);
    await s.saveCardInPortal(CARD_OK);
    const grant = await bought(s, "700");
    const before = await state(s, grant);
    t.deepEqual(before, { grant: ["active", "700"], ledger: [["grant", "700"]], balance: "700", grants: 1, credited: "0", notes: [] });

    // The whole invoice (700) and a part of it (300): both refused the same way.
    for (const ask of [{}, { amount: "300" }, { lines: [{ invoice_line_index: 0, amount: "300" }] }]) {
      const r = await s.raw("POST", "/credit-notes", { invoice_id: grant.invoice_id, reason: "other", outcome: "credit_balance", ...ask });
      t.is(r.status, 400, JSON.stringify(r.body));
      t.is(r.body.code, "failed_precondition");
      t.is(reasonOf(r.body as Json), "INVOICE_NOT_CREDITABLE");
      t.like(errorInfo(r.body as Json)?.metadata, { invoice_id: grant.invoice_id, field: "outcome", credit_grant_id: grant.id });
      t.deepEqual(violatedFields(r.body as Json), ["outcome"]);
      t.regex(String(r.body.message), /^outcome: credit_balance cannot credit invoice .*same credit twice.*outcome refund instead/);
    }
    // Connect and gRPC: the same code, reason and field violation.
    for (const protocol of ["connect", "grpc"] as const) {
      const client = rpcClient(CreditNoteService, server.url, protocol, s.key);
      const err = ConnectError.from(await t.throwsAsync(client.createCreditNote({ invoiceId: grant.invoice_id, reason: "other", outcome: "credit_balance" })));
      t.is(err.code, Code.FailedPrecondition, protocol);
      t.is(err.findDetails(ErrorInfoSchema)[0]?.reason, "INVOICE_NOT_CREDITABLE", protocol);
      t.deepEqual(
        err.findDetails(BadRequestSchema)[0]?.fieldViolations.map((v) => v.field),
        ["outcome"],
        protocol,
      );
    }
    // Nothing written: still 700 bought = 700 on the balance, one grant, no note.
    t.deepEqual(await state(s, grant), before);

    // A refund note of 300 takes back 300 of the purchased credit: 700 − 300 = 400 left.
    const refund = await s.raw("POST", "/credit-notes", { invoice_id: grant.invoice_id, reason: "other", outcome: "refund", amount: "300" });
    t.is(refund.status, 200, JSON.stringify(refund.body));
    t.deepEqual(await state(s, grant), {
      grant: ["active", "400"], // 700 − 300 = 400
      ledger: [
        ["grant", "700"],
        ["void", "-300"], // the refund takes back 300: 700 − 300 = 400
      ],
      balance: "400",
      grants: 1, // no promotional grant made
      credited: "300",
      notes: [["refund", "300"]],
    });
  });
}
