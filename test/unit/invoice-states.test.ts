/** The invoice state machine (src/billing/subscriptions/invoice-states.ts), table-driven: every pair of statuses. */
import test from "ava";
import { INITIAL_INVOICE_STATUSES, INVOICE_TRANSITIONS, canTransition, checkTransition, transitionEvents } from "../../src/billing/subscriptions/invoice-states.js";
import { INVOICE_STATUSES } from "../../src/billing/subscriptions/invoices.js";
import type { Invoice, InvoiceStatus } from "../../src/billing/subscriptions/types.js";

/** [from, to, allowed, the event that announces the move]: all 25 pairs of the 5 statuses. */
const cases: [InvoiceStatus, InvoiceStatus, boolean, string | null][] = [
  ["draft", "draft", false, null],
  ["draft", "open", true, "invoice.finalized"],
  ["draft", "paid", false, null],
  ["draft", "void", false, null],
  ["draft", "uncollectible", false, null],
  ["open", "draft", false, null],
  ["open", "open", false, null],
  ["open", "paid", true, "invoice.paid"],
  ["open", "void", true, "invoice.voided"],
  ["open", "uncollectible", true, "invoice.marked_uncollectible"],
  ["paid", "draft", false, null],
  ["paid", "open", false, null],
  ["paid", "paid", false, null],
  ["paid", "void", false, null],
  ["paid", "uncollectible", false, null],
  ["void", "draft", false, null],
  ["void", "open", false, null],
  ["void", "paid", false, null],
  ["void", "void", false, null],
  ["void", "uncollectible", false, null],
  ["uncollectible", "draft", false, null],
  ["uncollectible", "open", false, null],
  ["uncollectible", "paid", false, null],
  ["uncollectible", "void", false, null],
  ["uncollectible", "uncollectible", false, null],
];

for (const [from, to, allowed, event] of cases) {
  test(`${from} → ${to}: ${allowed ? `allowed${event ? `, announced by ${event}` : ", not announced"}` : "refused"}`, (t) => {
    t.is(canTransition(from, to), allowed);
    if (allowed) {
      const move = checkTransition(from, to);
      t.like(move, { from, to, event });
    } else {
      t.throws(() => checkTransition(from, to), { message: `an invoice cannot move from ${from} to ${to}` });
    }
  });
}

test("the table covers every pair of statuses once, and every transition of the module is in it", (t) => {
  t.is(cases.length, INVOICE_STATUSES.length ** 2);
  t.is(new Set(cases.map(([from, to]) => `${from}>${to}`)).size, cases.length);
  for (const [from, to] of cases) t.true(INVOICE_STATUSES.includes(from) && INVOICE_STATUSES.includes(to));
  t.deepEqual(
    INVOICE_TRANSITIONS.map((m) => [m.from, m.to]),
    cases.filter(([, , allowed]) => allowed).map(([from, to]) => [from, to]),
  );
});

test("a new invoice is a draft or open; paid, void and uncollectible are final", (t) => {
  t.deepEqual([...INITIAL_INVOICE_STATUSES], ["draft", "open"]);
  for (const status of ["paid", "void", "uncollectible"] as const) t.false(INVOICE_TRANSITIONS.some((m) => m.from === status));
  // Every status can be reached from a new invoice.
  const reached = new Set<InvoiceStatus>(INITIAL_INVOICE_STATUSES);
  for (const m of INVOICE_TRANSITIONS) if (reached.has(m.from)) reached.add(m.to);
  t.deepEqual([...reached].sort(), [...INVOICE_STATUSES].sort());
});

test("a move's events carry each invoice as it is after the move", (t) => {
  const line = { description: "Seats", quantity: "1", unitAmount: "100", amount: "100", kind: "fixed" as const, key: null, windowInvoiceId: null };
  const inv = { id: "inv_1", environmentId: "env_1", status: "open", total: "100", lines: [line] } as Invoice;
  t.deepEqual(transitionEvents(checkTransition("open", "paid"), [inv]), [{ type: "invoice.paid", environmentId: "env_1", resource: { kind: "invoice", invoice: { ...inv, status: "paid" } } }]);
  t.deepEqual(transitionEvents(checkTransition("open", "uncollectible"), [inv]), [
    { type: "invoice.marked_uncollectible", environmentId: "env_1", resource: { kind: "invoice", invoice: { ...inv, status: "uncollectible" } } },
  ]);
  t.is(inv.status, "open", "the invoice given is not changed");
});

test("an empty invoice kept internal (no lines, zero total) is never announced (DESIGN §15)", (t) => {
  const empty = { id: "inv_2", environmentId: "env_1", status: "open", total: "0", lines: [] } as unknown as Invoice;
  t.deepEqual(transitionEvents(checkTransition("open", "paid"), [empty]), []);
  t.deepEqual(transitionEvents(checkTransition("open", "void"), [empty]), []);
});
