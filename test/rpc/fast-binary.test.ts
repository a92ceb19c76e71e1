/** The lean gRPC path's binary writers (src/rpc/fast-binary.ts): the very bytes protobuf-es's toBinary writes. */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import test from "ava";
import { SubjectSchema } from "../../src/gen/billing/v1/subject_pb.js";
import { CreateSubjectResponseSchema, GetSubjectResponseSchema, UpdateSubjectResponseSchema } from "../../src/gen/billing/v1/subject_service_pb.js";
import { fastBinaryWriters } from "../../src/rpc/fast-binary.js";

const strings = ["", "a", "subj_4kS9x2QeUu8rZb1WmT0pLc", "Zoë Ångström", "日本語の名前", "emoji 🧾 and a lone \ud800 surrogate", "x".repeat(127), "y".repeat(128), "z".repeat(20_000)];
const pick = (i: number) => strings[i % strings.length] as string;

function subjects() {
  const out = [];
  for (let i = 0; i < 200; i++) {
    const metadata: Record<string, string> = {};
    for (let k = 0; k < i % 4; k++) metadata[k === 1 ? "2" : `${pick(i + k)}-${k}`] = pick(i * 3 + k);
    out.push(
      create(SubjectSchema, {
        id: pick(i),
        createdAt: i % 7 === 0 ? undefined : timestampFromDate(new Date(i % 5 === 0 ? 0 : 1_700_000_000_000 + i * 1_234_567 + (i % 3 === 0 ? 0 : i))),
        email: i % 2 === 0 ? undefined : pick(i + 1),
        externalId: i % 3 === 0 ? undefined : pick(i + 2),
        metadata,
        name: i % 5 === 1 ? undefined : pick(i + 3),
        testClockId: i % 4 === 0 ? pick(i + 4) : undefined,
        hasPaymentMethod: i % 2 === 1,
      }),
    );
  }
  return out;
}

for (const schema of [GetSubjectResponseSchema, CreateSubjectResponseSchema, UpdateSubjectResponseSchema]) {
  test(`${schema.typeName}: the same bytes as toBinary, for every shape of subject`, (t) => {
    const write = fastBinaryWriters.get(schema);
    if (!write) return t.fail(`no writer for ${schema.typeName}`);
    for (const subject of [...subjects(), undefined]) {
      const message = create(schema, { subject });
      const fast = write(message);
      if (!fast) return t.fail("a subject the writer does not cover");
      const expected = toBinary(schema, message);
      t.true(Buffer.from(fast).equals(Buffer.from(expected)), `${Buffer.from(fast).toString("hex").slice(0, 200)} is not ${Buffer.from(expected).toString("hex").slice(0, 200)}`);
    }
  });
}

test("a message with unknown fields, or an instant before 1970, is left to toBinary", (t) => {
  const write = fastBinaryWriters.get(GetSubjectResponseSchema);
  if (!write) return t.fail("no writer");
  const withUnknown = fromBinary(GetSubjectResponseSchema, Buffer.from([0x0a, 0x03, 0x0a, 0x01, 0x61, 0x78, 0x01]));
  t.truthy(withUnknown.$unknown?.length);
  t.is(write(withUnknown), undefined);
  const early = create(GetSubjectResponseSchema, { subject: create(SubjectSchema, { id: "s", createdAt: timestampFromDate(new Date(-1000)) }) });
  t.is(write(early), undefined);
  const inner = fromBinary(GetSubjectResponseSchema, Buffer.from([0x0a, 0x05, 0x0a, 0x01, 0x61, 0x78, 0x01]));
  t.truthy(inner.subject?.$unknown?.length);
  t.is(write(inner), undefined);
});
