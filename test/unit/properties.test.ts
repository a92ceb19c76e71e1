/**
 * Property tests (fast-check) for the invariants the field learned (LESSONS §7): a package price
 * rounds up, totals do not depend on event order, and splitting a period then merging equals
 * billing it whole.
 */
import test, { type ExecutionContext } from "ava";
import fc from "fast-check";
import type { AggregationType, MatrixCell, Price, PricingMetric } from "../../src/billing/catalog/types.js";
import { dimensionalLines, line, simpleUsageLine, total } from "../../src/billing/invoicing/lines.js";
import { type Agg, EMPTY, aggOfEvent, combine, valueOf } from "../../src/billing/metering/aggregate.js";
import { type Granularity, HOUR, type Range, buckets, contains, splitByHours } from "../../src/billing/metering/periods.js";
import { type Decimal, dec, formatDecimal } from "../../src/billing/money.js";

/** Runs a property; a counterexample fails the test with fast-check's report. */
function holds(t: ExecutionContext, property: fc.IPropertyWithHooks<unknown> | fc.IProperty<unknown>, numRuns = 300): void {
  t.notThrows(() => fc.assert(property, { numRuns }));
}

/** A non-negative decimal with up to `places` digits after the point, as text. */
const decimalText = (max = 10n ** 12n, places = 6) => fc.tuple(fc.bigInt({ min: 0n, max }), fc.integer({ min: 0, max: places })).map(([n, k]) => formatDecimal(dec(n.toString()).div(dec(10).pow(k))));
const positiveWhole = (max = 1_000_000) => fc.integer({ min: 1, max }).map(String);

const packagePrice = (rounding: "round_up" | "round_down") =>
  fc.tuple(decimalText(10n ** 6n, 2), positiveWhole(10_000)).map(([value, units]): Price => ({ kind: "package", amount: { currency: "USD", value }, packageUnits: units, rounding }));

test("a round_up package price bills the fewest whole packages that cover the billable usage", (t) => {
  holds(
    t,
    fc.property(packagePrice("round_up"), decimalText(), decimalText(10n ** 8n, 0), (price, usedText, includedText) => {
      if (price.kind !== "package") return;
      const used = dec(usedText);
      const included = dec(includedText);
      const billable = used.minus(included);
      const lines = simpleUsageLine("u", price, used, included, dec(1));
      if (billable.lte(0)) return lines.length === 0;
      const size = dec(price.packageUnits);
      const [l] = lines;
      return (
        lines.length === 1 &&
        l.quantity.isInteger() &&
        l.quantity.times(size).gte(billable) && // covers the usage
        l.quantity.minus(1).times(size).lt(billable) && // and one package fewer would not
        l.amount.eq(l.quantity.times(dec(price.amount.value)).toDecimalPlaces(0, 4 /* half-up */))
      );
    }),
  );
});

test("a round_up package never bills less than round_down, and at most one package more", (t) => {
  holds(
    t,
    fc.property(packagePrice("round_up"), decimalText(), (up, usedText) => {
      if (up.kind !== "package") return;
      const down: Price = { ...up, rounding: "round_down" };
      const q = (p: Price) => simpleUsageLine("u", p, dec(usedText), dec(0), dec(1))[0]?.quantity ?? dec(0);
      const diff = q(up).minus(q(down));
      return diff.eq(0) || diff.eq(1);
    }),
  );
});

// ---- Totals do not depend on event order.

interface Event {
  at: number;
  key: string;
  value: string;
}
const events = fc.array(fc.record({ at: fc.integer({ min: 0, max: 1_000 }), key: fc.string({ minLength: 1, maxLength: 4 }), value: decimalText(10n ** 9n, 3) }), { maxLength: 40 });
const metric = (type: AggregationType): PricingMetric => ({ id: "m", code: "m", name: "m", aggregation: { type, valueField: type === "count" ? undefined : "v" } }) as unknown as PricingMetric;

function aggregate(type: AggregationType, list: readonly Event[]): Agg {
  let acc = EMPTY;
  for (const e of list) {
    const a = aggOfEvent(metric(type), { v: e.value }, e.at, e.key);
    if (a) acc = combine(acc, a);
  }
  return acc;
}

for (const type of ["sum", "count", "max", "last"] as AggregationType[]) {
  test(`${type}: the aggregate of events is the same in any order`, (t) => {
    holds(
      t,
      fc.property(
        // Distinct (at, key) pairs, as idempotency keys make them: "last" breaks ties by key.
        events.map((es) => [...new Map(es.map((e) => [`${e.at}|${e.key}`, e])).values()]),
        fc.infiniteStream(fc.nat()),
        (es, seeds) => {
          const shuffled = es
            .map((e) => ({ e, r: seeds.next().value }))
            .sort((a, b) => a.r - b.r)
            .map((x) => x.e);
          return valueOf(type, aggregate(type, es)) === valueOf(type, aggregate(type, shuffled));
        },
      ),
    );
  });
}

test("dimensional lines and their total are the same in any order of usage", (t) => {
  const flat = (value: string): Price => ({ kind: "flat", amount: { currency: "USD", value } });
  const cells: MatrixCell[] = [
    { coordinates: { r: "a" }, price: flat("3") },
    { coordinates: { r: "b" }, price: flat("1.25") },
    { coordinates: { r: "c" }, price: { kind: "package", amount: { currency: "USD", value: "40" }, packageUnits: "7", rounding: "round_up" } },
  ];
  const usage = fc.array(fc.record({ r: fc.constantFrom("a", "b", "c", "d"), used: decimalText(10n ** 6n, 2) }), { maxLength: 20 });
  holds(
    t,
    fc.property(usage, decimalText(10n ** 6n, 0), fc.infiniteStream(fc.nat()), (us, included, seeds) => {
      const bill = (list: typeof us) =>
        dimensionalLines(
          "x",
          cells,
          list.map((u) => ({ coordinates: { r: u.r }, used: dec(u.used) })),
          dec(included),
          dec(1),
          (c) => c.r,
        ).map((l) => `${l.description} ${formatDecimal(l.quantity)} ${formatDecimal(l.amount)}`);
      const shuffled = us
        .map((u) => ({ u, k: seeds.next().value }))
        .sort((a, b) => a.k - b.k)
        .map((x) => x.u);
      return JSON.stringify(bill(us)) === JSON.stringify(bill(shuffled));
    }),
  );
});

// ---- Splitting a period then merging equals billing it whole.

const HOURS = 24 * 21;
const range = fc
  .tuple(fc.integer({ min: 0, max: HOURS * HOUR }), fc.integer({ min: 0, max: HOURS * HOUR }), fc.boolean(), fc.boolean())
  .map(([a, b, inclusiveStart, inclusiveEnd]): Range => ({ start: Math.min(a, b), end: Math.max(a, b), inclusiveStart, inclusiveEnd }));
/** Instants that like to sit on hour boundaries and on the range's edges, where mistakes live. */
const instants = fc.array(
  fc.oneof(
    fc.integer({ min: 0, max: HOURS }).map((h) => h * HOUR),
    fc.integer({ min: 0, max: HOURS * HOUR }),
  ),
  { maxLength: 60 },
);

test("the buckets of a range hold every instant of it exactly once, for every granularity", (t) => {
  holds(
    t,
    fc.property(range, fc.constantFrom<Granularity | undefined>(undefined, "hour", "day", "week"), instants, (r, g, ts) => {
      const bs = buckets(r, g);
      return [...ts, r.start, r.end].every((at) => bs.filter((b) => contains(b, at)).length === (contains(r, at) ? 1 : 0));
    }),
  );
});

test("whole hours plus partial edges (splitByHours) hold every instant of a range exactly once", (t) => {
  holds(
    t,
    fc.property(range, instants, (r, ts) => {
      const s = splitByHours(r);
      const inFull = (at: number) => at >= s.fullFrom && at < s.fullTo;
      return [...ts, r.start, r.end].every((at) => (inFull(at) ? 1 : 0) + s.edges.filter((e) => contains(e, at)).length === (contains(r, at) ? 1 : 0));
    }),
  );
});

test("usage aggregated per bucket and merged is the usage of the whole period, and bills the same", (t) => {
  const price: Price = { kind: "package", amount: { currency: "USD", value: "12.5" }, packageUnits: "3", rounding: "round_up" };
  holds(
    t,
    fc.property(
      range,
      fc.constantFrom<Granularity>("hour", "day", "week"),
      fc.array(fc.record({ at: fc.integer({ min: 0, max: HOURS * HOUR }), value: decimalText(10n ** 6n, 3) }), { maxLength: 40 }),
      (r, g, es) => {
        const aggIn = (part: Range) => es.filter((e) => contains(part, e.at)).reduce<Agg>((acc, e, i) => combine(acc, aggOfEvent(metric("sum"), { v: e.value }, e.at, String(i)) ?? EMPTY), EMPTY);
        const whole = aggIn(r);
        const merged = buckets(r, g).map(aggIn).reduce(combine, EMPTY);
        const bill = (a: Agg) => total(simpleUsageLine("u", price, a.sum, dec(2), dec(1)));
        return whole.sum.eq(merged.sum) && whole.count.eq(merged.count) && bill(whole).eq(bill(merged));
      },
    ),
  );
});

test("a flat price in whole units: the lines of a split period add up to the line of the whole", (t) => {
  holds(
    t,
    fc.property(fc.array(fc.bigInt({ min: 0n, max: 10n ** 9n }), { minLength: 1, maxLength: 12 }), fc.bigInt({ min: 0n, max: 10n ** 6n }), (parts, unit) => {
      const q = (n: bigint): Decimal => dec(n.toString());
      const split = total(parts.map((p) => line("u", q(p), q(unit))));
      const whole = line(
        "u",
        parts.map(q).reduce((a, b) => a.plus(b)),
        q(unit),
      ).amount;
      return split.eq(whole);
    }),
  );
});
