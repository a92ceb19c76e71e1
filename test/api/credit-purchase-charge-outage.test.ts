/**
 * A paid credit grant bought with the card on file (POST /credit-grants, and CreateCreditGrant over
 * Connect, no checkout) while Stripe cannot be reached for its charge (DESIGN §14, §16), both
 * stores, the real server on a port, the official `stripe` library against the fake Stripe behind
 * a proxy that fails only the charges (test/helpers/stripe-outage.ts: the connection dropped, or a
 * 503). The grant and its invoice are committed before the charge, so the call succeeds (200) with
 * the purchase as it stands: the grant pending_payment, its one invoice open, never attempted, its
 * first charge planned (next_payment_attempt) — one purchase, nothing for a client to retry (an
 * Idempotency-Key replays that answer). Stripe back and the clock past the plan, dunning charges it
 * once with the key of attempt 1: the invoice paid, the grant active. A declined card is still
 * refused at once as before: the grant failed, the invoice void, nothing planned. The answer after
 * the commit never fails: a grant the database cannot give back then (a trigger makes its row
 * unreadable, as a failover at that read would fail it) is answered 200 as known. Stripe refusing
 * the charge for good (401: the secret key revoked) is no outage: the purchase ends as a decline
 * does (the grant failed, its invoice void, nothing charged, never "pending"), answered with
 * PAYMENT_PROVIDER_REFUSED (400, replayed under its key); met by dunning's planned charge, it is
 * that attempt, counted, never retried on every run.
 */
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { CreditService } from "../../src/gen/billing/v1/credit_service_pb.js";
import { rpcClient } from "../helpers/clients.js";
import { STORES, withDatabase } from "../helpers/db.js";
import { stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import type { Scenario } from "../helpers/scenario.js";
import { type Outage, outageProxy } from "../helpers/stripe-outage.js";
import type { Json } from "../helpers/subjects-api.js";
import type { FakeStripe } from "../stripe/fake-stripe.js";

const SECRETS_KEY = randomBytes(32).toString("base64");
const usd = (value: string) => ({ currency_code: "USD", value });

const intentsOf = (fake: FakeStripe, invoiceId: string) => fake.paymentIntents().filter((pi) => (pi.metadata as Json)?.invoice_id === invoiceId);

/** How the purchase is made: REST (with or without an Idempotency-Key, sent twice when keyed), or Connect. */
type Via = "rest" | "rest, keyed and sent again" | "connect";

/** Buys USD 7.00 of paid credit on the card on file `via`; answers the HTTP status and the grant as answered (REST's JSON shape). */
async function buy(s: Scenario, via: Via, t: ExecutionContext): Promise<{ status: number; grant: Json }> {
  const body = { subject_id: s.subjectId, amount: usd("700"), category: "paid" };
  if (via === "connect") {
    const made = await rpcClient(CreditService, s.server.url, "connect", s.key).createCreditGrant({ subjectId: s.subjectId, amount: { currencyCode: "USD", value: "700" }, category: "paid" });
    const g = made.creditGrant;
    t.is(made.checkoutUrl, undefined, "no checkout: the card on file");
    return { status: 200, grant: { id: g?.id, status: g?.status, invoice_id: g?.invoiceId, remaining_amount: usd(g?.remainingAmount?.value ?? "") } };
  }
  const headers: Record<string, string> = { "x-api-key": s.key, "content-type": "application/json" };
  if (via !== "rest") headers["idempotency-key"] = `buy-${s.subjectId}`;
  const send = () => fetch(`${s.server.url}/credit-grants`, { method: "POST", headers, body: JSON.stringify(body) });
  const res = await send();
  const text = await res.text();
  if (via !== "rest") {
    // The client retries anyway: the key replays the answer (never IDEMPOTENCY_OUTCOME_LOST, never a second purchase).
    const again = await send();
    t.is(again.status, res.status);
    t.is(again.headers.get("idempotent-replayed"), "true");
    t.is(await again.text(), text);
  }
  const parsed = JSON.parse(text) as Json;
  if (res.status === 200) t.is(parsed.checkout_url, null, "no checkout: the card on file");
  return { status: res.status, grant: (parsed.credit_grant ?? parsed) as Json };
}

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: SECRETS_KEY }, outageProxy);

  const cases: [Via, Outage][] = [
    ["rest", "unreachable"],
    ["rest", "503"],
    ["rest, keyed and sent again", "unreachable"],
    ["connect", "503"],
  ];
  for (const [via, outage] of cases)
    test.serial(
      `${store}: a purchase on the card on file (${via}) whose charge finds Stripe ${outage}: 200, the grant pending and its invoice open; dunning charges it once and activates it`,
      async (t) => {
        t.timeout(120_000);
        const { server, fake, front: proxy } = ctx;
        const d = stripeDriver(server, fake);
        const s = await d.start(server);
        await d.replaceCard(s, "visa");
        proxy.outage = outage;
        proxy.failed = 0;
        let grant: Json;
        try {
          const bought = await buy(s, via, t);
          t.is(bought.status, 200, JSON.stringify(bought.grant));
          t.true(proxy.failed > 0, "the charge was tried and failed");
          grant = bought.grant;
          // The purchase as it stands: pending, its invoice open with the first charge planned (a minute ahead), nothing charged.
          t.like(grant, { status: "pending_payment", remaining_amount: usd("700") });
          t.truthy(grant.invoice_id);
          t.deepEqual(
            ((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[]).map((g) => [g.id, g.status]),
            [[grant.id, "pending_payment"]],
            "one grant",
          );
          t.deepEqual(
            (await s.invoices()).map((i) => [i.id, i.status]),
            [[grant.invoice_id, "open"]],
            "one invoice, open",
          );
          t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "open", attempt_count: 0, amount_due: usd("700"), next_payment_attempt: "2026-01-15T00:01:00Z" });
          t.deepEqual(
            intentsOf(fake, grant.invoice_id).filter((pi) => pi.status === "succeeded"),
            [],
            "nothing charged",
          );
        } finally {
          proxy.outage = undefined;
        }
        // Stripe back, the clock past the plan: dunning makes the planned charge, once, with attempt 1's key.
        await s.advance("2026-01-15T00:02:00Z");
        await fake.settle();
        t.deepEqual(
          intentsOf(fake, grant.invoice_id).map((pi) => [pi.idempotency_key, pi.status]),
          [[`${grant.invoice_id}:attempt-1`, "succeeded"]],
          "charged once",
        );
        t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "paid", attempt_count: 1, next_payment_attempt: null });
        t.deepEqual(
          ((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[]).map((g) => [g.id, g.status, g.remaining_amount]),
          [[grant.id, "active", usd("700")]],
          "one grant, active",
        );
        t.deepEqual(
          ((await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`)).entries as Json[]).map((e) => [e.entry_type, e.amount]),
          [["grant", usd("700")]],
          "granted once",
        );
        t.is((await s.invoices()).length, 1);
      },
    );

  // A grant whose metadata says so is written unreadable (its JSON broken): the read after the commit fails, nothing before it reads the grant.
  const unreadable =
    store === "mysql"
      ? "CREATE TRIGGER unreadable_grant BEFORE INSERT ON credit_grants FOR EACH ROW SET NEW.metadata = IF(NEW.metadata LIKE '%unreadable%', '{broken', NEW.metadata)"
      : "CREATE TRIGGER unreadable_grant AFTER INSERT ON credit_grants WHEN NEW.metadata LIKE '%unreadable%' BEGIN UPDATE credit_grants SET metadata = '{broken' WHERE id = NEW.id; END";

  test.serial(`${store}: a purchase whose grant cannot be read back after its charge still answers 200 with the grant as known, one grant, charged once by dunning`, async (t) => {
    t.timeout(120_000);
    const { server, fake, front: proxy } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    await d.replaceCard(s, "visa");
    await withDatabase(server.db.url, (db) => db.dataSource.query(unreadable));
    proxy.outage = "503";
    let res: Response;
    try {
      res = await fetch(`${server.url}/credit-grants`, {
        method: "POST",
        headers: { "x-api-key": s.key, "content-type": "application/json" },
        body: JSON.stringify({ subject_id: s.subjectId, amount: usd("700"), category: "paid", metadata: { note: "unreadable" } }),
      });
    } finally {
      proxy.outage = undefined;
      await withDatabase(server.db.url, async (db) => {
        await db.dataSource.query("DROP TRIGGER unreadable_grant");
        await db.dataSource.query(`UPDATE credit_grants SET metadata = '{"note":"unreadable"}' WHERE metadata = '{broken'`);
      });
    }
    const text = await res.text();
    t.is(res.status, 200, text);
    const grant = (JSON.parse(text) as Json).credit_grant as Json;
    t.like(grant, { status: "pending_payment", remaining_amount: usd("700") });
    t.deepEqual(
      ((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[]).map((g) => [g.id, g.status]),
      [[grant.id, "pending_payment"]],
      "one grant",
    );
    await s.advance("2026-01-15T00:02:00Z");
    await fake.settle();
    t.deepEqual(
      intentsOf(fake, grant.invoice_id).map((pi) => [pi.idempotency_key, pi.status]),
      [[`${grant.invoice_id}:attempt-1`, "succeeded"]],
      "charged once",
    );
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "active" });
  });

  for (const via of ["rest", "rest, keyed and sent again"] as const)
    test.serial(
      `${store}: a purchase (${via}) whose charge Stripe refuses for good (401, the key revoked) ends at once: 400 PAYMENT_PROVIDER_REFUSED, the grant failed, its invoice void, nothing charged nor retried`,
      async (t) => {
        t.timeout(120_000);
        const { server, fake, front: proxy } = ctx;
        const d = stripeDriver(server, fake);
        const s = await d.start(server);
        await d.replaceCard(s, "visa");
        proxy.outage = "401";
        proxy.failed = 0;
        let answer: { status: number; grant: Json };
        try {
          answer = await buy(s, via, t);
          t.is(proxy.failed, 1, "one charge tried: a refusal is not retried by the library");
        } finally {
          proxy.outage = undefined;
        }
        t.is(answer.status, 400, JSON.stringify(answer.grant));
        const text = JSON.stringify(answer.grant);
        t.regex(text, /PAYMENT_PROVIDER_REFUSED/);
        t.regex(text, /Invalid API Key provided/, "Stripe's message");
        const grants = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}`)).credit_grants as Json[];
        t.deepEqual(
          grants.map((g) => g.status),
          ["failed"],
          "one grant, failed (never pending)",
        );
        const grant = grants[0] as Json;
        t.true(text.includes(grant.id) && text.includes(grant.invoice_id), "the answer names the grant and its invoice");
        t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 1, next_payment_attempt: null });
        t.is((await s.invoices()).length, 1);
        // Nothing to make later: the key back (or not), dunning charges nothing.
        await s.advance("2026-01-20T00:00:00Z");
        await fake.settle();
        t.deepEqual(intentsOf(fake, grant.invoice_id), [], "nothing charged");
        t.is(proxy.failed, 1, "never retried");
      },
    );

  test.serial(
    `${store}: dunning's planned charge of a purchase that Stripe then refuses for good (401) is that attempt, counted: the grant failed, its invoice void, not retried on every run`,
    async (t) => {
      t.timeout(120_000);
      const { server, fake, front: proxy } = ctx;
      const d = stripeDriver(server, fake);
      const s = await d.start(server);
      await d.replaceCard(s, "visa");
      proxy.failed = 0;
      let grant: Json;
      try {
        proxy.outage = "503";
        const bought = await buy(s, "rest", t);
        t.is(bought.status, 200);
        grant = bought.grant;
        t.like(grant, { status: "pending_payment" });
        // The key revoked meanwhile: dunning's planned charge is refused.
        proxy.outage = "401";
        proxy.failed = 0;
        await s.advance("2026-01-15T00:02:00Z");
        await s.advance("2026-01-15T00:05:00Z");
        t.is(proxy.failed, 1, "one attempt, not one per run");
      } finally {
        proxy.outage = undefined;
      }
      t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 1, next_payment_attempt: null });
      t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed" });
      await s.advance("2026-01-20T00:00:00Z");
      await fake.settle();
      t.deepEqual(intentsOf(fake, grant.invoice_id), [], "nothing charged");
    },
  );

  test.serial(`${store}: a purchase on a card on file that Stripe declines is still refused at once: the grant failed, its invoice void, nothing planned`, async (t) => {
    const { server, fake } = ctx;
    const d = stripeDriver(server, fake);
    const s = await d.start(server);
    await d.replaceCard(s, "attach_then_fail");
    const { status, grant } = await buy(s, "rest", t);
    t.is(status, 200);
    t.like(grant, { status: "failed" });
    t.like(await s.call("GET", `/invoices/${grant.invoice_id}`), { status: "void", attempt_count: 1, next_payment_attempt: null });
    t.deepEqual(
      intentsOf(fake, grant.invoice_id).map((pi) => [pi.idempotency_key, pi.status]),
      [[`${grant.invoice_id}:attempt-1`, "requires_payment_method"]],
      "one charge, declined",
    );
    await s.advance("2026-01-20T00:00:00Z");
    await fake.settle();
    t.is(intentsOf(fake, grant.invoice_id).length, 1, "no retry");
    t.like(await s.call("GET", `/credit-grants/${grant.id}`), { status: "failed" });
  });
}
