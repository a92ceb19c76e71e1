/**
 * The catalog end to end, on MariaDB and SQLite: pricing metrics, rate cards and rate catalogs
 * over REST and gRPC; exact decimal round-trips; rule violations as 400s that write nothing;
 * isolation between environments; a large card in one request.
 */
import { type DescMessage, type JsonObject, type MessageShape, toJson } from "@bufbuild/protobuf";
import test from "ava";
import { PricingMetricService } from "../../src/gen/billing/v1/pricing_metric_service_pb.js";
import { RateCardService } from "../../src/gen/billing/v1/rate_card_service_pb.js";
import { RateCatalogService } from "../../src/gen/billing/v1/rate_catalog_service_pb.js";
import { withNulls } from "../../src/rpc/json-out.js";
import { ok, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { startTestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const J = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;
/** A message as the server writes it in JSON (unset optional fields are null, src/rpc/json-out.ts). */
const asServed = <D extends DescMessage>(desc: D, message: MessageShape<D>) => withNulls(desc, toJson(desc, message, J) as JsonObject);

const metricBody = (over: Json = {}) => ({
  event_name: "tokens",
  name: "Tokens",
  unit: "token",
  dimensions: ["region", "model"],
  aggregation: { aggregation_type: "sum", value_field: "count" },
  ...over,
});

function cardBody(metricId: string, over: Json = {}): Json {
  return {
    billing_interval: "monthly",
    name: "Pro",
    description: "For teams",
    metadata: { tier: "pro" },
    fixed_rates: [{ code: "seats", name: "Seats", description: "per seat", price: { amount: { currency_code: "USD", value: 2000 } } }],
    usage_based_rates: [
      {
        usage_based_rate_type: "simple",
        code: "tokens",
        name: "Tokens",
        pricing_metric_id: metricId,
        included_units: 1000,
        price: { price_type: "package", amount: { currency_code: "USD", value: "0.000001" }, package_units: 1000, rounding_behavior: "round_down" },
      },
      {
        usage_based_rate_type: "dimensional",
        code: "by_region",
        name: "Tokens by region",
        pricing_metric_id: metricId,
        dimensions: [{ key: "region", values: ["eu", "us"], description: "where" }],
        pricing_matrix: {
          cells: [
            { dimension_coordinates: { region: "eu" }, price: { amount: { currency_code: "USD", value: "12345678901234567890.5" } } },
            { dimension_coordinates: { region: "us" }, price: { amount: { currency_code: "usd", value: 0 } } },
          ],
        },
      },
    ],
    ...over,
  };
}

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: pricing metrics of every aggregation type; get; list with limit and offset`, async (t) => {
    const key = await server.freshKey();
    const made: Json[] = [];
    for (const aggregation of [
      { aggregation_type: "sum", value_field: "tokens" },
      { aggregation_type: "count" },
      { aggregation_type: "max", value_field: "gb" },
      { aggregation_type: "last", value_field: "seats" },
    ]) {
      const m = await ok(server, key, "POST", "/pricing-metrics", metricBody({ aggregation, dimensions: [] }));
      t.regex(m.id, /^pm_[0-9A-Za-z]{22}$/);
      // value_field, absent for count, is null (DESIGN §4).
      t.deepEqual(m.aggregation, { value_field: null, ...aggregation });
      t.deepEqual(m.dimensions, []);
      made.push(m);
    }
    t.deepEqual(await ok(server, key, "GET", `/pricing-metrics/${made[2].id}`), made[2]);
    const page = await ok(server, key, "GET", "/pricing-metrics?limit=3");
    t.deepEqual(page.pricing_metrics, made.slice(0, 3));
    t.true(page.has_more);
    const rest2 = await ok(server, key, "GET", "/pricing-metrics?limit=3&offset=3");
    t.deepEqual(rest2, { has_more: false, pricing_metrics: [made[3]] });

    const c = rpcClient(PricingMetricService, server.url, "grpc", key);
    const viaGrpc = await c.createPricingMetric({ eventName: "e", name: "n", unit: "u", dimensions: ["a"], aggregation: { aggregationType: "count" } });
    const got = await c.getPricingMetric({ pricingMetricId: viaGrpc.pricingMetric!.id });
    t.deepEqual(asServed(PricingMetricService.method.getPricingMetric.output, got), { pricing_metric: { ...(await ok(server, key, "GET", `/pricing-metrics/${viaGrpc.pricingMetric!.id}`)) } });
  });

  const metricCases: [string, Json, string[]][] = [
    ["missing event_name, name and unit", { event_name: "", name: "", unit: "" }, ["event_name", "name", "unit"]],
    ["an unknown aggregation_type", { aggregation: { aggregation_type: "avg", value_field: "x" } }, ["aggregation.aggregation_type"]],
    ["sum without value_field", { aggregation: { aggregation_type: "sum" } }, ["aggregation.value_field"]],
    ["count with a value_field", { aggregation: { aggregation_type: "count", value_field: "x" } }, ["aggregation.value_field"]],
    ["no aggregation", { aggregation: undefined }, ["aggregation"]],
    ["duplicate dimensions", { dimensions: ["a", "a"] }, ["dimensions[1]"]],
  ];
  for (const [title, over, fields] of metricCases) {
    test(`${store}: pricing metric with ${title} is a 400 and writes nothing`, async (t) => {
      const key = await server.freshKey();
      const r = await rest(server.url, "POST", "/pricing-metrics", key, metricBody(over));
      t.is(r.status, 400);
      t.deepEqual(violatedFields(r.body).sort(), fields.sort());
      t.deepEqual((await ok(server, key, "GET", "/pricing-metrics")).pricing_metrics, []);
    });
  }

  test(`${store}: a rate card reads back exactly as documented, over REST and gRPC`, async (t) => {
    const key = await server.freshKey();
    const metric = await ok(server, key, "POST", "/pricing-metrics", metricBody());
    const card = await ok(server, key, "POST", "/rate-cards", cardBody(metric.id));
    t.regex(card.id, /^rc_/);
    t.is(card.billing_interval, "monthly");
    t.is(card.rate_catalog_id, null, "no catalog: null, never an empty string");
    t.is(card.description, "For teams");
    t.deepEqual(card.metadata, { tier: "pro" });
    t.regex(card.created_at, /Z$/);
    t.is(card.updated_at, card.created_at);
    const [seats] = card.fixed_rates;
    t.regex(seats.id, /^rate_/);
    t.deepEqual(
      { ...seats, id: "" },
      {
        id: "",
        code: "seats",
        name: "Seats",
        description: "per seat",
        price: {
          price_type: "flat",
          amount: { currency_code: "USD", value: "2000" },
          package_units: null,
          rounding_behavior: null,
          tiers_mode: null,
          tiers: [],
          percent: null,
          fixed_amount_per_event: null,
        },
      },
    );
    const [tokens, byRegion] = card.usage_based_rates;
    t.is(tokens.included_units, 1000, "included_units is a JSON number");
    t.is(tokens.usage_based_rate_type, "simple");
    t.is(tokens.description, null, "no description: null");
    t.is(tokens.pricing_matrix, null, "a simple rate's dimensional fields: null and []");
    t.deepEqual(tokens.dimensions, []);
    t.is(byRegion.price, null);
    const none = { tiers_mode: null, tiers: [], percent: null, fixed_amount_per_event: null };
    t.deepEqual(tokens.price, { price_type: "package", amount: { currency_code: "USD", value: "0.000001" }, package_units: 1000, rounding_behavior: "round_down", ...none });
    t.deepEqual([tokens.minimum_amount, tokens.maximum_amount, card.archived, card.archived_at], [null, null, false, null], "no minimum, maximum or archiving: null and false");
    t.is(byRegion.usage_based_rate_type, "dimensional");
    t.is(byRegion.included_units, 0);
    t.deepEqual(byRegion.dimensions, [{ key: "region", values: ["eu", "us"], description: "where" }]);
    t.deepEqual(byRegion.pricing_matrix.cells, [
      {
        dimension_coordinates: { region: "eu" },
        price: { price_type: "flat", amount: { currency_code: "USD", value: "12345678901234567890.5" }, package_units: null, rounding_behavior: null, ...none },
      },
      { dimension_coordinates: { region: "us" }, price: { price_type: "flat", amount: { currency_code: "USD", value: "0" }, package_units: null, rounding_behavior: null, ...none } },
    ]);
    t.deepEqual(await ok(server, key, "GET", `/rate-cards/${card.id}`), card);

    const c = rpcClient(RateCardService, server.url, "grpc", key);
    const got = await c.getRateCard({ rateCardId: card.id });
    t.deepEqual(asServed(RateCardService.method.getRateCard.output, got), { rate_card: card });
    const list = await ok(server, key, "GET", "/rate-cards?limit=1");
    t.deepEqual(list, { has_more: false, rate_cards: [card] });
  });

  test(`${store}: rate card rule violations are 400s with field paths, and write nothing`, async (t) => {
    const key = await server.freshKey();
    const metric = await ok(server, key, "POST", "/pricing-metrics", metricBody());
    const other = await ok(server, server.keys.b, "POST", "/pricing-metrics", metricBody());
    const cases: [Json, string[]][] = [
      [{ billing_interval: "weekly" }, ["billing_interval"]],
      [{ billing_interval: undefined, name: "" }, ["billing_interval", "name"]],
      [{ fixed_rates: [{ code: "x", name: "X", price: { amount: { currency_code: "USD", value: "abc" } } }] }, ["fixed_rates[0].price.amount.value"]],
      [{ fixed_rates: [{ code: "x", name: "X", price: { amount: { currency_code: "USD", value: true } } }] }, ["fixed_rates[0].price.amount.value"]],
      // The first price (EUR) sets the card's currency; each USD price after it is reported.
      [
        { fixed_rates: [{ code: "tokens", name: "X", price: { amount: { currency_code: "EUR", value: 1 } } }] },
        [
          "usage_based_rates[0].code",
          "usage_based_rates[0].price.amount.currency_code",
          "usage_based_rates[1].pricing_matrix.cells[0].price.amount.currency_code",
          "usage_based_rates[1].pricing_matrix.cells[1].price.amount.currency_code",
        ],
      ],
      [{ usage_based_rates: [{ ...cardBody(other.id).usage_based_rates[0] }] }, ["usage_based_rates[0].pricing_metric_id"]],
      // biome-ignore lint/correctness/noPrecisionLoss: an integer beyond 2^53 is what this case sends
      [{ usage_based_rates: [{ ...cardBody(metric.id).usage_based_rates[0], included_units: 9007199254740993 }] }, ["usage_based_rates[0].included_units"]],
      [{ rate_catalog_id: "rcat_nope" }, ["rate_catalog_id"]],
    ];
    for (const [over, fields] of cases) {
      const r = await rest(server.url, "POST", "/rate-cards", key, cardBody(metric.id, over));
      t.is(r.status, 400, JSON.stringify(over));
      t.deepEqual(violatedFields(r.body).sort(), [...fields].sort(), JSON.stringify(over));
    }
    t.deepEqual(await ok(server, key, "GET", "/rate-cards"), { has_more: false, rate_cards: [] });
    t.is((await rest(server.url, "GET", "/rate-cards/rc_nope", key)).status, 404);
  });

  test(`${store}: a card with 50 rates and a 100-cell matrix is created and read back in one request each`, async (t) => {
    const key = await server.freshKey();
    const metric = await ok(server, key, "POST", "/pricing-metrics", metricBody());
    const regions = Array.from({ length: 10 }, (_, i) => `r${i}`);
    const models = Array.from({ length: 10 }, (_, i) => `m${i}`);
    const cells = regions.flatMap((region, i) => models.map((model, j) => ({ dimension_coordinates: { region, model }, price: { amount: { currency_code: "EUR", value: `${i}.${j}00000000001` } } })));
    const body = {
      billing_interval: "yearly",
      name: "Big",
      fixed_rates: Array.from({ length: 25 }, (_, i) => ({ code: `f${i}`, name: `Fixed ${i}`, price: { amount: { currency_code: "EUR", value: i * 100 } } })),
      usage_based_rates: [
        {
          usage_based_rate_type: "dimensional",
          code: "matrix",
          name: "Matrix",
          pricing_metric_id: metric.id,
          dimensions: [
            { key: "region", values: regions },
            { key: "model", values: models },
          ],
          pricing_matrix: { cells },
        },
        ...Array.from({ length: 24 }, (_, i) => ({
          usage_based_rate_type: "simple",
          code: `u${i}`,
          name: `Usage ${i}`,
          pricing_metric_id: metric.id,
          included_units: i,
          price: { amount: { currency_code: "EUR", value: `0.${i}` } },
        })),
      ],
    };
    const card = await ok(server, key, "POST", "/rate-cards", body);
    t.is(card.fixed_rates.length + card.usage_based_rates.length, 50);
    t.is(card.usage_based_rates[0].pricing_matrix.cells.length, 100);
    t.is(card.usage_based_rates[0].pricing_matrix.cells[99].price.amount.value, "9.900000000001");
    t.is(card.fixed_rates[24].price.amount.value, "2400");
    t.deepEqual(await ok(server, key, "GET", `/rate-cards/${card.id}`), card);
  });

  test(`${store}: rate catalogs: create, get, list, add rates per interval, list rates, cards that use them`, async (t) => {
    const key = await server.freshKey();
    const metric = await ok(server, key, "POST", "/pricing-metrics", metricBody());
    const cat = await ok(server, key, "POST", "/rate-catalogs", { name: "Add-ons", description: "Optional extras" });
    t.deepEqual({ ...cat, id: "" }, { id: "", name: "Add-ons", description: "Optional extras", rate_count: 0 });
    t.deepEqual(await ok(server, key, "GET", `/rate-catalogs/${cat.id}`), cat);
    // A card of a catalog with no priced rates yet, and none of its own, would have no currency (its
    // invoices labelled USD whatever the catalog's rates are later priced in): refused, nothing written.
    const currencyless = await rest(server.url, "POST", "/rate-cards", key, { billing_interval: "monthly", name: "Base", rate_catalog_id: cat.id });
    t.is(currencyless.status, 400);
    t.deepEqual(violatedFields(currencyless.body), ["rate_catalog_id"]);
    t.deepEqual((await ok(server, key, "GET", "/rate-cards")).rate_cards, []);

    const monthly = await ok(server, key, "POST", `/rate-catalogs/${cat.id}/add_rates`, {
      billing_interval: "monthly",
      fixed_rates: [{ code: "support", name: "Support", price: { amount: { currency_code: "USD", value: 5000 } } }],
      usage_based_rates: [cardBody(metric.id).usage_based_rates[1]],
    });
    t.is(monthly.rate_count, 2);
    const yearly = await ok(server, key, "POST", `/rate-catalogs/${cat.id}/add_rates`, {
      billing_interval: "yearly",
      fixed_rates: [{ code: "support", name: "Support (yearly)", price: { amount: { currency_code: "USD", value: 50000 } } }],
    });
    t.is(yearly.rate_count, 3, "the same code is allowed again for another interval");

    const rates = await ok(server, key, "GET", `/rate-catalogs/${cat.id}/rates?limit=2`);
    t.true(rates.has_more);
    t.deepEqual(
      rates.rates.map((r: Json) => [r.type, r.interval, r.rate_catalog_id === cat.id, (r.fixed ?? r.usage_based).code]),
      [
        ["fixed", "monthly", true, "support"],
        ["usage_based", "monthly", true, "by_region"],
      ],
    );
    t.is(rates.rates[0].fixed.price.amount.value, "5000");
    t.is(rates.rates[0].usage_based, null, "the other variant is null");
    t.is(rates.rates[1].fixed, null);
    t.is(rates.rates[1].usage_based.pricing_matrix.cells[0].price.amount.value, "12345678901234567890.5");
    const last = await ok(server, key, "GET", `/rate-catalogs/${cat.id}/rates?limit=2&offset=2`);
    t.deepEqual([last.has_more, last.rates.length, last.rates[0].interval], [false, 1, "yearly"]);

    // Taken code for the interval; another currency than the catalog's; both write nothing.
    const dup = await rest(server.url, "POST", `/rate-catalogs/${cat.id}/add_rates`, key, {
      billing_interval: "monthly",
      fixed_rates: [
        { code: "extra", name: "Extra", price: { amount: { currency_code: "USD", value: 1 } } },
        { code: "support", name: "Support again", price: { amount: { currency_code: "USD", value: 1 } } },
      ],
    });
    t.is(dup.status, 400);
    t.deepEqual(violatedFields(dup.body), ["fixed_rates[1].code"]);
    const eur = await rest(server.url, "POST", `/rate-catalogs/${cat.id}/add_rates`, key, {
      billing_interval: "monthly",
      fixed_rates: [{ code: "eur", name: "EUR", price: { amount: { currency_code: "EUR", value: 1 } } }],
    });
    t.deepEqual(violatedFields(eur.body), ["fixed_rates[0].price.amount.currency_code"]);
    const bad = await rest(server.url, "POST", `/rate-catalogs/${cat.id}/add_rates`, key, { billing_interval: "daily" });
    t.deepEqual(violatedFields(bad.body).sort(), ["", "billing_interval"]);
    t.is((await ok(server, key, "GET", `/rate-catalogs/${cat.id}`)).rate_count, 3);

    // A card on the catalog must use its currency.
    const eurCard = await rest(server.url, "POST", "/rate-cards", key, {
      billing_interval: "monthly",
      name: "EUR plan",
      rate_catalog_id: cat.id,
      fixed_rates: [{ code: "base", name: "Base", price: { amount: { currency_code: "EUR", value: 1 } } }],
    });
    t.deepEqual(violatedFields(eurCard.body), ["fixed_rates[0].price.amount.currency_code"]);
    const withCatalog = await ok(server, key, "POST", "/rate-cards", {
      billing_interval: "monthly",
      name: "USD plan",
      rate_catalog_id: cat.id,
      fixed_rates: [{ code: "base", name: "Base", price: { amount: { currency_code: "USD", value: 1 } } }],
    });
    t.is(withCatalog.rate_catalog_id, cat.id);
    t.deepEqual(
      withCatalog.fixed_rates.map((r: Json) => r.code),
      ["base"],
      "a card lists its own rates; the catalog's are add-ons",
    );

    const list = await ok(server, key, "GET", "/rate-catalogs");
    t.deepEqual(
      list.rate_catalogs.map((c: Json) => [c.id, c.rate_count]),
      [[cat.id, 3]],
    );

    // gRPC sees the same.
    const c = rpcClient(RateCatalogService, server.url, "grpc", key);
    const listed = await c.listCatalogRates({ rateCatalogId: cat.id, limit: 100 });
    t.is(listed.rates.length, 3);
    t.is((await c.getRateCatalog({ rateCatalogId: cat.id })).rateCatalog?.rateCount, 3);
    t.is((await rest(server.url, "GET", "/rate-catalogs/rcat_nope/rates", key)).status, 404);
    t.is((await rest(server.url, "POST", "/rate-catalogs/rcat_nope/add_rates", key, { billing_interval: "monthly", fixed_rates: [] })).status, 404);
  });

  test(`${store}: catalog resources are isolated between environments`, async (t) => {
    const a = await server.freshKey();
    const b = await server.freshKey();
    const metric = await ok(server, a, "POST", "/pricing-metrics", metricBody());
    const card = await ok(server, a, "POST", "/rate-cards", cardBody(metric.id));
    const cat = await ok(server, a, "POST", "/rate-catalogs", { name: "A", description: "" });
    for (const path of [`/pricing-metrics/${metric.id}`, `/rate-cards/${card.id}`, `/rate-catalogs/${cat.id}`, `/rate-catalogs/${cat.id}/rates`]) {
      t.is((await rest(server.url, "GET", path, b)).status, 404, path);
    }
    for (const path of ["/pricing-metrics", "/rate-cards", "/rate-catalogs"]) {
      const body = (await rest(server.url, "GET", path, b)).body;
      t.is(Object.values(body).find(Array.isArray)?.length, 0, path);
    }
    const viaB = await rest(server.url, "POST", "/rate-cards", b, cardBody(metric.id, { rate_catalog_id: cat.id }));
    t.deepEqual(violatedFields(viaB.body).sort(), ["rate_catalog_id", "usage_based_rates[0].pricing_metric_id", "usage_based_rates[1].pricing_metric_id"]);
    t.is((await rest(server.url, "POST", `/rate-catalogs/${cat.id}/add_rates`, b, { billing_interval: "monthly" })).status, 404);
  });
}

for (const store of STORES) {
  test(`${store} grpc: every catalog operation`, async (t) => {
    const server = await startTestServer(store);
    try {
      const key = server.keys.a;
      const metrics = rpcClient(PricingMetricService, server.url, "grpc", key);
      const cards = rpcClient(RateCardService, server.url, "grpc", key);
      const catalogs = rpcClient(RateCatalogService, server.url, "grpc", key);
      const m = (await metrics.createPricingMetric({ eventName: "e", name: "E", unit: "u", dimensions: ["region"], aggregation: { aggregationType: "max", valueField: "v" } })).pricingMetric!;
      t.deepEqual(
        (await metrics.listPricingMetrics({ limit: 10 })).pricingMetrics.map((x) => x.id),
        [m.id],
      );

      const cat = (await catalogs.createRateCatalog({ name: "Cat", description: "d" })).rateCatalog!;
      const added = await catalogs.addRates({
        rateCatalogId: cat.id,
        billingInterval: "yearly",
        fixedRates: [{ code: "x", name: "X", price: { amount: { currencyCode: "JPY", value: "100" } } }],
      });
      t.is(added.rateCatalog?.rateCount, 1);
      t.deepEqual(
        (await catalogs.listRateCatalogs({})).rateCatalogs.map((c) => [c.id, c.rateCount]),
        [[cat.id, 1]],
      );

      const card = (
        await cards.createRateCard({
          billingInterval: "yearly",
          name: "G",
          rateCatalogId: cat.id,
          usageBasedRates: [
            {
              usageBasedRateType: "dimensional",
              code: "d",
              name: "D",
              pricingMetricId: m.id,
              includedUnits: 5,
              dimensions: [{ key: "region", values: ["eu"] }],
              pricingMatrix: {
                cells: [{ dimensionCoordinates: { region: "eu" }, price: { priceType: "package", amount: { currencyCode: "JPY", value: "10" }, packageUnits: 100, roundingBehavior: "round_up" } }],
              },
            },
          ],
        })
      ).rateCard!;
      t.is(card.usageBasedRates[0]?.pricingMatrix?.cells[0]?.price?.packageUnits, 100);
      const listed = await cards.listRateCards({ limit: 1 });
      t.deepEqual([listed.hasMore, listed.rateCards[0]?.id], [false, card.id]);
      const rest1 = await rest(server.url, "GET", `/rate-cards/${card.id}`, key);
      t.deepEqual(asServed(RateCardService.method.getRateCard.output, await cards.getRateCard({ rateCardId: card.id })), { rate_card: rest1.body });
      const err = await t.throwsAsync(
        cards.createRateCard({ billingInterval: "monthly", name: "bad", fixedRates: [{ code: "a", name: "A", price: { amount: { currencyCode: "USD", value: "-1" } } }] }),
      );
      t.regex(String(err?.message), /fixed_rates\[0\]\.price\.amount\.value/);
    } finally {
      await server.stop();
    }
  });
}
