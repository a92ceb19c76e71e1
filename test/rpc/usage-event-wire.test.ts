/**
 * The quick look at a stream's UsageEventInput (src/rpc/usage-event-wire.ts) against protobuf-es:
 * whatever it calls plain, fromBinary decodes; the events a client plainly sends are plain; and
 * anything unusual (unknown or reserved fields, other wire types, non-ASCII text, long varints,
 * truncations, random bytes) is left to fromBinary.
 */
import { isDeepStrictEqual } from "node:util";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import test from "ava";
import { UsageEventInputSchema } from "../../src/gen/billing/v1/usage_event_pb.js";
import { plainUsageEventInput, readPlainUsageEventInput } from "../../src/rpc/usage-event-wire.js";

// A small deterministic generator, so that a failure can be reproduced.
let seed = 0x2545f491;
const rand = (n: number) => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) % n;
};
const ASCII = "abcXYZ019-_:. \t\n\u0000\u007f";
const text = (max: number, alphabet = ASCII) => Array.from({ length: rand(max + 1) }, () => alphabet[rand(alphabet.length)]).join("");

/** `negative`: timestamps before 1970 or with negative nanos too (10-byte varints: left to fromBinary). */
function randomEvent(alphabet = ASCII, negative = false) {
  const data: Record<string, string> = {};
  for (let i = rand(4); i > 0; i--) data[text(8, alphabet)] = text(12, alphabet);
  const seconds = negative ? ([-1n, -62_135_596_800n, 5n][rand(3)] as bigint) : ([0n, 1n, 1_700_000_000n, 253_402_300_799n, 2n ** 62n][rand(5)] as bigint);
  return create(UsageEventInputSchema, {
    idempotencyKey: text(rand(5) === 0 ? 300 : 40, alphabet),
    subjectId: text(30, alphabet),
    eventName: text(20, alphabet),
    data,
    timestamp: rand(4) === 0 ? undefined : { seconds, nanos: negative ? ([0, -1][rand(2)] as number) : ([0, 1, 999_999_999][rand(3)] as number) },
  });
}

/**
 * The property that makes skipping the decode safe: plain implies fromBinary decodes, and the
 * plain reader reads the very message fromBinary does (anything not plain it leaves alone, and a
 * `__proto__` data key).
 */
function agrees(b: Uint8Array): boolean {
  const fast = readPlainUsageEventInput(b);
  if (!plainUsageEventInput(b)) return fast === undefined;
  try {
    const decoded = fromBinary(UsageEventInputSchema, b);
    if (fast === undefined) return Buffer.from(b).toString("latin1").includes("__proto__");
    return isDeepStrictEqual(fast, decoded);
  } catch {
    return false;
  }
}

test("events as clients encode them (ASCII text) are plain, and decode", (t) => {
  for (let i = 0; i < 3000; i++) {
    const b = toBinary(UsageEventInputSchema, randomEvent());
    t.true(plainUsageEventInput(b), Buffer.from(b).toString("hex"));
    t.true(agrees(b));
  }
  t.true(plainUsageEventInput(new Uint8Array(0)), "the empty message");
});

test("non-ASCII text is left to fromBinary (which checks its UTF-8)", (t) => {
  const b = toBinary(UsageEventInputSchema, create(UsageEventInputSchema, { subjectId: "é" }));
  t.false(plainUsageEventInput(b));
  const bad = Uint8Array.from([0x12, 0x01, 0xff]); // subject_id: a lone 0xff
  t.false(plainUsageEventInput(bad));
  t.throws(() => fromBinary(UsageEventInputSchema, bad));
  t.false(plainUsageEventInput(Uint8Array.from([0x22, 0x03, 0x0a, 0x01, 0xc3])), "a map key's bytes too");
});

test("edge cases are either plain and decodable or left to fromBinary", (t) => {
  const cases: [string, number[], boolean][] = [
    ["reserved field 5 (the retired string timestamp)", [0x2a, 0x01, 0x61], false],
    ["an unknown varint field", [0x38, 0x01], false],
    ["field 1 as a varint", [0x08, 0x01], false],
    ["a two-byte tag for field 1", [0x8a, 0x00, 0x00], false],
    ["a group", [0x0b, 0x0c], false],
    ["length past the end", [0x0a, 0x05, 0x61], false],
    ["a truncated length varint", [0x0a, 0x80], false],
    ["an overlong (5-byte) length", [0x0a, 0x81, 0x80, 0x80, 0x80, 0x00, 0x61], false],
    ["a map entry with an unknown field", [0x22, 0x02, 0x18, 0x01], false],
    ["a map entry's key as a varint", [0x22, 0x02, 0x08, 0x01], false],
    ["an empty map entry", [0x22, 0x00], true],
    ["a map entry with only a value", [0x22, 0x03, 0x12, 0x01, 0x31], true],
    ["a map entry's value past its end", [0x22, 0x03, 0x12, 0x02, 0x31, 0x31], false],
    ["an empty timestamp", [0x32, 0x00], true],
    ["timestamp seconds of 9 bytes", [0x32, 0x0a, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], true],
    ["timestamp seconds of 10 bytes (a negative int64)", [0x32, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], false],
    ["timestamp seconds of 11 bytes", [0x32, 0x0c, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], false],
    ["timestamp nanos of 6 bytes", [0x32, 0x07, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], false],
    ["a truncated timestamp varint", [0x32, 0x02, 0x08, 0x80], false],
    ["a timestamp with an unknown field", [0x32, 0x02, 0x18, 0x01], false],
    ["a timestamp's seconds as a string", [0x32, 0x03, 0x0a, 0x01, 0x31], false],
    ["a repeated field", [0x0a, 0x01, 0x61, 0x0a, 0x01, 0x62], true],
    ["a data key __proto__", [0x22, 0x0e, 0x0a, 0x09, ...Buffer.from("__proto__"), 0x12, 0x01, 0x31], true],
    ["timestamp nanos of 5 bytes over 2^31 (int32 wraps)", [0x32, 0x06, 0x10, 0xff, 0xff, 0xff, 0xff, 0x0f], true],
  ];
  for (const [name, bytes, plain] of cases) {
    const b = Uint8Array.from(bytes);
    t.is(plainUsageEventInput(b), plain, name);
    t.true(agrees(b), name);
  }
});

test("the plain reader reads what fromBinary reads: merged messages, repeated fields and map keys, partial timestamps", (t) => {
  for (let i = 0; i < 3000; i++) {
    // Concatenated encodings are one message with the later fields winning, maps and timestamps merged.
    const parts = Array.from({ length: 1 + rand(3) }, () => toBinary(UsageEventInputSchema, randomEvent()));
    const b = Buffer.concat(parts);
    t.true(agrees(b), b.toString("hex"));
    t.not(readPlainUsageEventInput(b), undefined);
  }
  const seconds = Uint8Array.from([0x32, 0x02, 0x08, 0x05, 0x32, 0x02, 0x10, 0x07]);
  t.deepEqual(readPlainUsageEventInput(seconds)?.timestamp, { $typeName: "google.protobuf.Timestamp", seconds: 5n, nanos: 7 });
  t.true(agrees(seconds));
});

test("random mutations, truncations and bytes never make fromBinary fail on what is called plain", (t) => {
  let plainSeen = 0;
  for (let i = 0; i < 20000; i++) {
    const b = toBinary(UsageEventInputSchema, randomEvent(rand(3) === 0 ? `${ASCII}é€😀` : ASCII, rand(4) === 0));
    const m = Uint8Array.from(b);
    switch (rand(4)) {
      case 0:
        if (m.length > 0) m[rand(m.length)] = rand(256);
        break;
      case 1:
        for (let k = rand(4); k >= 0 && m.length > 0; k--) m[rand(m.length)] = [0x00, 0x7f, 0x80, 0xff, 0x0a, 0x22, 0x32][rand(7)] as number;
        break;
      case 2: {
        const cut = m.subarray(0, rand(m.length + 1));
        plainSeen += plainUsageEventInput(cut) ? 1 : 0;
        t.true(agrees(cut), Buffer.from(cut).toString("hex"));
        continue;
      }
      default:
        for (let k = 0; k < m.length; k++) m[k] = rand(256);
    }
    plainSeen += plainUsageEventInput(m) ? 1 : 0;
    t.true(agrees(m), Buffer.from(m).toString("hex"));
  }
  t.true(plainSeen > 1000, "the mutations leave many plain messages, so the property is exercised");
});
