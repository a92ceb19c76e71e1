/**
 * Dunning.attemptFirsts, the first charges of a batch of invoices just written
 * (src/billing/payments/attempts.ts), over in-memory stand-ins for its storage and the test
 * provider: each invoice never charged is charged once with attempt 1's key; an invoice another
 * runner charged meanwhile (its plan came due) or one waiting for the customer is not charged
 * again; a charge that throws leaves only its invoice planned and the others recorded; 30
 * invoices go in two charge transactions (25 at most each).
 */
import test from "ava";
import { Dunning } from "../../src/billing/payments/attempts.js";
import { defaultPaymentSettings } from "../../src/billing/payments/types.js";
import type { BillingStores } from "../../src/billing/subscriptions/ports.js";
import type { BillingReads } from "../../src/billing/subscriptions/reads.js";
import type { Invoice, PaymentMethod, PaymentProvider } from "../../src/billing/subscriptions/types.js";

const AT = new Date("2026-02-15T00:00:00Z");

function invoice(id: string, over: Partial<Invoice> = {}): Invoice {
  return {
    ...({ id, environmentId: "env_1", subjectId: `subj_${id}`, subscriptionId: `sub_${id}`, periodKey: "cycle:1", status: "open", currency: "USD", total: "4900" } as Invoice),
    lines: [],
    createdAt: AT,
    finalizesAt: null,
    clockId: null,
    attemptCount: 0,
    nextPaymentAttempt: null,
    payment: {},
    ...over,
  } as Invoice;
}

/** The invoices' rows, the transactions run, the charges made and the events emitted. */
function world(rows: Invoice[], failing: string[] = []) {
  const byId = new Map(rows.map((i) => [i.id, { ...i }]));
  const charges: string[] = [];
  const events: string[] = [];
  const failed: string[] = [];
  let transactions = 0;
  const tx = {
    dunning: {
      claimAll: async (_env: string, ids: readonly string[]) => ids.flatMap((id) => (byId.has(id) ? [{ ...(byId.get(id) as Invoice) }] : [])),
      planFirsts: async (_env: string, plans: readonly { id: string; at: Date }[]) => {
        for (const p of plans) Object.assign(byId.get(p.id) as Invoice, { nextPaymentAttempt: p.at });
      },
      recordAttempts: async (_env: string, list: readonly { id: string; attempt: Pick<Invoice, "attemptCount" | "nextPaymentAttempt" | "payment"> }[]) => {
        for (const a of list) Object.assign(byId.get(a.id) as Invoice, a.attempt);
      },
    },
    moveInvoices: async (ids: string[], from: string, to: string) =>
      ids.filter((id) => {
        const row = byId.get(id) as Invoice;
        if (row.status !== from) return false;
        row.status = to as Invoice["status"];
        return true;
      }),
    emit: async (list: { type: string; resource: { invoice?: Invoice } }[]) => {
      for (const e of list) events.push(`${e.type} ${e.resource.invoice?.id}`);
    },
  };
  const stores = {
    transaction: async (fn: (t: typeof tx) => Promise<unknown>) => {
      transactions++;
      return fn(tx);
    },
  } as unknown as BillingStores;
  const provider = {
    test: true,
    charge: async (_pm: PaymentMethod, _amount: string, _currency: string, key: string) => {
      if (failing.some((id) => key.startsWith(id))) throw new Error("provider unreachable");
      charges.push(key);
      return { ok: true, reference: `ch_${key}` };
    },
  } as unknown as PaymentProvider;
  const reads = { providerFor: async () => provider } as unknown as BillingReads;
  const dunning = new Dunning(stores, reads, {} as never, { settingsOf: async () => defaultPaymentSettings("env_1", AT) }, {} as never, () => AT, { settleFailed: (id: string) => failed.push(id) });
  const pm = { id: "pm_1", behavior: "succeeds" } as PaymentMethod;
  return { byId, charges, events, failed, dunning, pm, transactions: () => transactions };
}

test("each invoice never charged is charged once, with attempt 1's key, and paid with its event", async (t) => {
  const w = world([invoice("inv_a"), invoice("inv_b")]);
  await w.dunning.attemptFirsts(
    [w.byId.get("inv_a"), w.byId.get("inv_b")].map((i) => ({ invoice: i as Invoice, pm: w.pm })),
    (i) => i.createdAt,
  );
  t.deepEqual(w.charges.sort(), ["inv_a:attempt-1", "inv_b:attempt-1"]);
  t.deepEqual(w.events.sort(), ["invoice.paid inv_a", "invoice.paid inv_b"]);
  t.like(w.byId.get("inv_a"), { status: "paid", attemptCount: 1 });
  t.is(w.transactions(), 2, "the plans, then one charge transaction");
});

test("an invoice whose first attempt another runner made, or that waits for the customer, is not charged again", async (t) => {
  const w = world([
    invoice("inv_new"),
    invoice("inv_declined", { attemptCount: 1, nextPaymentAttempt: new Date("2026-02-18T00:00:00Z"), payment: { lastError: "declined" } }),
    invoice("inv_waiting", { attemptCount: 1, payment: { actionRequired: true, reference: "pi_1" } }),
  ]);
  await w.dunning.attemptFirsts(
    [...w.byId.values()].map((i) => ({ invoice: i, pm: w.pm })),
    (i) => i.createdAt,
  );
  t.deepEqual(w.charges, ["inv_new:attempt-1"]);
  t.like(w.byId.get("inv_declined"), { status: "open", attemptCount: 1, nextPaymentAttempt: new Date("2026-02-18T00:00:00Z") });
  t.like(w.byId.get("inv_waiting"), { status: "open", attemptCount: 1, payment: { actionRequired: true, reference: "pi_1" } });
  t.deepEqual(w.events, ["invoice.paid inv_new"]);
});

test("a charge that throws leaves only its invoice planned; the others are charged and recorded", async (t) => {
  const w = world([invoice("inv_a"), invoice("inv_b"), invoice("inv_c")], ["inv_b"]);
  await w.dunning.attemptFirsts(
    [...w.byId.values()].map((i) => ({ invoice: i, pm: w.pm })),
    (i) => i.createdAt,
  );
  t.deepEqual(w.charges.sort(), ["inv_a:attempt-1", "inv_c:attempt-1"]);
  t.deepEqual(w.failed, ["inv_b"]);
  // Planned a minute after it was written: dunning makes it then, with the same key.
  t.like(w.byId.get("inv_b"), { status: "open", attemptCount: 0, nextPaymentAttempt: new Date(AT.getTime() + 60_000) });
  t.like(w.byId.get("inv_c"), { status: "paid", attemptCount: 1 });
});

test("30 invoices: one plan transaction, then charges 25 at most per transaction; each charged once", async (t) => {
  const list = Array.from({ length: 30 }, (_, k) => invoice(`inv_${String(k).padStart(2, "0")}`));
  const w = world(list);
  await w.dunning.attemptFirsts(
    list.map((i) => ({ invoice: i, pm: w.pm })),
    (i) => i.createdAt,
  );
  t.is(w.charges.length, 30);
  t.is(new Set(w.charges).size, 30);
  t.is(w.transactions(), 3);
  t.true([...w.byId.values()].every((i) => i.status === "paid" && i.attemptCount === 1));
});
