/**
 * The one parser of instants and the one supported range (DESIGN §4): every accepted form, every
 * impossible date, leap years, offsets, fraction truncation, the range's bounds, and garbage.
 */
import test from "ava";
import { toJson } from "@bufbuild/protobuf";
import { TimestampSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { InvalidArgumentError, Violations } from "../../src/billing/errors.js";
import { prepare } from "../../src/billing/metering/events.js";
import { eventBody } from "../../src/billing/events/delivery.js";
import { END_INSTANT, MIN_INSTANT, RANGE_PROBLEM, checkInstant, formatInstant, parseInstant, parseRfc3339, readInstant } from "../../src/billing/time.js";
import { storableTime } from "../../src/db/columns.js";
import { dbTime } from "../../src/db/raw.js";
import { instantOf } from "../../src/rpc/convert/common.js";
import { format, inRangeMs, style } from "../helpers/instants.js";

const iso = (text: string): string | undefined => {
  const p = parseInstant(text);
  return p.ok ? new Date(p.ms).toISOString() : undefined;
};

const accepted: [string, string, string][] = [
  ["Z", "2026-01-31T12:00:00Z", "2026-01-31T12:00:00.000Z"],
  ["lower-case t and z", "2026-01-31t12:00:00z", "2026-01-31T12:00:00.000Z"],
  ["a space for T", "2026-01-31 12:00:00Z", "2026-01-31T12:00:00.000Z"],
  ["no offset is UTC", "2026-01-31T12:00:00", "2026-01-31T12:00:00.000Z"],
  ["no offset, with a fraction", "2026-01-31T12:00:00.25", "2026-01-31T12:00:00.250Z"],
  ["+02:00", "2026-01-31T12:00:00+02:00", "2026-01-31T10:00:00.000Z"],
  ["-05:30", "2026-01-31T12:00:00-05:30", "2026-01-31T17:30:00.000Z"],
  ["+00:00", "2026-01-31T12:00:00+00:00", "2026-01-31T12:00:00.000Z"],
  ["-00:00 (unknown local offset) is UTC", "2026-01-31T12:00:00-00:00", "2026-01-31T12:00:00.000Z"],
  ["+23:59", "2026-01-31T12:00:00+23:59", "2026-01-30T12:01:00.000Z"],
  ["-23:59", "2026-01-31T12:00:00-23:59", "2026-02-01T11:59:00.000Z"],
  ["an offset crossing a year", "2026-01-01T00:30:00+01:00", "2025-12-31T23:30:00.000Z"],
  ["an offset crossing into a leap day", "2024-02-28T23:00:00-02:00", "2024-02-29T01:00:00.000Z"],
  ["one fraction digit", "2026-01-31T12:00:00.5Z", "2026-01-31T12:00:00.500Z"],
  ["two fraction digits", "2026-01-31T12:00:00.05Z", "2026-01-31T12:00:00.050Z"],
  ["three fraction digits", "2026-01-31T12:00:00.123Z", "2026-01-31T12:00:00.123Z"],
  ["microseconds are truncated", "2026-01-31T12:00:00.123456+02:00", "2026-01-31T10:00:00.123Z"],
  ["9 digits are truncated, never rounded", "2026-01-31T12:00:00.999999999Z", "2026-01-31T12:00:00.999Z"],
  ["12 digits are truncated", "2026-01-31T12:00:00.000999999999Z", "2026-01-31T12:00:00.000Z"],
  [".9995 stays in its second", "2026-12-31T23:59:59.9995Z", "2026-12-31T23:59:59.999Z"],
  [".9995 at the range's end stays in 2199", "2199-12-31T23:59:59.9995Z", "2199-12-31T23:59:59.999Z"],
  ["the first supported instant", "2000-01-01T00:00:00Z", "2000-01-01T00:00:00.000Z"],
  ["the last supported millisecond", "2199-12-31T23:59:59.999Z", "2199-12-31T23:59:59.999Z"],
  ["2200 in UTC, but an offset brings it back", "2200-01-01T00:59:59+01:00", "2199-12-31T23:59:59.000Z"],
  ["1999 in UTC, but an offset brings it forward", "1999-12-31T23:00:00-01:00", "2000-01-01T00:00:00.000Z"],
  ["leap day 2024", "2024-02-29T00:00:00Z", "2024-02-29T00:00:00.000Z"],
  ["leap day 2000 (divisible by 400)", "2000-02-29T12:00:00Z", "2000-02-29T12:00:00.000Z"],
  ["leap day 2196", "2196-02-29T00:00:00Z", "2196-02-29T00:00:00.000Z"],
  ["April 30", "2026-04-30T00:00:00Z", "2026-04-30T00:00:00.000Z"],
  ["December 31, 23:59:59", "2026-12-31T23:59:59Z", "2026-12-31T23:59:59.000Z"],
];
for (const [name, text, expected] of accepted) {
  test(`accepted: ${name} (${text})`, (t) => {
    t.is(iso(text), expected);
  });
}

const refused: [string, string, RegExp][] = [
  ["February 30", "2026-02-30T00:00:00Z", /2026-02-30 is not a calendar date \(February 2026 has 28 days\)/],
  ["February 31", "2026-02-31T00:00:00Z", /not a calendar date/],
  ["February 29 in a non-leap year", "2026-02-29T00:00:00Z", /February 2026 has 28 days/],
  ["February 29, 2100 (divisible by 100, not by 400)", "2100-02-29T00:00:00Z", /February 2100 has 28 days/],
  ["February 29, 2199", "2199-02-29T00:00:00Z", /February 2199 has 28 days/],
  ["April 31", "2026-04-31T00:00:00Z", /April 2026 has 30 days/],
  ["June 31", "2026-06-31T00:00:00Z", /June 2026 has 30 days/],
  ["September 31", "2026-09-31T00:00:00Z", /not a calendar date/],
  ["November 31", "2026-11-31T00:00:00Z", /not a calendar date/],
  ["January 32", "2026-01-32T00:00:00Z", /January 2026 has 31 days/],
  ["day 00", "2026-01-00T00:00:00Z", /not a calendar date/],
  ["month 13", "2026-13-01T00:00:00Z", /no month 13/],
  ["month 00", "2026-00-10T00:00:00Z", /no month 00/],
  ["hour 24", "2026-01-31T24:00:00Z", /hour must be 00 to 23/],
  ["minute 60", "2026-01-31T12:60:00Z", /minute must be 00 to 59/],
  ["a leap second", "2016-12-31T23:59:60Z", /leap seconds are not accepted/],
  ["offset +24:00", "2026-01-31T12:00:00+24:00", /offset must be from -23:59 to \+23:59/],
  ["offset minutes 60", "2026-01-31T12:00:00+01:60", /offset/],
  ["a date alone", "2026-01-31", /a date alone is not accepted/],
  ["no seconds", "2026-01-31T12:00Z", /RFC 3339/],
  ["an offset without a colon", "2026-01-31T12:00:00+0200", /RFC 3339/],
  ["an hour-only offset", "2026-01-31T12:00:00+02", /RFC 3339/],
  ["an empty fraction", "2026-01-31T12:00:00.Z", /RFC 3339/],
  ["a comma fraction", "2026-01-31T12:00:00,5Z", /RFC 3339/],
  ["one-digit month", "2026-1-31T12:00:00Z", /RFC 3339/],
  ["five-digit year", "10000-01-01T00:00:00Z", /RFC 3339/],
  ["a signed year", "+002026-01-31T12:00:00Z", /RFC 3339/],
  ["two separators", "2026-01-31TT12:00:00Z", /RFC 3339/],
  ["leading space", " 2026-01-31T12:00:00Z", /RFC 3339/],
  ["trailing space", "2026-01-31T12:00:00Z ", /RFC 3339/],
  ["trailing newline", "2026-01-31T12:00:00Z\n", /RFC 3339/],
  ["a week date", "2026-W05-6T12:00:00Z", /RFC 3339/],
  ["an ordinal date", "2026-031T12:00:00Z", /RFC 3339/],
  ["basic format", "20260131T120000Z", /RFC 3339/],
  ["non-ASCII digits", "２０２６-01-31T12:00:00Z", /RFC 3339/],
  ["a named zone", "2026-01-31T12:00:00 UTC", /RFC 3339/],
  ["words", "yesterday", /RFC 3339/],
  ["epoch seconds", "1700000000", /RFC 3339/],
  ["empty", "", /RFC 3339/],
  ["Date's own text", "Sat Jan 31 2026 12:00:00 GMT+0000", /RFC 3339/],
  ["1999-12-31T23:59:59.999Z", "1999-12-31T23:59:59.999Z", /from 2000-01-01T00:00:00Z \(inclusive\) to 2200-01-01T00:00:00Z \(exclusive\)/],
  ["2200-01-01T00:00:00Z", "2200-01-01T00:00:00Z", /to 2200-01-01T00:00:00Z \(exclusive\)/],
  ["the epoch", "1970-01-01T00:00:00Z", /from 2000-01-01/],
  ["year 0000", "0000-01-01T00:00:00Z", /from 2000-01-01/],
  ["year 0099 (not 1999)", "0099-12-31T23:59:59Z", /from 2000-01-01/],
  ["year 9999", "9999-12-31T23:59:59.9995Z", /from 2000-01-01/],
  ["2000 in local time, 1999 in UTC", "2000-01-01T00:30:00+01:00", /from 2000-01-01/],
  ["2199 in local time, 2200 in UTC", "2199-12-31T23:30:00-01:00", /to 2200-01-01/],
];
for (const [name, text, problem] of refused) {
  test(`refused: ${name} (${JSON.stringify(text)})`, (t) => {
    const p = parseInstant(text);
    t.false(p.ok);
    if (!p.ok) t.regex(p.problem, problem);
  });
}

test("every day of 2000–2199 that exists parses to what Date.UTC says; every day that does not is refused", (t) => {
  let days = 0;
  for (let year = 2000; year < 2200; year++) {
    for (let month = 1; month <= 12; month++) {
      for (let day = 28; day <= 32; day++) {
        const text = `${year}-${String(month).padStart(2, "0")}-${String(day).padStart(2, "0")}T06:07:08.009Z`;
        const real = new Date(Date.UTC(year, month - 1, day, 6, 7, 8, 9));
        const exists = real.getUTCDate() === day;
        const p = parseInstant(text);
        if (p.ok !== exists || (p.ok && p.ms !== real.getTime())) t.fail(`${text}: ${JSON.stringify(p)}`);
        if (exists) days++;
      }
    }
  }
  // 200 years × 12 months × days 28..31 that exist: 4 a month except February (1, or 2 in a leap year), 30-day months (3).
  t.is(days, 200 * (4 * 7 + 3 * 4 + 1) + 49);
});

test("parseRfc3339 reads outside the range too; the range is a separate check", (t) => {
  const p = parseRfc3339("1970-01-01T00:00:00Z");
  t.deepEqual(p, { ok: true, ms: 0 });
  const year1 = new Date(0);
  year1.setUTCFullYear(1, 0, 1);
  t.deepEqual(parseRfc3339("0001-01-01T00:00:00Z"), { ok: true, ms: year1.getTime() }, "not 1901, as Date.UTC would make it");
  t.deepEqual(parseRfc3339("9999-12-31T23:59:59.9995Z"), { ok: true, ms: Date.UTC(9999, 11, 31, 23, 59, 59, 999) });
  t.is(MIN_INSTANT, Date.parse("2000-01-01T00:00:00Z"));
  t.is(END_INSTANT, Date.parse("2200-01-01T00:00:00Z"));
});

test("readInstant and checkInstant record the violation at the field's path", (t) => {
  const v = new Violations("events[3]");
  t.is(readInstant("2026-02-30T00:00:00Z", v, "timestamp"), undefined);
  t.is(readInstant("2026-02-28T00:00:00Z", v, "timestamp"), Date.UTC(2026, 1, 28));
  const period = new Violations().at("period");
  t.is(checkInstant(new Date(Date.UTC(2300, 0, 1)), period, "start"), undefined);
  t.is(checkInstant(new Date(Number.NaN), period, "end"), undefined);
  const ok = new Date(Date.UTC(2026, 0, 1));
  t.is(checkInstant(ok, period, "end"), ok);
  t.is(checkInstant(undefined, period, "end"), undefined, "left out: the caller decides whether it is required");
  const err = t.throws(() => v.throwIfAny(), { instanceOf: InvalidArgumentError });
  t.deepEqual(
    err?.violations.map((x) => x.field),
    ["events[3].timestamp"],
  );
  const err2 = t.throws(() => period.throwIfAny(), { instanceOf: InvalidArgumentError });
  t.deepEqual(
    err2?.violations.map((x) => [x.field, x.description === RANGE_PROBLEM]),
    [
      ["period.start", true],
      ["period.end", false],
    ],
  );
});

test("a usage event's timestamp: in range, with its path; a problem the wire layer found rejects the event", (t) => {
  const input = { idempotencyKey: "k", subjectId: "s", eventName: "e", data: {} };
  const now = Date.UTC(2026, 0, 1);
  const at = (timestamp: Date | undefined, timestampProblem?: string) => prepare({ ...input, timestamp, timestampProblem }, 3, "events[3].", now);
  const good = at(new Date("2026-01-31T10:00:00.123Z"));
  t.true("index" in good && good.occurredAt === Date.UTC(2026, 0, 31, 10, 0, 0, 123) && good.givenTimestamp === "2026-01-31T10:00:00.123Z");
  for (const bad of ["2200-01-01T00:00:00Z", "1999-12-31T23:59:59.999Z"]) {
    const r = at(new Date(bad));
    t.true(r instanceof InvalidArgumentError, bad);
    t.deepEqual((r as InvalidArgumentError).violations, [{ field: "events[3].timestamp", description: RANGE_PROBLEM }], bad);
  }
  const unread = at(undefined, "must be an RFC 3339 date-time, such as 2026-01-31T12:00:00Z");
  t.deepEqual((unread as InvalidArgumentError).violations, [{ field: "events[3].timestamp", description: "must be an RFC 3339 date-time, such as 2026-01-31T12:00:00Z" }]);
  t.true(at(new Date(Number.NaN)) instanceof InvalidArgumentError, "no time");
  const defaulted = at(undefined);
  t.true("index" in defaulted && defaulted.occurredAt === now && defaulted.givenTimestamp === "");
});

const timestamps: [string, bigint, number, string | undefined][] = [
  ["whole seconds", 1_769_860_800n, 0, "2026-01-31T12:00:00.000Z"],
  ["nanos are truncated", 1_769_860_800n, 123_999_999, "2026-01-31T12:00:00.123Z"],
  ["999,999,999 nanos stay in their second", 1_769_860_799n, 999_999_999, "2026-01-31T11:59:59.999Z"],
  ["999,500,000 nanos before 2200 stay in 2199", 7_258_118_399n, 999_500_000, "2199-12-31T23:59:59.999Z"],
  ["negative nanos are no time", 1_769_860_800n, -1, undefined],
  ["a billion nanos are no time", 1_769_860_800n, 1_000_000_000, undefined],
  ["seconds beyond any Date are no time", 10n ** 15n, 0, undefined],
  ["the most negative int64 is no time", -(2n ** 63n), 0, undefined],
];
for (const [name, seconds, nanos, expected] of timestamps) {
  test(`a Timestamp as a Date: ${name}`, (t) => {
    const d = instantOf({ $typeName: "google.protobuf.Timestamp", seconds, nanos });
    t.is(d && !Number.isNaN(d.getTime()) ? d.toISOString() : undefined, expected);
  });
}

test("nothing outside years 1000–9999 reaches a store", (t) => {
  t.is(dbTime(new Date(Date.UTC(2199, 11, 31, 23, 59, 59, 999))), "2199-12-31 23:59:59.999");
  t.is(dbTime(new Date(Date.UTC(9999, 11, 31, 23, 59, 59, 999))), "9999-12-31 23:59:59.999");
  for (const d of [new Date(Date.UTC(10000, 0, 1)), new Date(Number.NaN), new Date(Date.UTC(-1, 0, 1)), new Date(Date.UTC(999, 11, 31))]) {
    t.throws(() => dbTime(d), { message: /refusing to store/ });
    t.throws(() => storableTime(d), { message: /refusing to store/ });
  }
});

test("property: every text of an instant in range reads back as that millisecond; outside the range, none does", (t) => {
  fc.assert(
    fc.property(inRangeMs, style, (ms, s) => {
      const text = format(ms, s);
      const p = parseInstant(text);
      return p.ok && p.ms === ms;
    }),
    { numRuns: 5000 },
  );
  const outside = fc.oneof(fc.integer({ min: Date.UTC(1000, 0, 1), max: MIN_INSTANT - 1 }), fc.integer({ min: END_INSTANT, max: Date.UTC(9999, 11, 31) }));
  fc.assert(
    fc.property(outside, style, (ms, s) => {
      const p = parseInstant(format(ms, s));
      return !p.ok && p.problem === RANGE_PROBLEM;
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

test("an instant is written as the API's Timestamp JSON writes it: milliseconds only when there are any, in webhook bodies too", (t) => {
  for (const ms of [Date.UTC(2026, 0, 31, 12), Date.UTC(2026, 0, 31, 12, 0, 0, 250), Date.UTC(2026, 0, 31, 12, 0, 0, 1), MIN_INSTANT, END_INSTANT - 1]) {
    const d = new Date(ms);
    t.is(formatInstant(d), toJson(TimestampSchema, timestampFromDate(d)) as string, d.toISOString());
  }
  const stored = { id: "evt_1", type: "subject.created", createdAt: new Date(Date.UTC(2026, 0, 31, 12)), environmentId: "env_1", data: "{}" };
  t.is(JSON.parse(eventBody(stored as Parameters<typeof eventBody>[0], "test")).created_at, "2026-01-31T12:00:00Z");
});
