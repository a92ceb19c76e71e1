import { create } from "@bufbuild/protobuf";
import { Violations } from "../../billing/errors.js";
import type { CreateSubjectInput, Subject, UpdateSubjectInput } from "../../billing/subjects.js";
import { type Subject as SubjectPb, SubjectSchema } from "../../gen/billing/v1/subject_pb.js";
import type { CreateSubjectRequest, UpdateSubjectRequest } from "../../gen/billing/v1/subject_service_pb.js";
import { stringMapFromStruct, ts } from "./common.js";

export function subjectToPb(s: Subject): SubjectPb {
  return create(SubjectSchema, {
    id: s.id,
    createdAt: ts(s.createdAt),
    email: s.email ?? "",
    externalId: s.externalId ?? "",
    metadata: s.metadata,
    name: s.name ?? "",
    testClockId: s.testClockId ?? "",
    hasPaymentMethod: s.hasPaymentMethod,
  });
}

export function createSubjectInput(req: CreateSubjectRequest): CreateSubjectInput {
  return { email: req.email, externalId: req.externalId, metadata: req.metadata, name: req.name, testClockId: req.testClockId };
}

export function updateSubjectInput(req: UpdateSubjectRequest): UpdateSubjectInput {
  const v = new Violations();
  const metadata = req.metadata === undefined ? undefined : stringMapFromStruct(req.metadata, v.at("metadata"));
  v.throwIfAny();
  return { email: req.email, name: req.name, metadata };
}
