/**
 * Tiered and percentage prices, minimum and maximum per period, ISO 4217 codes (DESIGN §13) end
 * to end, on MariaDB and SQLite: cards with every new price made over REST and read back (REST,
 * gRPC and Connect agree; absent fields are null, a price without tiers has `[]`), bad input as
 * 400s naming the full path that write nothing, and invoices on test clocks. Amounts in cents.
 * Scenarios start on 2026-01-15: the first period is Jan 15 → Feb 15 (31 days).
 */
import { type DescMessage, type JsonObject, type MessageShape, toJson } from "@bufbuild/protobuf";
import test from "ava";
import { RateCardService } from "../../src/gen/billing/v1/rate_card_service_pb.js";
import { withNulls } from "../../src/rpc/json-out.js";
import { ok, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const J = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;
const asServed = <D extends DescMessage>(desc: D, message: MessageShape<D>) => withNulls(desc, toJson(desc, message, J) as JsonObject);

const money = (value: string | number, currency = "USD") => ({ currency_code: currency, value });
const tier = (upTo: string | number | null, unit: string | number, flat?: string | number) => ({ up_to: upTo, unit_amount: money(unit), ...(flat === undefined ? {} : { flat_amount: money(flat) }) });
const tiered = (mode: string, ...tiers: Json[]) => ({ price_type: "tiered", tiers_mode: mode, tiers });
const percentage = (percent: string | number, fee?: number) => ({ price_type: "percentage", percent, ...(fee === undefined ? {} : { fixed_amount_per_event: money(fee) }) });
const usage = (metric: string, price: Json, over: Json = {}) => ({ usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: metric, included_units: 0, price, ...over });

/** A price as served: every field present, null when absent, tiers `[]` when none. */
const served = (p: Json) => ({ price_type: null, amount: null, package_units: null, rounding_behavior: null, tiers_mode: null, tiers: [], percent: null, fixed_amount_per_event: null, ...p });
const servedTier = (upTo: string | null, unit: string, flat: string | null = null) => ({ up_to: upTo, unit_amount: money(unit), flat_amount: flat === null ? null : money(flat) });

/** An invoice's lines as [kind, description, quantity, unit, amount]. */
const lines = (inv: Json) => (inv.line_items as Json[]).map((l) => [l.kind, l.description, String(l.quantity), l.price_in_unit_amount.value, l.amount.value]);

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: every new price reads back over REST, gRPC and Connect, exactly`, async (t) => {
    const key = await server.freshKey();
    const sum = await ok(server, key, "POST", "/pricing-metrics", {
      event_name: "sales",
      name: "Sales",
      unit: "cent",
      dimensions: ["region"],
      aggregation: { aggregation_type: "sum", value_field: "n" },
    });
    const body = {
      billing_interval: "monthly",
      name: "Tiers",
      fixed_rates: [
        { code: "seats", name: "Seats", price: tiered("graduated", tier(5, 1000), tier(null, "800.5", 2000)) },
        { code: "base", name: "Base", price: { price_type: "flat", amount: money(100) } },
      ],
      usage_based_rates: [
        usage(sum.id, tiered("volume", tier("1000.5", 3), tier(null, 2)), { minimum_amount: money(500), maximum_amount: money("100000") }),
        usage(sum.id, percentage("2.9", 30), { code: "fees", name: "Fees" }),
        {
          usage_based_rate_type: "dimensional",
          code: "regional",
          name: "Regional",
          pricing_metric_id: sum.id,
          included_units: 0,
          dimensions: [{ key: "region", values: ["eu", "us"] }],
          pricing_matrix: {
            cells: [
              { dimension_coordinates: { region: "eu" }, price: tiered("graduated", tier(10, 5), tier(null, 4)) },
              { dimension_coordinates: { region: "us" }, price: percentage(1.5) },
            ],
          },
        },
      ],
    };
    const card = await ok(server, key, "POST", "/rate-cards", body);
    const [seats, base] = card.fixed_rates;
    t.deepEqual(seats.price, served({ price_type: "tiered", tiers_mode: "graduated", tiers: [servedTier("5", "1000"), servedTier(null, "800.5", "2000")] }));
    t.deepEqual(base.price, served({ price_type: "flat", amount: money("100") }), "a flat price: the new fields null, tiers []");
    const [api, fees, regional] = card.usage_based_rates;
    t.deepEqual(api.price, served({ price_type: "tiered", tiers_mode: "volume", tiers: [servedTier("1000.5", "3"), servedTier(null, "2")] }));
    t.deepEqual([api.minimum_amount, api.maximum_amount], [money("500"), money("100000")]);
    t.deepEqual(fees.price, served({ price_type: "percentage", percent: "2.9", fixed_amount_per_event: money("30") }));
    t.deepEqual([fees.minimum_amount, fees.maximum_amount], [null, null]);
    t.deepEqual(
      regional.pricing_matrix.cells.map((c: Json) => c.price),
      [
        served({ price_type: "tiered", tiers_mode: "graduated", tiers: [servedTier("10", "5"), servedTier(null, "4")] }),
        // No fee: the percentage takes the card's currency from its other prices.
        served({ price_type: "percentage", percent: "1.5" }),
      ],
    );
    t.deepEqual(await ok(server, key, "GET", `/rate-cards/${card.id}`), card);
    for (const protocol of ["grpc", "connect"] as const) {
      const got = await rpcClient(RateCardService, server.url, protocol, key).getRateCard({ rateCardId: card.id });
      t.deepEqual(asServed(RateCardService.method.getRateCard.output, got), { rate_card: card }, protocol);
    }
  });

  test(`${store}: tiered and percentage prices made over gRPC read back over REST; a bad tier is INVALID_ARGUMENT at its path`, async (t) => {
    const key = await server.freshKey();
    const sum = await ok(server, key, "POST", "/pricing-metrics", { event_name: "sales", name: "Sales", unit: "cent", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const cards = rpcClient(RateCardService, server.url, "grpc", key);
    const usd = (value: string) => ({ currencyCode: "USD", value });
    const made = await cards.createRateCard({
      billingInterval: "monthly",
      name: "Over gRPC",
      fixedRates: [
        {
          code: "seats",
          name: "Seats",
          price: {
            priceType: "tiered",
            tiersMode: "volume",
            tiers: [
              { upTo: "10", unitAmount: usd("5") },
              { unitAmount: usd("4"), flatAmount: usd("100") },
            ],
          },
        },
      ],
      usageBasedRates: [{ usageBasedRateType: "simple", code: "fees", name: "Fees", pricingMetricId: sum.id, price: { priceType: "percentage", percent: "0.5" }, maximumAmount: usd("900") }],
    });
    const card = await ok(server, key, "GET", `/rate-cards/${made.rateCard!.id}`);
    t.deepEqual(card.fixed_rates[0].price, served({ price_type: "tiered", tiers_mode: "volume", tiers: [servedTier("10", "5"), servedTier(null, "4", "100")] }));
    t.deepEqual(card.usage_based_rates[0].price, served({ price_type: "percentage", percent: "0.5" }));
    t.deepEqual([card.usage_based_rates[0].minimum_amount, card.usage_based_rates[0].maximum_amount], [null, money("900")]);
    const err = await t.throwsAsync(
      cards.createRateCard({
        billingInterval: "monthly",
        name: "Bad",
        fixedRates: [{ code: "s", name: "S", price: { priceType: "tiered", tiersMode: "graduated", tiers: [{ upTo: "10", unitAmount: usd("1") }] } }],
      }),
    );
    t.regex(String(err?.message), /invalid_argument|INVALID_ARGUMENT/i);
    t.regex(String(err?.message), /fixed_rates\[0\]\.price\.tiers\[0\]\.up_to/);
  });

  test(`${store}: bad prices are 400s naming the full path, and write nothing`, async (t) => {
    const key = await server.freshKey();
    const sum = await ok(server, key, "POST", "/pricing-metrics", { event_name: "sales", name: "Sales", unit: "cent", aggregation: { aggregation_type: "sum", value_field: "n" } });
    const count = await ok(server, key, "POST", "/pricing-metrics", { event_name: "calls", name: "Calls", unit: "call", aggregation: { aggregation_type: "count" } });
    const cases: [string, Json, string[]][] = [
      ["XYZ", { fixed_rates: [{ code: "s", name: "S", price: { price_type: "flat", amount: money(1, "XYZ") } }] }, ["fixed_rates[0].price.amount.currency_code"]],
      ["tiers not increasing", { usage_based_rates: [usage(sum.id, tiered("graduated", tier(10, 1), tier(20, 1), tier(15, 1), tier(null, 1)))] }, ["usage_based_rates[0].price.tiers[2].up_to"]],
      ["the last up_to set", { usage_based_rates: [usage(sum.id, tiered("volume", tier(10, 1), tier(20, 1)))] }, ["usage_based_rates[0].price.tiers[1].up_to"]],
      ["no tiers_mode", { usage_based_rates: [usage(sum.id, { price_type: "tiered", tiers: [tier(null, 1)] })] }, ["usage_based_rates[0].price.tiers_mode"]],
      ["tiers on a flat price", { fixed_rates: [{ code: "s", name: "S", price: { price_type: "flat", amount: money(1), tiers: [tier(null, 1)] } }] }, ["fixed_rates[0].price.tiers"]],
      ["percentage on a fixed rate", { fixed_rates: [{ code: "s", name: "S", price: percentage(2, 1) }] }, ["fixed_rates[0].price.price_type"]],
      ["percentage on a count metric", { usage_based_rates: [usage(count.id, percentage(2, 1))] }, ["usage_based_rates[0].price.price_type"]],
      ["percentage with included units", { usage_based_rates: [usage(sum.id, percentage(2, 1), { included_units: 10 })] }, ["usage_based_rates[0].included_units"]],
      ["percentage over 100", { usage_based_rates: [usage(sum.id, percentage("100.01", 1))] }, ["usage_based_rates[0].price.percent"]],
      ["no currency anywhere", { usage_based_rates: [usage(sum.id, percentage(2))] }, ["usage_based_rates[0].price.fixed_amount_per_event"]],
      [
        "maximum below minimum",
        { usage_based_rates: [usage(sum.id, tiered("volume", tier(null, 1)), { minimum_amount: money(10), maximum_amount: money(9) })] },
        ["usage_based_rates[0].maximum_amount"],
      ],
      [
        "a minimum in EUR on a USD card",
        { usage_based_rates: [usage(sum.id, tiered("volume", tier(null, 1)), { minimum_amount: money(10, "EUR") })] },
        ["usage_based_rates[0].minimum_amount.currency_code"],
      ],
    ];
    for (const [title, over, fields] of cases) {
      const r = await rest(server.url, "POST", "/rate-cards", key, { billing_interval: "monthly", name: "Bad", ...over });
      t.is(r.status, 400, title);
      t.deepEqual(violatedFields(r.body), fields, title);
    }
    t.deepEqual((await ok(server, key, "GET", "/rate-cards")).rate_cards, []);
  });

  test(`${store}: invoices: graduated seats in advance, volume usage with a maximum, percentage with a fee`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const sales = await s.metric();
    const calls = await s.metric({ aggregation_type: "sum", value_field: "n" }, [], "calls");
    const card = await s.card({
      fixed_rates: [{ code: "seats", name: "Seats", price: tiered("graduated", tier(5, 1000), tier(null, 800, 2000)) }],
      usage_based_rates: [
        usage(calls, tiered("volume", tier(1000, 3), tier(null, 2, 500)), { included_units: 100, maximum_amount: money(4000) }),
        usage(sales, percentage("2.9", 30), { code: "fees", name: "Card fees" }),
      ],
    });
    await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 12 } });
    await s.events(
      [
        ["2026-01-20T00:00:00Z", "600"],
        ["2026-01-21T00:00:00Z", "1500"],
      ],
      "calls",
    );
    await s.events([
      ["2026-01-20T00:00:00Z", "10000"],
      ["2026-01-22T00:00:00Z", "2345"],
      ["2026-01-23T00:00:00Z", "0"],
    ]);
    await s.advance("2026-02-15T00:00:00Z");
    const [first, second] = await s.invoices();
    // 12 seats: 5 × 1,000 + 7 × 800 + 2,000 = 12,600
    t.deepEqual(lines(first), [
      ["fixed", "Seats (tier 1: 1 – 5)", "5", "1000", "5000"],
      ["fixed", "Seats (tier 2: 6 and above)", "7", "800", "5600"],
      ["fixed", "Seats (tier 2: flat fee)", "1", "2000", "2000"],
    ]);
    t.is(first.total_amount.value, "12600");
    t.deepEqual(lines(second), [
      ...lines(first),
      // 2,100 calls − 100 included = 2,000 reach tier 2: 2,000 × 2 = 4,000 + 500 = 4,500, capped at 4,000: − 500
      ["usage", "API calls (tier 2: 1,001 and above)", "2000", "2", "4000"],
      ["usage", "API calls (tier 2: flat fee)", "1", "500", "500"],
      ["maximum", "API calls (maximum per period)", "1", "-500", "-500"],
      // 2.9% of 12,345 = 358.005 → 358; 3 events × 30 = 90 (the event of 0 counts)
      ["usage", "Card fees (2.9% of USD 123.45)", "12345", "0.029", "358"],
      ["usage", "Card fees (fee per event)", "3", "30", "90"],
    ]);
    // 12,600 + 4,000 + 358 + 90
    t.is(second.total_amount.value, "17048");
  });

  test(`${store}: invoices: a minimum with no usage, and prorated when a cancellation ends the window`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const card = await s.card({ usage_based_rates: [usage(m, tiered("graduated", tier(100, 2), tier(null, 1)), { minimum_amount: money(3100), maximum_amount: money(1000000) })] });
    await s.subscribe({ rate_card_id: card });
    await s.advance("2026-02-15T00:00:00Z");
    await s.events([["2026-02-16T00:00:00Z", "150"]]);
    await s.advance("2026-02-22T00:00:00Z");
    await s.call("POST", `/subscriptions/${(await s.subscriptions())[0].id}/cancel`, {});
    const invoices = await s.invoices();
    // No usage in Jan 15 → Feb 15: the whole minimum, 3,100.
    t.deepEqual(lines(invoices[0]), [["minimum", "API calls (minimum per period)", "1", "3100", "3100"]]);
    // Feb 15 → Feb 22 is 7 of 28 days: minimum 3,100 × 0.25 = 775; usage 100 × 2 + 50 × 1 = 250; + 525.
    t.deepEqual(lines(invoices[1]), [
      ["usage", "API calls (tier 1: 1 – 100)", "100", "2", "200"],
      ["usage", "API calls (tier 2: 101 and above)", "50", "1", "50"],
      ["minimum", "API calls (minimum per period, prorated)", "1", "525", "525"],
    ]);
    t.is(invoices[1].total_amount.value, "775");
  });

  test(`${store}: a draft with tiered and percentage cells and a minimum is priced again at finalization; usage equals billing`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    const m = await s.metric({ aggregation_type: "sum", value_field: "n" }, ["region"]);
    const rate = {
      usage_based_rate_type: "dimensional",
      code: "regional",
      name: "Regional",
      pricing_metric_id: m,
      included_units: 0,
      dimensions: [{ key: "region", values: ["eu", "us"] }],
      pricing_matrix: {
        cells: [
          { dimension_coordinates: { region: "eu" }, price: tiered("graduated", tier(100, 2), tier(null, 1)) },
          { dimension_coordinates: { region: "us" }, price: percentage("1.5") },
        ],
      },
      minimum_amount: money(5000),
    };
    await s.subscribe({ rate_card_id: await s.card({ usage_based_rates: [rate] }) });
    await s.events([
      ["2026-01-20T00:00:00Z", "150", { region: "eu" }],
      ["2026-01-21T00:00:00Z", "1000", { region: "us" }],
    ]);
    await s.advance("2026-02-15T00:00:00Z");
    const draft = (await s.invoices())[0];
    t.is(draft.status, "draft");
    // eu 150: 100 × 2 + 50 × 1 = 250; us 1.5% of 1,000 = 15; minimum 5,000 − 265 = 4,735
    t.deepEqual(lines(draft), [
      ["usage", "Regional (region=eu, tier 1: 1 – 100)", "100", "2", "200"],
      ["usage", "Regional (region=eu, tier 2: 101 and above)", "50", "1", "50"],
      ["usage", "Regional (region=us, 1.5% of USD 10.00)", "1000", "0.015", "15"],
      ["minimum", "Regional (minimum per period)", "1", "4735", "4735"],
    ]);
    // A late event of the period lands on the draft; the grace period ends.
    await s.events([["2026-02-01T00:00:00Z", "50", { region: "eu" }]]);
    await s.advance("2026-02-15T01:00:00Z");
    const final = (await s.invoices())[0];
    t.is(final.status, "open");
    // eu 200: 100 × 2 + 100 × 1 = 300; minimum 5,000 − 315 = 4,685; still one minimum line.
    t.deepEqual(lines(final), [
      ["usage", "Regional (region=eu, tier 1: 1 – 100)", "100", "2", "200"],
      ["usage", "Regional (region=eu, tier 2: 101 and above)", "100", "1", "100"],
      ["usage", "Regional (region=us, 1.5% of USD 10.00)", "1000", "0.015", "15"],
      ["minimum", "Regional (minimum per period)", "1", "4685", "4685"],
    ]);
    t.is(final.total_amount.value, "5000");
    // Usage equals billing: the summary's 1,200 = the tier lines' 200 + the percentage's 1,000.
    const [summary] = await s.call("POST", `/pricing-metrics/${m}/summary`, { subject_id: s.subjectId, period: { start: "2026-01-15T00:00:00Z", end: "2026-02-15T00:00:00Z" } });
    t.is(String(summary.value), "1200");
  });

  /** A card with a minimum of 3,100 and no usage, changed on Feb 1 to one without; 7 units after; closed on Feb 15. */
  async function changedMidCycle(): Promise<Json[]> {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const m = await s.metric();
    const a = await s.card({ usage_based_rates: [usage(m, tiered("volume", tier(null, 1)), { minimum_amount: money(3100) })] });
    const b = await s.card({ usage_based_rates: [usage(m, { price_type: "flat", amount: money(1) })] });
    await s.subscribe({ rate_card_id: a });
    await s.advance("2026-02-01T00:00:00Z");
    await s.call("POST", `/subscriptions/${(await s.subscriptions())[0].id}/change-rate-card`, { rate_card_id: b });
    await s.events([["2026-02-05T00:00:00Z", "7"]]);
    await s.advance("2026-02-15T00:00:00Z");
    return s.invoices();
  }

  test(`${store}: a rate-card change mid-cycle prorates the old card's minimum by the window's share of the cycle`, async (t) => {
    const [changed] = await changedMidCycle();
    // Jan 15 → Feb 1 is 17 of 31 days: 3,100 × 17/31 = 1,700, no usage.
    t.deepEqual(lines(changed), [["minimum", "API calls (minimum per period, prorated)", "1", "1700", "1700"]]);
  });

  // Late usage re-prices the old window: its minimum was billed with it, so nothing is billed again.
  test(`${store}: late-usage checks of a window with a minimum bill nothing again`, async (t) => {
    const [, closed] = await changedMidCycle();
    // The new card has no minimum: 7 × 1; the old window's minimum is not billed twice.
    t.deepEqual(lines(closed), [["usage", "API calls", "7", "1", "7"]]);
  });

  // Fails until a usage window keeps its cycle (UsageWindow.cycleStart/cycleEnd, stored in the
  // invoice's basis): priced again at finalization, the window would be taken as the start of a
  // cycle of its own (Feb 1 → Mar 1, 14 of 28 days: 1,550) instead of part of Jan 15 → Feb 15.
  test(`${store}: a draft window after a rate-card change keeps its prorated minimum when finalized`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
    const m = await s.metric();
    const cheap = await s.card({ usage_based_rates: [usage(m, { price_type: "flat", amount: money(1) })] });
    const dear = await s.card({ usage_based_rates: [usage(m, tiered("volume", tier(null, 1)), { minimum_amount: money(3100) })] });
    await s.subscribe({ rate_card_id: cheap });
    await s.advance("2026-02-01T00:00:00Z");
    await s.call("POST", `/subscriptions/${(await s.subscriptions())[0].id}/change-rate-card`, { rate_card_id: dear });
    await s.advance("2026-02-15T00:00:00Z");
    const window = (i: Json) => i.usage_period_start === "2026-02-01T00:00:00Z";
    // Feb 1 → Feb 15 is 14 of the cycle's 31 days: 3,100 × 14/31 = 1,400.
    const want = [["minimum", "API calls (minimum per period, prorated)", "1", "1400", "1400"]];
    t.deepEqual(lines((await s.invoices()).find(window)), want, "the draft");
    await s.advance("2026-02-15T01:00:00Z");
    const final = (await s.invoices()).find(window);
    t.is(final.status, "open");
    t.deepEqual(lines(final), want, "finalized");
  });
}
