/**
 * Tiered and percentage prices, minimum and maximum per period (src/billing/invoicing/tiers.ts,
 * limits.ts, through lines.ts), table-driven with the arithmetic beside each case, and fast-check
 * properties: graduated totals never fall as the quantity grows and equal the sum over tiers,
 * volume totals are the quantity at the reached tier plus its flat fee, and splitting usage
 * across events in any order gives the same lines.
 */
import test from "ava";
import fc from "fast-check";
import type { Price, Tier } from "../../src/billing/catalog/types.js";
import { limitLine, windowShare } from "../../src/billing/invoicing/limits.js";
import { type Line, dimensionalLines, fixedLine, simpleUsageLine, total } from "../../src/billing/invoicing/lines.js";
import { graduatedSplit, tierRange, volumeTier } from "../../src/billing/invoicing/tiers.js";
import { type Decimal, dec, formatDecimal, roundAmount } from "../../src/billing/money.js";

const usd = (value: string) => ({ currency: "USD", value });
const tier = (upTo: string | null, unit: string, flat?: string): Tier => ({ upTo, unitAmount: usd(unit), flatAmount: flat === undefined ? null : usd(flat) });
const graduated = (...tiers: Tier[]): Price => ({ kind: "tiered", currency: "USD", mode: "graduated", tiers });
const volume = (...tiers: Tier[]): Price => ({ kind: "tiered", currency: "USD", mode: "volume", tiers });
const percentage = (percent: string, fee: string | null): Price => ({ kind: "percentage", currency: "USD", percent, fixedPerEvent: fee === null ? null : usd(fee) });

/** [description, quantity, unit amount, amount, cell] of each line. */
const plain = (lines: Line[]) => lines.map((l) => [l.description, formatDecimal(l.quantity), formatDecimal(l.unitAmount), formatDecimal(l.amount), l.cell ?? ""]);

// 1–1,000 at 10, 1,001–5,000 at 8 (+ 500 once), above at 5 (+ 1,000 once).
const API = [tier("1000", "10"), tier("5000", "8", "500"), tier(null, "5", "1000")];

type Case = [title: string, price: Price, used: string, included: string, multiplier: string, want: string[][]];
const usageCases: Case[] = [
  ["graduated, zero: no tier touched", graduated(...API), "0", "0", "1", []],
  // 1 × 10
  ["graduated, one unit", graduated(...API), "1", "0", "1", [["API calls (tier 1: 1 – 1,000)", "1", "10", "10", "tier:1"]]],
  // 1,000 × 10: exactly up_to stays in tier 1
  ["graduated, exactly up_to", graduated(...API), "1000", "0", "1", [["API calls (tier 1: 1 – 1,000)", "1000", "10", "10000", "tier:1"]]],
  // 1,000 × 10 + 1 × 8 + 500
  [
    "graduated, one over",
    graduated(...API),
    "1001",
    "0",
    "1",
    [
      ["API calls (tier 1: 1 – 1,000)", "1000", "10", "10000", "tier:1"],
      ["API calls (tier 2: 1,001 – 5,000)", "1", "8", "8", "tier:2"],
      ["API calls (tier 2: flat fee)", "1", "500", "500", "tier:2:flat"],
    ],
  ],
  // 1,000 × 10 + 0.5 × 8 = 4 + 500: a fraction split at the bound
  [
    "graduated, fractional over a bound",
    graduated(...API),
    "1000.5",
    "0",
    "1",
    [
      ["API calls (tier 1: 1 – 1,000)", "1000", "10", "10000", "tier:1"],
      ["API calls (tier 2: 1,001 – 5,000)", "0.5", "8", "4", "tier:2"],
      ["API calls (tier 2: flat fee)", "1", "500", "500", "tier:2:flat"],
    ],
  ],
  // 7,000 used − 500 included = 6,500: 1,000 × 10 + 4,000 × 8 + 500 + 1,500 × 5 + 1,000
  [
    "graduated, all tiers after included units",
    graduated(...API),
    "7000",
    "500",
    "1",
    [
      ["API calls (tier 1: 1 – 1,000)", "1000", "10", "10000", "tier:1"],
      ["API calls (tier 2: 1,001 – 5,000)", "4000", "8", "32000", "tier:2"],
      ["API calls (tier 2: flat fee)", "1", "500", "500", "tier:2:flat"],
      ["API calls (tier 3: 5,001 and above)", "1500", "5", "7500", "tier:3"],
      ["API calls (tier 3: flat fee)", "1", "1000", "1000", "tier:3:flat"],
    ],
  ],
  // included 1,500 spans tier 1's size: 2,000 − 1,500 = 500 left, all priced from tier 1: 500 × 10
  ["graduated, included units spanning a tier", graduated(...API), "2000", "1500", "1", [["API calls (tier 1: 1 – 1,000)", "500", "10", "5000", "tier:1"]]],
  ["graduated, usage within the included units", graduated(...API), "900", "1000", "1", []],
  // multiplier 1.5 scales unit and flat: 1,000 × 15 + 1 × 12 + 750
  [
    "graduated × multiplier",
    graduated(...API),
    "1001",
    "0",
    "1.5",
    [
      ["API calls (tier 1: 1 – 1,000)", "1000", "15", "15000", "tier:1"],
      ["API calls (tier 2: 1,001 – 5,000)", "1", "12", "12", "tier:2"],
      ["API calls (tier 2: flat fee)", "1", "750", "750", "tier:2:flat"],
    ],
  ],
  // 3 × 0.25 = 0.75 → 1 (half-up, once per line); 2 × 0.25 = 0.5 → 1
  [
    "graduated, each line rounded half-up",
    graduated(tier("3", "0.25"), tier(null, "0.25")),
    "5",
    "0",
    "1",
    [
      ["API calls (tier 1: 1 – 3)", "3", "0.25", "1", "tier:1"],
      ["API calls (tier 2: 4 and above)", "2", "0.25", "1", "tier:2"],
    ],
  ],
  // a free first tier is shown; a zero flat fee makes no line: 10 × 0 + 5 × 2
  [
    "graduated, free tier shown, zero flat fee not",
    graduated(tier("10", "0", "0"), tier(null, "2")),
    "15",
    "0",
    "1",
    [
      ["API calls (tier 1: 1 – 10)", "10", "0", "0", "tier:1"],
      ["API calls (tier 2: 11 and above)", "5", "2", "10", "tier:2"],
    ],
  ],
  // fractional bounds: 2.5 × 4 + 0.5 × 2
  [
    "graduated, fractional bounds",
    graduated(tier("2.5", "4"), tier(null, "2")),
    "3",
    "0",
    "1",
    [
      ["API calls (tier 1: 1 – 2.5)", "2.5", "4", "10", "tier:1"],
      ["API calls (tier 2: over 2.5)", "0.5", "2", "1", "tier:2"],
    ],
  ],
  ["volume, zero: no tier reached", volume(...API), "0", "0", "1", []],
  // 1,000 ≤ 1,000: tier 1, 1,000 × 10
  ["volume, exactly up_to", volume(...API), "1000", "0", "1", [["API calls (tier 1: 1 – 1,000)", "1000", "10", "10000", "tier:1"]]],
  // 1,001 reaches tier 2: every unit at 8, + 500
  [
    "volume, one over",
    volume(...API),
    "1001",
    "0",
    "1",
    [
      ["API calls (tier 2: 1,001 – 5,000)", "1001", "8", "8008", "tier:2"],
      ["API calls (tier 2: flat fee)", "1", "500", "500", "tier:2:flat"],
    ],
  ],
  // 1,000.5 > 1,000 reaches tier 2: 1,000.5 × 8 = 8,004 + 500
  [
    "volume, fractional just over",
    volume(...API),
    "1000.5",
    "0",
    "1",
    [
      ["API calls (tier 2: 1,001 – 5,000)", "1000.5", "8", "8004", "tier:2"],
      ["API calls (tier 2: flat fee)", "1", "500", "500", "tier:2:flat"],
    ],
  ],
  // 6,000 − 500 = 5,500 reaches tier 3: 5,500 × 5 × 2 = 55,000 + 1,000 × 2
  [
    "volume, included units then the last tier × multiplier",
    volume(...API),
    "6000",
    "500",
    "2",
    [
      ["API calls (tier 3: 5,001 and above)", "5500", "10", "55000", "tier:3"],
      ["API calls (tier 3: flat fee)", "1", "2000", "2000", "tier:3:flat"],
    ],
  ],
  // 2.9% of 10,000 = 290; 7 events × 30 = 210
  [
    "percentage with a fee per event",
    percentage("2.9", "30"),
    "10000",
    "0",
    "1",
    [
      ["API calls (2.9% of USD 100.00)", "10000", "0.029", "290", "percent"],
      ["API calls (fee per event)", "7", "30", "210", "per_event"],
    ],
  ],
  // × 2: 10,000 × 0.058 = 580; 7 × 60 = 420
  [
    "percentage × multiplier",
    percentage("2.9", "30"),
    "10000",
    "0",
    "2",
    [
      ["API calls (2.9% of USD 100.00)", "10000", "0.058", "580", "percent"],
      ["API calls (fee per event)", "7", "60", "420", "per_event"],
    ],
  ],
  // 1.5% of 1,234 = 18.51 → 19
  ["percentage without a fee, rounded half-up", percentage("1.5", null), "1234", "0", "1", [["API calls (1.5% of USD 12.34)", "1234", "0.015", "19", "percent"]]],
  // a sum of 0 over 7 events: only the fees, 7 × 30
  ["percentage, events of 0", percentage("2.9", "30"), "0", "0", "1", [["API calls (fee per event)", "7", "30", "210", "per_event"]]],
];
for (const [title, price, used, included, multiplier, want] of usageCases) {
  test(`usage: ${title}`, (t) => {
    t.deepEqual(plain(simpleUsageLine("API calls", price, dec(used), dec(included), dec(multiplier), dec(7))), want);
  });
}

test("seats: a fixed rate with graduated tiers prices the quantity through them", (t) => {
  // 12 seats: 5 × 1,000 + 7 × 800 + 2,000 once
  t.deepEqual(plain(fixedLine("Seats", graduated(tier("5", "1000"), tier(null, "800", "2000")), dec(12), dec(1))), [
    ["Seats (tier 1: 1 – 5)", "5", "1000", "5000", "tier:1"],
    ["Seats (tier 2: 6 and above)", "7", "800", "5600", "tier:2"],
    ["Seats (tier 2: flat fee)", "1", "2000", "2000", "tier:2:flat"],
  ]);
  t.deepEqual(plain(fixedLine("Seats", volume(tier("5", "1000"), tier(null, "800")), dec(0), dec(1))), [], "no seats: no tier");
});

test("dimensional: tiered and percentage cells; included units go first to the cell whose first tier costs most", (t) => {
  const cells = [
    { coordinates: { region: "eu" }, price: graduated(tier("100", "2"), tier(null, "1")) },
    { coordinates: { region: "us" }, price: graduated(tier("100", "3"), tier(null, "1")) },
  ];
  const key = (c: Record<string, string>) => JSON.stringify(c);
  // 50 included go to us (first tier 3 > 2): us 150 − 50 = 100 → 100 × 3; eu 150 → 100 × 2 + 50 × 1
  const lines = dimensionalLines(
    "Tokens",
    cells,
    [
      { coordinates: { region: "eu" }, used: dec(150) },
      { coordinates: { region: "us" }, used: dec(150) },
    ],
    dec(50),
    dec(1),
    key,
  );
  t.deepEqual(plain(lines), [
    ["Tokens (region=eu, tier 1: 1 – 100)", "100", "2", "200", '{"region":"eu"}|tier:1'],
    ["Tokens (region=eu, tier 2: 101 and above)", "50", "1", "50", '{"region":"eu"}|tier:2'],
    ["Tokens (region=us, tier 1: 1 – 100)", "100", "3", "300", '{"region":"us"}|tier:1'],
  ]);
  // Usage equals billing: tier quantities (250) + included covered (50) = used (300).
  t.is(formatDecimal(lines.reduce((a, l) => a.plus(l.quantity), dec(0)).plus(50)), "300");
  // percentage cells take their events per cell: 10% of 500 + 3 × 1; 10% of 0 with 2 events: 2 × 1
  const pct = [
    { coordinates: { region: "eu" }, price: percentage("10", "1") },
    { coordinates: { region: "us" }, price: percentage("10", "1") },
  ];
  t.deepEqual(
    plain(
      dimensionalLines(
        "Sales",
        pct,
        [
          { coordinates: { region: "eu" }, used: dec(500), events: dec(3) },
          { coordinates: { region: "us" }, used: dec(0), events: dec(2) },
        ],
        dec(0),
        dec(1),
        key,
      ),
    ),
    [
      ["Sales (region=eu, 10% of USD 5.00)", "500", "0.1", "50", '{"region":"eu"}|percent'],
      ["Sales (region=eu, fee per event)", "3", "1", "3", '{"region":"eu"}|per_event'],
      ["Sales (region=us, fee per event)", "2", "1", "2", '{"region":"us"}|per_event'],
    ],
  );
});

test("tier ranges for people", (t) => {
  t.deepEqual(
    API.map((_, i) => tierRange(API, i)),
    ["1 – 1,000", "1,001 – 5,000", "5,001 and above"],
  );
  t.is(tierRange([tier(null, "1")], 0), "1 and above");
  t.deepEqual(
    [0, 1, 2].map((i) => tierRange([tier("0.5", "1"), tier("1000.5", "1"), tier(null, "1")], i)),
    ["up to 0.5", "over 0.5 – 1,000.5", "over 1,000.5"],
  );
});

// ---- minimum and maximum per period ----

const limitCases: [title: string, total: string, min: string | null, max: string | null, share: string, want: [string, string] | null][] = [
  // 300 < 1,000: + 700
  ["below the minimum", "300", "1000", null, "1", ["minimum", "700"]],
  // no usage at all: the whole minimum
  ["no usage: the minimum is shown", "0", "1000", null, "1", ["minimum", "1000"]],
  ["at the minimum: no line", "1000", "1000", null, "1", null],
  // 1,500 > 1,200: − 300
  ["above the maximum", "1500", null, "1200", "1", ["maximum", "-300"]],
  ["at the maximum: no line", "1200", "0", "1200", "1", null],
  ["between the two: no line", "1100", "1000", "1200", "1", null],
  // half a cycle: minimum 1,000 × 0.5 = 500; 300 < 500: + 200
  ["a prorated minimum", "300", "1000", "1200", "0.5", ["minimum", "200"]],
  // a third of a cycle: 1,000 / 3 = 333.33…; 0 → + 333 (rounded half-up once)
  ["a prorated minimum, rounded once", "0", "1000", null, "0.333333333333333333333333333333", ["minimum", "333"]],
  // a quarter: maximum 1,000 × 0.25 = 250; 400 > 250: − 150
  ["a prorated maximum", "400", "100", "1000", "0.25", ["maximum", "-150"]],
  // 1,000.4 × 0.5 = 500.2; 500 → 0.2 rounds to 0: no line
  ["a difference under half a unit: no line", "500", "1000.4", null, "0.5", null],
];
for (const [title, sum, min, max, share, want] of limitCases) {
  test(`limits: ${title}`, (t) => {
    const got = limitLine("API calls", dec(sum), min === null ? null : dec(min), max === null ? null : dec(max), dec(share));
    t.deepEqual(got && [got.kind, formatDecimal(got.line.amount)], want);
    if (got) t.deepEqual([formatDecimal(got.line.quantity), formatDecimal(got.line.unitAmount), got.line.cell], ["1", formatDecimal(got.line.amount), got.kind]);
  });
}

test("a window's share of its cycle: exact decimals of milliseconds, at most 1", (t) => {
  const cycle = { start: new Date("2026-02-01T00:00:00Z"), end: new Date("2026-03-01T00:00:00Z") };
  // 14 of 28 days
  t.is(formatDecimal(windowShare(cycle.start, new Date("2026-02-15T00:00:00Z"), cycle)), "0.5");
  // 1 ms of 28 days = 1 / 2,419,200,000
  t.is(
    windowShare(cycle.start, new Date(cycle.start.getTime() + 1), cycle)
      .times(2_419_200_000)
      .toString(),
    "1",
  );
  t.is(formatDecimal(windowShare(cycle.start, cycle.end, cycle)), "1");
  t.is(formatDecimal(windowShare(cycle.start, cycle.start, cycle)), "0");
});

// ---- properties ----

/** Tiers with increasing whole bounds (and the last unbounded), prices in smallest units. */
const tiersArb = fc
  .array(fc.record({ width: fc.integer({ min: 1, max: 1000 }), unit: fc.integer({ min: 0, max: 1000 }), flat: fc.option(fc.integer({ min: 0, max: 5000 })) }), { minLength: 1, maxLength: 6 })
  .map((xs) => {
    let bound = 0;
    return xs.map((x, i): Tier => {
      bound += x.width;
      return tier(i === xs.length - 1 ? null : String(bound), String(x.unit), x.flat === null ? undefined : String(x.flat));
    });
  });
const quantityArb = fc.tuple(fc.integer({ min: 0, max: 8000 }), fc.integer({ min: 0, max: 3 })).map(([n, quarter]) => dec(n).plus(dec(quarter).div(4)));
const totalOf = (price: Price, q: Decimal) => total(simpleUsageLine("x", price, q, dec(0), dec(1)));

test("graduated: the total never falls as the quantity grows, and is the sum over the tiers touched", (t) => {
  fc.assert(
    fc.property(tiersArb, quantityArb, quantityArb, (tiers, a, b) => {
      const [lo, hi] = a.lte(b) ? [a, b] : [b, a];
      const price = graduated(...tiers);
      if (totalOf(price, lo).gt(totalOf(price, hi))) return false;
      // By hand: each touched tier's share × unit (rounded) + its flat fee (rounded).
      const byHand = graduatedSplit(tiers, hi).reduce((acc, s) => {
        const tt = tiers[s.index] as Tier;
        return acc.plus(roundAmount(s.quantity.times(dec(tt.unitAmount.value)))).plus(roundAmount(dec(tt.flatAmount?.value ?? "0")));
      }, dec(0));
      const split = graduatedSplit(tiers, hi).reduce((acc, s) => acc.plus(s.quantity), dec(0));
      return totalOf(price, hi).eq(byHand) && split.eq(hi);
    }),
  );
  t.pass();
});

test("volume: the total is the quantity at the reached tier's unit amount plus its flat fee", (t) => {
  fc.assert(
    fc.property(tiersArb, quantityArb, (tiers, q) => {
      const i = volumeTier(tiers, q);
      if (i === undefined) return q.isZero() && totalOf(volume(...tiers), q).isZero();
      const reached = tiers[i] as Tier;
      const below = i === 0 || q.gt(dec(tiers[i - 1]?.upTo as string));
      const within = reached.upTo === null || q.lte(dec(reached.upTo));
      const want = roundAmount(q.times(dec(reached.unitAmount.value))).plus(roundAmount(dec(reached.flatAmount?.value ?? "0")));
      return below && within && totalOf(volume(...tiers), q).eq(want);
    }),
  );
  t.pass();
});

test("splitting usage across events in any order gives the same lines", (t) => {
  const cells = [
    { coordinates: { region: "eu" }, price: graduated(tier("10", "5", "7"), tier(null, "2")) },
    { coordinates: { region: "us" }, price: volume(tier("10", "5"), tier(null, "2", "3")) },
  ];
  const key = (c: Record<string, string>) => JSON.stringify(c);
  const events = fc.array(fc.record({ region: fc.constantFrom("eu", "us", "ap"), n: quantityArb }), { maxLength: 30 });
  fc.assert(
    fc.property(events, fc.integer({ min: 0, max: 30 }), fc.nat(), (es, included, seed) => {
      const whole = new Map<string, Decimal>();
      for (const e of es) whole.set(e.region, (whole.get(e.region) ?? dec(0)).plus(e.n));
      const merged = [...whole].map(([region, used]) => ({ coordinates: { region }, used }));
      const shuffled = [...es].sort((a, b) => ((a.n.toNumber() * 7919 + seed) % 13) - ((b.n.toNumber() * 7919 + seed) % 13));
      const perEvent = shuffled.map((e) => ({ coordinates: { region: e.region }, used: e.n }));
      const a = plain(dimensionalLines("T", cells, merged, dec(included), dec(1), key));
      const b = plain(dimensionalLines("T", cells, perEvent, dec(included), dec(1), key));
      const simpleA = plain(
        simpleUsageLine(
          "S",
          cells[0]!.price,
          es.reduce((acc, e) => acc.plus(e.n), dec(0)),
          dec(included),
          dec(1),
        ),
      );
      const simpleB = plain(
        simpleUsageLine(
          "S",
          cells[0]!.price,
          shuffled.reduce((acc, e) => acc.plus(e.n), dec(0)),
          dec(included),
          dec(1),
        ),
      );
      return JSON.stringify(a) === JSON.stringify(b) && JSON.stringify(simpleA) === JSON.stringify(simpleB);
    }),
  );
  t.pass();
});
