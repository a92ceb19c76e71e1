/**
 * DESIGN §15: an invoice with no lines and a zero total is kept internal: not charged, not
 * announced (no invoice.* event in the feed), not numbered, until a line lands on it. On MariaDB
 * and SQLite, through the REST API: a usage card with no usage, its subscription cancelled, paused
 * or moved to another card, leaves empty invoices that nothing announces or charges (the card on
 * file fails every charge, so a charge would show as invoice.payment_failed and an open invoice);
 * with a grace period, late usage landing on an empty draft makes it a real invoice at
 * finalization: a number, invoice.created and invoice.finalized.
 */
import test from "ava";
import { simple, usd } from "../helpers/catalog-bodies.js";
import { STORES } from "../helpers/db.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const AT = "2026-01-15T00:00:00Z";

/** Every event of the scenario's environment, oldest first. */
async function events(s: Scenario): Promise<Json[]> {
  const out: Json[] = [];
  let after = "";
  for (;;) {
    const page = await s.call("GET", `/events?limit=100${after ? `&after=${after}` : ""}`);
    out.push(...page.events);
    if (!page.has_more) return out;
    after = page.events.at(-1).id;
  }
}

/** The invoice.* event types announced for `invoiceId`, in order. */
async function announced(s: Scenario, invoiceId: string): Promise<string[]> {
  return (await events(s)).filter((e) => e.type.startsWith("invoice.") && e.data?.id === invoiceId).map((e) => e.type);
}

/** A scenario whose subject has a card on file that fails every charge, and a usage card to subscribe to. */
async function setUp(server: Parameters<typeof Scenario.start>[0], invoiceGraceSeconds = 0): Promise<{ s: Scenario; card: string; other: string }> {
  const s = await Scenario.start(server, AT, { invoiceGraceSeconds });
  const m = await s.metric();
  const card = await s.card({ usage_based_rates: [simple(m, usd(100))] });
  const other = await s.card({ name: "Other", usage_based_rates: [simple(m, usd(200))] });
  const r = await s.subscribe({ rate_card_id: card, create_checkout_session: "always" }, CARD_FAILS_LATER);
  if (!String(r.result_type).startsWith("success")) throw new Error(`subscribe: ${JSON.stringify(r)}`);
  return { s, card, other };
}

/** The empty invoices of the subject: no line, zero total. */
const empties = (list: Json[]) => list.filter((i) => i.line_items.length === 0 && i.total_amount.value === "0");

function keptInternal(t: import("ava").ExecutionContext, inv: Json, types: string[]): void {
  t.deepEqual(types, [], `no invoice.* event for ${inv.id}`);
  t.falsy(inv.number, "no number");
  t.not(inv.status, "open", "not left open by a failed charge");
  t.is(inv.amount_due.value, "0");
}

for (const store of STORES) {
  const server = useServer(store);

  for (const [name, change] of [
    ["cancelled", async (s: Scenario, sub: string) => s.call("POST", `/subscriptions/${sub}/cancel`, {})],
    ["paused", async (s: Scenario, sub: string) => s.call("POST", `/subscriptions/${sub}/pause`, {})],
    ["moved to another rate card", async (s: Scenario, sub: string, other: string) => s.call("POST", `/subscriptions/${sub}/change-rate-card`, { rate_card_id: other })],
  ] as const) {
    test(`${store}: no usage, subscription ${name}: its empty invoices are kept internal (no event, no number, no charge)`, async (t) => {
      const { s, other } = await setUp(server);
      const sub = (await s.subscriptions())[0]?.id as string;
      await s.advance("2026-01-20T00:00:00Z");
      await change(s, sub, other);
      await s.advance("2026-02-20T00:00:00Z");
      const invoices = await s.invoices();
      const empty = empties(invoices);
      t.true(empty.length >= 1, `an empty invoice: ${JSON.stringify(invoices.map((i) => [i.status, i.total_amount.value, i.line_items.length]))}`);
      t.true(
        empty.some((i) => i.created_at === "2026-01-20T00:00:00Z"),
        "the change's own invoice is one of them",
      );
      for (const inv of empty) keptInternal(t, inv, await announced(s, inv.id));
      t.deepEqual(
        (await events(s)).filter((e) => e.type === "invoice.payment_failed"),
        [],
        "nothing was charged",
      );
    });
  }

  test(`${store}: with a grace period, late usage landing on an empty draft makes it an invoice: numbered and announced at finalization`, async (t) => {
    const { s } = await setUp(server, 3600);
    // A month without usage: the cycle's draft is empty, kept internal.
    await s.advance("2026-02-15T00:00:00Z");
    const draft = empties((await s.invoices()).filter((i) => i.status === "draft"))[0];
    t.truthy(draft, "an empty draft");
    t.deepEqual(await announced(s, draft.id), [], "an empty draft is not announced");
    t.falsy(draft.number);

    // Late usage of its period arrives within the grace period: the draft shows it.
    await s.events([["2026-02-10T00:00:00Z", "3"]]);
    const shown = await s.call("GET", `/invoices/${draft.id}`);
    t.is(shown.status, "draft");
    t.is(shown.total_amount.value, "300");
    t.falsy(shown.number);

    // At finalization (the grace period ends on the clock): a number, then invoice.created and invoice.finalized.
    await s.advance("2026-02-15T02:00:00Z");
    const final = await s.call("GET", `/invoices/${draft.id}`);
    t.not(final.status, "draft");
    t.regex(final.number, /^INV-\d{6}$/);
    t.is(final.total_amount.value, "300");
    const types = await announced(s, draft.id);
    t.deepEqual(types.slice(0, 2), ["invoice.created", "invoice.finalized"]);
    // The card on file fails every charge: the invoice that bills something is charged (and fails).
    t.true(types.includes("invoice.payment_failed"));
  });
}
