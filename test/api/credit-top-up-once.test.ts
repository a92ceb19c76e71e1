/**
 * An auto top-up buys at most once per crossing (DESIGN §14), on both stores: a subject with a card
 * on file (a hosted checkout through the real server), 400 of credit, a top-up of 10,000 below
 * 500 (or of 50, which leaves it below). Its purchase commits (a pending grant, its invoice, a first charge planned 60 s ahead), then
 * something fails: the payment method's read after the commit (a database failing over), or the
 * answer of the whole purchase (lost after its commit). The next evaluation still sees 400
 * available (a pending grant is not in the balance): the crossing must not be re-armed and bought
 * again under a new key. Credit is wired as a second server has it (helpers/credit-realtime.ts);
 * the failures are injected into that wiring's stores and top-up buyer. The real server's clock
 * advance then runs dunning: exactly one grant of 10,000 and one charge of it.
 */
import test from "ava";
import { CreditAlerts, type TopUpBuyer } from "../../src/billing/credits/alerts.js";
import { checkoutWithCard, eventually } from "../helpers/credit-bodies.js";
import { type CreditWiring, wireCredits } from "../helpers/credit-realtime.js";
import { STORES } from "../helpers/db.js";
import { flat, usageRate } from "../helpers/price-bodies.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const JAN = "2026-01-15T00:00:00Z";
/** Past the first charge planned 60 s after the purchase. */
const JAN_PLUS_5_MIN = "2026-01-15T00:05:00Z";

/** A subject on a usage plan with a card on file, 400 of credit, a top-up of `amount` below 500; its scenario and wiring. */
async function belowLine(server: TestServer, amount = "10000"): Promise<{ s: Scenario; w: CreditWiring }> {
  const s = await Scenario.start(server, JAN);
  const w = await wireCredits(s);
  const m = await s.metric();
  if ((await checkoutWithCard(s, await s.card({ usage_based_rates: [usageRate(m, flat(10))] }), CARD_OK)) !== 303) throw new Error("the checkout did not save the card");
  // Granted before the settings: its evaluation has no top-up to decide.
  await w.grant("400");
  await w.watch.idle();
  await w.settings({ currency: "USD", lowBalanceThreshold: null, autoTopUp: { threshold: "500", amount, priority: 50 } });
  return { s, w };
}

/** The subject's grants as [category, status, amount], and its credit purchases' invoices as [status, total, attempts]. */
async function outcome(s: Scenario): Promise<[[string, string, string][], [string, string, number][]]> {
  const grants = (await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&limit=100`)).credit_grants as Json[];
  const purchases = (await s.invoices()).filter((i) => (i.line_items as Json[]).some((l) => l.kind === "credit_purchase"));
  return [grants.map((g) => [g.category, g.status, g.amount.value]), purchases.map((i) => [i.status, i.total_amount.value, Number(i.attempt_count)])];
}

/** One paid grant of `amount`, active, and its invoice paid by one charge. */
const onePurchase = (amount: string): [[string, string, string][], [string, string, number][]] => [
  [
    ["promotional", "active", "400"],
    ["paid", "active", amount],
  ],
  [["paid", amount, 1]],
];

for (const store of STORES) {
  const server = useServer(store);

  test.serial(`${store}: auto top-up: the payment method's read failing after the purchase's commit buys and charges once`, async (t) => {
    const { s, w } = await belowLine(server);
    t.teardown(() => w.close());
    // The first read of a payment method (the purchase's, after its commit) fails, as a database failing over would.
    const methods = w.engine.stores.paymentMethods;
    const read = methods.get.bind(methods);
    let reads = 0;
    methods.get = async (id, environmentId) => {
      if (reads++ === 0) throw new Error("connection lost: the database is failing over");
      return read(id, environmentId);
    };
    const at = new Date(JAN);
    const evaluate = () => w.alerts.evaluate(w.caller.environmentId, s.subjectId, at).catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
    // The first evaluation buys (answered as bought: nothing after the commit is an error); the
    // second still sees 400 available (the grant is pending) and buys nothing.
    t.deepEqual([await evaluate(), await evaluate()], [1, 0]);
    t.true(reads >= 1, "the failure was injected");
    const [grants] = await outcome(s);
    t.deepEqual(grants, [
      ["promotional", "active", "400"],
      ["paid", "pending_payment", "10000"],
    ]);
    // The clock past the planned first charge: dunning makes it once and the grant is active.
    await s.advance(JAN_PLUS_5_MIN);
    t.deepEqual(
      await eventually(
        () => outcome(s),
        ([g]) => g.every(([, status]) => status === "active"),
      ),
      onePurchase("10000"),
    );
  });

  test.serial(`${store}: auto top-up: a purchase whose answer is lost after its commit is not bought again; one that wrote nothing is retried once`, async (t) => {
    // A top-up of 50 leaves 450 available, still below the line: the row stays below after it.
    const { s, w } = await belowLine(server, "50");
    t.teardown(() => w.close());
    const keys: string[] = [];
    let calls = 0;
    const buyer: TopUpBuyer = {
      topUp: async (environmentId, settings, crossingKey, at) => {
        keys.push(crossingKey);
        calls++;
        // 1st: fails before anything is written; 2nd: buys, then its answer is lost; later ones buy as they would.
        if (calls === 1) throw new Error("the database could not be reached");
        const n = await w.topUps.topUp(environmentId, settings, crossingKey, at);
        if (calls === 2) throw new Error("connection lost after the commit");
        return n;
      },
      canBuy: (environmentId, subjectId) => w.topUps.canBuy(environmentId, subjectId),
    };
    const alerts = new CreditAlerts(w.store, w.engine, buyer);
    const at = new Date(JAN);
    const evaluate = () => alerts.evaluate(w.caller.environmentId, s.subjectId, at).catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
    // Nothing written: the row is re-armed and the next evaluation is a new crossing; written: that
    // crossing bought (its grant exists), the row stays below, nothing more is bought.
    t.deepEqual([await evaluate(), await evaluate(), await evaluate()], ["the database could not be reached", 1, 0]);
    t.deepEqual(keys, [`credit_top_up:${s.subjectId}:USD:1`, `credit_top_up:${s.subjectId}:USD:2`], "each crossing's key is its number, not the wall clock");
    const paid = ((await s.call("GET", `/credit-grants?subject_id=${s.subjectId}&status=active`)).credit_grants as Json[]).filter((g) => g.category === "paid");
    t.deepEqual(
      paid.map((g) => g.metadata.auto_top_up),
      [keys[1]],
    );
    await s.advance(JAN_PLUS_5_MIN);
    t.deepEqual(await outcome(s), onePurchase("50"));
  });
}
