/**
 * An auto top-up's crossing whose move below committed but whose purchase never did is still
 * bought (DESIGN §14: once per crossing), on both stores. A subject with a card on file, 400 of
 * credit, a top-up of 10,000 below 500: the evaluation moves the row below (crossing 1 counted),
 * then the process dies: its purchase fails before anything is written and so does the re-arm (a
 * second server's wiring, helpers/credit-realtime.ts, with the failures injected into its store and
 * buyer). The old code then did nothing until available credit went back above 500 and fell again:
 * the customer ran out with auto top-up on. The real server's clock advance now buys crossing 1's
 * top-up: one grant of 10,000, one invoice, one charge. A subject below the line with no card on
 * file is skipped once (no retries told on every evaluation); once it saves a card, the next
 * evaluation buys that crossing's top-up, once.
 */
import test from "ava";
import { type AlertStore, CreditAlerts, type TopUpBuyer } from "../../src/billing/credits/alerts.js";
import { checkoutWithCard, eventually } from "../helpers/credit-bodies.js";
import { type CreditWiring, wireCredits } from "../helpers/credit-realtime.js";
import { STORES } from "../helpers/db.js";
import { flat, usageRate } from "../helpers/price-bodies.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
/** Past the first charge planned 60 s after the purchase. */
const JAN_PLUS_2_MIN = "2026-01-15T00:02:00Z";
const JAN_PLUS_5_MIN = "2026-01-15T00:05:00Z";
const JAN_PLUS_10_MIN = "2026-01-15T00:10:00Z";
const TOP_UP = { threshold: "500", amount: "10000", priority: 50 };

type Outcome = [[string, string, string, string | undefined][], [string, string, number][]];

/** The subject's grants as [category, status, amount, crossing key], and its credit purchases' invoices as [status, total, attempts]. */
async function outcome(s: Scenario): Promise<Outcome> {
  const grants = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&limit=100`)).credit_grants as Json[];
  const purchases = (await s.invoices()).filter((i) => (i.line_items as Json[]).some((l) => l.kind === "credit_purchase"));
  return [grants.map((g) => [g.category, g.status, g.amount.value, g.metadata?.auto_top_up]), purchases.map((i) => [i.status, i.total_amount.value, Number(i.attempt_count)])];
}

/** The 400 promotional grant, crossing 1's top-up of 10,000 active, and its invoice paid by one charge. */
const crossingOneBought = (s: Scenario): Outcome => [
  [
    ["promotional", "active", "400", undefined],
    ["paid", "active", "10000", `credit_top_up:${s.subjectId}:USD:1`],
  ],
  [["paid", "10000", 1]],
];

/** Advances the real server's clock past the planned first charge (twice: the purchase, then its charge), until the top-up is paid. */
async function advanceUntilPaid(s: Scenario): Promise<Outcome> {
  await s.advance(JAN_PLUS_5_MIN);
  await s.advance(JAN_PLUS_10_MIN);
  return eventually(
    () => outcome(s),
    ([g, inv]) => g.every(([, status]) => status === "active") && inv.every(([status]) => status === "paid"),
  );
}

/** A usage rate card of 10 a unit. */
async function usageCard(s: Scenario): Promise<string> {
  return s.card({ usage_based_rates: [usageRate(await s.metric(), flat(10))] });
}

/** The subject's credit: 400, then the top-up settings (granted before them: its evaluation has no top-up to decide). */
async function credit(w: CreditWiring): Promise<void> {
  await w.grant("400");
  await w.watch.idle();
  await w.settings({ currency: "USD", lowBalanceThreshold: null, autoTopUp: TOP_UP });
}

for (const store of STORES) {
  const server = useServer(store);

  test.serial(`${store}: auto top-up: a crossing whose purchase died after the move below is bought by the next evaluation, once`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    t.teardown(() => w.close());
    if ((await checkoutWithCard(s, await usageCard(s), CARD_OK)) !== 303) throw new Error("the checkout did not save the card");
    await credit(w);
    // The dying server: its move below commits; then its purchase fails before writing anything and
    // its re-arm (every later transaction) fails too, as a process that died between them.
    let transactions = 0;
    const dying: AlertStore = {
      get: (environmentId, id) => w.store.get(environmentId, id),
      balances: (environmentId, subjectId) => w.store.balances(environmentId, subjectId),
      spendableOfAll: (environmentId, queries) => w.store.spendableOfAll(environmentId, queries),
      getSettings: (environmentId, subjectId, currency) => w.store.getSettings(environmentId, subjectId, currency),
      getAlertState: (environmentId, subjectId, currency, kind) => w.store.getAlertState(environmentId, subjectId, currency, kind),
      ensureAlertState: (st) => w.store.ensureAlertState(st),
      transaction: (work) => {
        if (transactions++ > 0) return Promise.reject(new Error("the process died"));
        return w.store.transaction(work);
      },
    };
    const buyer: TopUpBuyer = {
      topUp: async () => {
        throw new Error("the process died");
      },
      canBuy: (environmentId, subjectId) => w.topUps.canBuy(environmentId, subjectId),
    };
    const died = await new CreditAlerts(dying, w.engine, buyer)
      .evaluate(w.caller.environmentId, s.subjectId, new Date(JAN))
      .catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
    t.is(died, "the process died");
    t.is(transactions, 2, "the move below committed, the re-arm failed");
    const row = await w.store.getAlertState(w.caller.environmentId, s.subjectId, "USD", "top_up");
    t.deepEqual([row?.below, row?.crossings], [true, 1], "crossing 1 counted, nothing bought");
    t.deepEqual(await outcome(s), [[["promotional", "active", "400", undefined]], []]);
    // The real server's clock advance (its scheduler's evaluation) buys crossing 1; dunning charges it once.
    t.deepEqual(await advanceUntilPaid(s), crossingOneBought(s));
    // Later evaluations buy nothing more (10,400 available: the row is re-armed).
    t.is(await w.alerts.evaluate(w.caller.environmentId, s.subjectId, new Date(JAN_PLUS_10_MIN)), 0);
    t.deepEqual(await outcome(s), crossingOneBought(s));
  });

  test.serial(`${store}: auto top-up: a subject below the line without a card is skipped once, and saving a card buys that crossing's top-up, once`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const w = await wireCredits(s);
    t.teardown(() => w.close());
    await credit(w);
    const tried: string[] = [];
    const buyer: TopUpBuyer = {
      topUp: (environmentId, settings, crossingKey, at) => {
        tried.push(crossingKey);
        return w.topUps.topUp(environmentId, settings, crossingKey, at);
      },
      canBuy: (environmentId, subjectId) => w.topUps.canBuy(environmentId, subjectId),
    };
    const alerts = new CreditAlerts(w.store, w.engine, buyer);
    const evaluate = (at = JAN) => alerts.evaluate(w.caller.environmentId, s.subjectId, new Date(at));
    // No card: crossing 1 is tried (and skipped, told) once; the next evaluations (one past the
    // minute after which a crossing with no grant counts as unbought) neither buy nor try.
    t.deepEqual([await evaluate(), await evaluate(), await evaluate(JAN_PLUS_2_MIN)], [0, 0, 0]);
    t.deepEqual(tried, [`credit_top_up:${s.subjectId}:USD:1`]);
    t.deepEqual(await outcome(s), [[["promotional", "active", "400", undefined]], []]);
    // The card saved (a checkout), still below 500: the next evaluation buys crossing 1's top-up.
    if ((await checkoutWithCard(s, await usageCard(s), CARD_OK)) !== 303) throw new Error("the checkout did not save the card");
    t.deepEqual(await advanceUntilPaid(s), crossingOneBought(s));
    t.is(await evaluate(JAN_PLUS_10_MIN), 0);
    t.deepEqual(await outcome(s), crossingOneBought(s));
  });
}
