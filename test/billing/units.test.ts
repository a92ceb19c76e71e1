/** Pure rules, table-driven: paging bounds, decimals, IDs and keys. */
import test from "ava";
import { Violations } from "../../src/billing/errors.js";
import { newId } from "../../src/billing/ids.js";
import { generateKey, hashKey, keyPrefix } from "../../src/billing/keys.js";
import { amountProblem, canonicalDecimal, dec, formatDecimal, parseDecimal, roundAmount, storageProblem } from "../../src/billing/money.js";
import { checkPage } from "../../src/billing/pagination.js";
import { retryDelayMs } from "../../src/billing/subscriptions/cycle-close.js";

const pageCases: [number | undefined, number | undefined, string[], { limit: number; offset: number }][] = [
  [undefined, undefined, [], { limit: 20, offset: 0 }],
  [1, 0, [], { limit: 1, offset: 0 }],
  [100, 5, [], { limit: 100, offset: 5 }],
  [0, undefined, ["limit"], { limit: 0, offset: 0 }],
  [101, undefined, ["limit"], { limit: 101, offset: 0 }],
  [undefined, -1, ["offset"], { limit: 20, offset: -1 }],
  [-5, -1, ["limit", "offset"], { limit: -5, offset: -1 }],
];
for (const [limit, offset, fields, page] of pageCases) {
  test(`checkPage(${limit}, ${offset})`, (t) => {
    const v = new Violations();
    t.deepEqual(checkPage(limit, offset, v), page);
    if (fields.length === 0) {
      t.notThrows(() => v.throwIfAny());
      return;
    }
    const err = t.throws(() => v.throwIfAny()) as { violations?: { field: string }[] } | undefined;
    t.deepEqual(
      err?.violations?.map((x) => x.field),
      fields,
    );
  });
}

const decimalCases: [string, string | undefined][] = [
  ["0.000001", "0.000001"],
  ["12345678901234567890.5", "12345678901234567890.5"],
  ["2000", "2000"],
  ["1.50", "1.5"],
  ["-0", "0"],
  ["1e3", "1000"],
  [" 7 ", "7"],
  [".5", "0.5"],
  ["abc", undefined],
  ["", undefined],
  ["NaN", undefined],
  ["Infinity", undefined],
  ["1,5", undefined],
  ["0x10", undefined],
];
for (const [input, expected] of decimalCases) {
  test(`parseDecimal(${JSON.stringify(input)})`, (t) => {
    const d = parseDecimal(input);
    t.is(d === undefined ? undefined : formatDecimal(d), expected);
  });
}

test("input values have at most 20 digits before the point and 12 after (DESIGN §6)", (t) => {
  t.is(storageProblem(dec("1.123456789012")), undefined);
  t.regex(storageProblem(dec("1.1234567890123")) ?? "", /12 digits after/);
  t.is(storageProblem(dec("99999999999999999999.999999999999")), undefined);
  t.is(storageProblem(dec("-99999999999999999999")), undefined);
  t.regex(storageProblem(dec("100000000000000000000")) ?? "", /20 digits before/);
  t.regex(storageProblem(dec("-100000000000000000000")) ?? "", /20 digits before/);
  t.is(canonicalDecimal("5.000000000000"), "5");
});

test("stored sums and amounts have at most 53 digits before the point: DECIMAL(65,12)", (t) => {
  const largest = dec(`${"9".repeat(53)}.999999999999`);
  t.is(amountProblem(largest), undefined);
  t.is(amountProblem(largest.neg()), undefined);
  t.regex(amountProblem(dec(`1${"0".repeat(53)}`)) ?? "", /more than 53 digits/);
  // The product of three inputs at their limits is exact (100 significant digits) and refused.
  const top = dec("99999999999999999999.999999999999");
  const product = top.times(top).times(top);
  const n = (10n ** 32n - 1n) ** 3n; // the same product in integers, scale 36
  const digits = n.toString();
  t.is(formatDecimal(product), `${digits.slice(0, -36)}.${digits.slice(-36).replace(/0+$/, "")}`);
  t.regex(amountProblem(product) ?? "", /more than 53 digits/);
});

const roundCases: [string, string][] = [
  ["0.5", "1"],
  ["1.5", "2"],
  ["2.5", "3"],
  ["-0.5", "-1"],
  ["0.49999999", "0"],
  ["1234.5000000001", "1235"],
];
for (const [input, expected] of roundCases) {
  test(`roundAmount(${input}) is half-up to ${expected}`, (t) => {
    t.is(formatDecimal(roundAmount(dec(input))), expected);
  });
}

test("fractional JS numbers never become decimals", (t) => {
  t.throws(() => dec(0.1));
  t.is(formatDecimal(dec(3)), "3");
});

test("IDs are prefixed and carry at least 96 random bits", (t) => {
  const ids = new Set(Array.from({ length: 1000 }, () => newId("subj")));
  t.is(ids.size, 1000);
  for (const id of ids) t.regex(id, /^subj_[0-9A-Za-z]{22}$/); // 22 × log2(62) ≈ 131 bits
});

test("keys: kind and mode in the prefix, stored as SHA-256, shown by a short prefix", (t) => {
  const k = generateKey("publishable", "live");
  t.regex(k, /^pk_live_[0-9A-Za-z]{32}$/);
  t.is(hashKey(k).length, 64);
  t.not(hashKey(k), hashKey(generateKey("publishable", "live")));
  t.is(keyPrefix("sk_test_abcdefgh"), "sk_test_abcd");
});

const retryCases: [attempts: number, random: number, ms: number][] = [
  [1, 0, 30_000],
  [2, 0, 60_000],
  [3, 0, 120_000],
  [7, 0, 1_920_000],
  [8, 0, 3_600_000], // capped at one hour
  [50, 0, 3_600_000],
  [1, 1, 36_000], // up to 20% jitter
  [8, 0.5, 3_960_000],
];
for (const [attempts, random, ms] of retryCases) {
  test(`a subscription set aside after ${attempts} failure(s) is retried after ${ms} ms (jitter ${random})`, (t) => {
    t.is(retryDelayMs(attempts, random), ms);
  });
}
