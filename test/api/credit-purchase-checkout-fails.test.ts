/**
 * A credit purchase whose checkout cannot be opened (the database refusing its row) is not left
 * awaiting a checkout that does not exist (nothing would ever charge nor end it): the call fails,
 * and the purchase is ended as a cancelled checkout's is, its invoice void and its grant failed,
 * nothing granted. Through the real server, on MariaDB and SQLite (serial: a trigger refuses the
 * row for every call on the server).
 */
import test from "ava";
import { CALLBACKS } from "../helpers/credit-bodies.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServers } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";

const refuse = (store: string) =>
  store === "mysql"
    ? "CREATE TRIGGER refuse_credit_checkout BEFORE INSERT ON checkout_sessions FOR EACH ROW BEGIN IF NEW.kind = 'credit' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; END IF; END"
    : "CREATE TRIGGER refuse_credit_checkout BEFORE INSERT ON checkout_sessions WHEN NEW.kind = 'credit' BEGIN SELECT RAISE(ABORT, 'refused'); END";

const serverOf = useServers();

for (const store of STORES) {
  test.serial(`${store}: a purchase whose checkout cannot be opened ends: its invoice void, its grant failed`, async (t) => {
    const server = serverOf(store);
    const s = await Scenario.start(server, AT);
    const sql = (q: string) => withDatabase(server.db.url, (db) => db.dataSource.query(q));
    await sql(refuse(store));
    let r: Awaited<ReturnType<Scenario["raw"]>>;
    try {
      r = await s.raw("POST", "/credit-grants", { subject_id: s.subjectId, amount: { currency_code: "USD", value: "700" }, category: "paid", checkout_callback_urls: CALLBACKS });
    } finally {
      await sql("DROP TRIGGER refuse_credit_checkout");
    }
    t.not(r.status, 200, JSON.stringify(r.body));
    const grants = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
    t.is(grants.length, 1);
    const [grant] = grants as [Json];
    t.like(grant, { status: "failed", remaining_amount: { value: "0" } });
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void" });
    // A card saved later charges nothing.
    await s.saveCardInPortal(CARD_OK);
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 0 });
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed" });
    t.deepEqual((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries, []);
  });
}
