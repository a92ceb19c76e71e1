/**
 * Binary writers for the answers the lean gRPC path (grpc-unary.ts) sends most, byte for byte what
 * protobuf-es's reflective `toBinary` writes for them (test/rpc/fast-binary.test.ts compares the
 * two), in one buffer sized first: `toBinary` forks a writer per nested message (the Subject, its
 * Timestamp, each metadata entry), copies each into its parent and encodes every string through a
 * TextEncoder, about a tenth of the server's CPU per GetSubject call in a profile.
 *
 * A writer answers undefined for a message it does not cover exactly (unknown fields, an instant
 * a Date cannot hold); the caller then uses `toBinary`.
 */
import type { DescMessage, Message } from "@bufbuild/protobuf";
import type { Subject } from "../gen/billing/v1/subject_pb.js";
import { CreateSubjectResponseSchema, GetSubjectResponseSchema, UpdateSubjectResponseSchema } from "../gen/billing/v1/subject_service_pb.js";

type Unknown = { $unknown?: unknown[] };

function varintLength(n: number): number {
  let length = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    length++;
  }
  return length;
}

class Out {
  pos = 0;
  constructor(readonly buf: Buffer) {}
  varint(n: number): void {
    const buf = this.buf;
    while (n >= 0x80) {
      buf[this.pos++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    buf[this.pos++] = n;
  }
  /** String field `no` whose UTF-8 length is `length`: its tag and the length-delimited text; nothing when unset (-1). */
  string(no: number, s: string | undefined, length: number): void {
    if (length < 0) return;
    this.buf[this.pos++] = tag(no, 2);
    this.varint(length);
    this.pos += this.buf.write(s as string, this.pos, length, "utf8");
  }
}

/** Tag bytes: field number << 3 | wire type (2: length-delimited, 0: varint). All fit one byte here. */
function tag(no: number, wireType: number): number {
  return (no << 3) | wireType;
}

/** The UTF-8 length of an optional string field (-1: unset). */
function utf8Length(v: string | undefined): number {
  return v === undefined ? -1 : Buffer.byteLength(v, "utf8");
}

/** The bytes of a length-delimited field of `n` bytes with a one-byte tag (0: unset, -1). */
function fieldSize(n: number): number {
  return n < 0 ? 0 : 1 + varintLength(n) + n;
}

interface SubjectPlan {
  size: number;
  id: number;
  email: number;
  externalId: number;
  name: number;
  testClockId: number;
  created: number;
  seconds: number;
  nanos: number;
  metadata: [key: string, value: string, keyLength: number, valueLength: number, entryLength: number][];
}

/** Sizes of a Subject's fields (undefined: not one this writer covers). */
function planSubject(s: Subject): SubjectPlan | undefined {
  if ((s as Unknown).$unknown?.length) return undefined;
  let size = 0;
  // A proto3 string without presence: unset when empty.
  const id = s.id === "" ? -1 : Buffer.byteLength(s.id, "utf8");
  size += fieldSize(id);
  let created = -1;
  let seconds = 0;
  let nanos = 0;
  const at = s.createdAt;
  if (at !== undefined) {
    if ((at as Unknown).$unknown?.length) return undefined;
    // Only what a Date can hold, never negative: the int64 varint of a number.
    if (at.seconds < 0n || at.seconds > 8_640_000_000_000n || at.nanos < 0) return undefined;
    seconds = Number(at.seconds);
    nanos = at.nanos;
    created = (seconds !== 0 ? 1 + varintLength(seconds) : 0) + (nanos !== 0 ? 1 + varintLength(nanos) : 0);
    size += 1 + varintLength(created) + created;
  }
  const email = utf8Length(s.email);
  const externalId = utf8Length(s.externalId);
  const name = utf8Length(s.name);
  const testClockId = utf8Length(s.testClockId);
  size += fieldSize(email) + fieldSize(externalId) + fieldSize(name) + fieldSize(testClockId);
  const metadata: SubjectPlan["metadata"] = [];
  for (const k of Object.keys(s.metadata)) {
    const v = s.metadata[k] as string;
    const kl = Buffer.byteLength(k, "utf8");
    const vl = Buffer.byteLength(v, "utf8");
    const entry = 1 + varintLength(kl) + kl + 1 + varintLength(vl) + vl;
    metadata.push([k, v, kl, vl, entry]);
    size += 1 + varintLength(entry) + entry;
  }
  if (s.hasPaymentMethod) size += 2;
  return { size, id, email, externalId, name, testClockId, created, seconds, nanos, metadata };
}

function writeSubject(out: Out, s: Subject, p: SubjectPlan): void {
  out.string(1, s.id, p.id);
  if (p.created >= 0) {
    out.buf[out.pos++] = tag(2, 2);
    out.varint(p.created);
    if (p.seconds !== 0) {
      out.buf[out.pos++] = tag(1, 0);
      out.varint(p.seconds);
    }
    if (p.nanos !== 0) {
      out.buf[out.pos++] = tag(2, 0);
      out.varint(p.nanos);
    }
  }
  out.string(3, s.email, p.email);
  out.string(4, s.externalId, p.externalId);
  for (const [k, v, kl, vl, entry] of p.metadata) {
    out.buf[out.pos++] = tag(5, 2);
    out.varint(entry);
    out.string(1, k, kl);
    out.string(2, v, vl);
  }
  out.string(6, s.name, p.name);
  out.string(7, s.testClockId, p.testClockId);
  if (s.hasPaymentMethod) {
    out.buf[out.pos++] = tag(8, 0);
    out.buf[out.pos++] = 1;
  }
}

/** `{ Subject subject = 1; }`: GetSubject's, CreateSubject's and UpdateSubject's answers. */
function subjectResponse(message: Message): Uint8Array | undefined {
  const m = message as Message & { subject?: Subject } & Unknown;
  if (m.$unknown?.length) return undefined;
  const s = m.subject;
  if (s === undefined) return new Uint8Array(0);
  const plan = planSubject(s);
  if (!plan) return undefined;
  const out = new Out(Buffer.allocUnsafe(1 + varintLength(plan.size) + plan.size));
  out.buf[out.pos++] = tag(1, 2);
  out.varint(plan.size);
  writeSubject(out, s, plan);
  return out.buf;
}

/** The fast writer of each output message it covers, by schema. */
export const fastBinaryWriters = new Map<DescMessage, (message: Message) => Uint8Array | undefined>([
  [GetSubjectResponseSchema, subjectResponse],
  [CreateSubjectResponseSchema, subjectResponse],
  [UpdateSubjectResponseSchema, subjectResponse],
]);
