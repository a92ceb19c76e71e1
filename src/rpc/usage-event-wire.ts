/**
 * A quick look at a UsageEventInput in the protobuf binary format (a stream's message): is it
 * plainly well formed, so that protobuf-es's fromBinary is certain to decode it? The request check
 * (rpc/messages.ts) otherwise decodes every message once only to see that it decodes, before
 * Connect decodes it again for the method: for a stream of small events that first decode was
 * about a tenth of the server's CPU per event.
 *
 * "Plain": only the message's own fields (1, 2, 3 strings; 4 map entries of a string key 1 and a
 * string value 2; 6 a Timestamp of varints seconds 1 and nanos 2), each with a one-byte tag, in
 * any order and number; lengths within bounds; strings all ASCII; varints short enough that no
 * reader can find them overlong. Anything else (an unknown or reserved field, another wire type,
 * non-ASCII text, a long varint...) is not plain and the check decodes it as before, with the same
 * error if it does not decode: this only ever skips a decode that would have succeeded.
 *
 * readPlainUsageEventInput reads such a message into what fromBinary would make of it (the lean
 * client-stream path, grpc-stream.ts): about a tenth of the server's main thread per streamed
 * event was protobuf-es's reflective reader.
 */
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { UsageEventInput } from "../gen/billing/v1/usage_event_pb.js";

/** The varint at `at` if it ends within `max` bytes and before `end` (then `pos` is just after it); else -1. */
function shortVarint(b: Uint8Array, at: number, end: number, max: number): number {
  let value = 0;
  let mul = 1;
  for (let i = 0; i < max; i++) {
    if (at + i >= end) return -1;
    const byte = b[at + i] as number;
    value += (byte & 0x7f) * mul;
    mul *= 128;
    if ((byte & 0x80) === 0) {
      pos = at + i + 1;
      return value;
    }
  }
  return -1;
}

/** Where shortVarint left off (one module-level slot rather than an array per varint). */
let pos = 0;

function ascii(b: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if ((b[i] as number) > 0x7f) return false;
  return true;
}

/** The end of a length-delimited field whose length starts at `at`, if within `end`; else -1. */
function delimited(b: Uint8Array, at: number, end: number): number {
  // At most 4 length bytes (< 2^28): a longer message is no event.
  const len = shortVarint(b, at, end, 4);
  if (len < 0 || pos + len > end) return -1;
  return pos + len;
}

function mapEntry(b: Uint8Array, from: number, to: number): boolean {
  let at = from;
  while (at < to) {
    const tag = b[at] as number;
    if (tag !== 0x0a && tag !== 0x12) return false;
    const start = at + 1;
    const stop = delimited(b, start, to);
    if (stop < 0 || !ascii(b, pos, stop)) return false;
    at = stop;
  }
  return true;
}

function timestamp(b: Uint8Array, from: number, to: number): boolean {
  let at = from;
  while (at < to) {
    const tag = b[at] as number;
    // seconds (int64): at most 9 bytes; nanos (int32): at most 5.
    if (tag === 0x08) {
      if (shortVarint(b, at + 1, to, 9) < 0) return false;
    } else if (tag === 0x10) {
      if (shortVarint(b, at + 1, to, 5) < 0) return false;
    } else return false;
    at = pos;
  }
  return true;
}

/** True when `b` is a plainly well-formed UsageEventInput (see above): fromBinary will decode it. */
export function plainUsageEventInput(b: Uint8Array): boolean {
  const end = b.byteLength;
  let at = 0;
  while (at < end) {
    const tag = b[at] as number;
    const stop = tag === 0x0a || tag === 0x12 || tag === 0x1a || tag === 0x22 || tag === 0x32 ? delimited(b, at + 1, end) : -1;
    if (stop < 0) return false;
    const start = pos;
    if (tag === 0x22) {
      if (!mapEntry(b, start, stop)) return false;
    } else if (tag === 0x32) {
      if (!timestamp(b, start, stop)) return false;
    } else if (!ascii(b, start, stop)) return false;
    at = stop;
  }
  return true;
}

/** The varint at `at` (its message already checked whole by plainUsageEventInput), exact as a bigint when it is longer than 7 bytes; `pos` is just after it. */
function exactVarint(b: Uint8Array, at: number): number | bigint {
  let value = 0;
  let i = 0;
  for (; i < 7; i++) {
    const byte = b[at + i] as number;
    value += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) {
      pos = at + i + 1;
      return value;
    }
  }
  let big = BigInt(value);
  for (; ; i++) {
    const byte = b[at + i] as number;
    big += BigInt(byte & 0x7f) << BigInt(7 * i);
    if ((byte & 0x80) === 0) {
      pos = at + i + 1;
      return big;
    }
  }
}

/**
 * A plain UsageEventInput (plainUsageEventInput) read straight into the message fromBinary would
 * make of it, without protobuf-es's reflective reader; undefined for anything not plain (and for
 * a `__proto__` data key), which fromBinary then reads. As the binary format says: a repeated
 * field's last value wins, repeated timestamps merge, a map entry's missing key or value is "".
 */
export function readPlainUsageEventInput(b: Uint8Array): UsageEventInput | undefined {
  if (!plainUsageEventInput(b)) return undefined;
  const buf = Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  const out: UsageEventInput = { $typeName: "billing.v1.UsageEventInput", idempotencyKey: "", subjectId: "", eventName: "", data: {} };
  const end = buf.byteLength;
  let at = 0;
  while (at < end) {
    const tag = buf[at] as number;
    const stop = delimited(buf, at + 1, end);
    const start = pos;
    if (tag === 0x0a) out.idempotencyKey = buf.toString("latin1", start, stop);
    else if (tag === 0x12) out.subjectId = buf.toString("latin1", start, stop);
    else if (tag === 0x1a) out.eventName = buf.toString("latin1", start, stop);
    else if (tag === 0x22) {
      let key = "";
      let value = "";
      let e = start;
      while (e < stop) {
        const t = buf[e] as number;
        const s = delimited(buf, e + 1, stop);
        if (t === 0x0a) key = buf.toString("latin1", pos, s);
        else value = buf.toString("latin1", pos, s);
        e = s;
      }
      if (key === "__proto__") return undefined;
      out.data[key] = value;
    } else {
      const ts: Timestamp = out.timestamp ?? { $typeName: "google.protobuf.Timestamp", seconds: 0n, nanos: 0 };
      let e = start;
      while (e < stop) {
        const t = buf[e] as number;
        const v = exactVarint(buf, e + 1);
        if (t === 0x08) ts.seconds = BigInt(v);
        else ts.nanos = Number(v) | 0;
        e = pos;
      }
      out.timestamp = ts;
    }
    at = stop;
  }
  return out;
}
