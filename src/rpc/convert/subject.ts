import { Violations, invalid } from "../../billing/errors.js";
import type { Subject } from "../../billing/subject-types.js";
import type { CreateSubjectInput, UpdateSubjectInput } from "../../billing/subjects.js";
import { type Subject as SubjectPb, SubjectSchema } from "../../gen/billing/v1/subject_pb.js";
import type { CreateSubjectRequest, UpdateSubjectRequest } from "../../gen/billing/v1/subject_service_pb.js";
import { carriesRetired, retired, toPb } from "./common.js";
import { billingDetailsInput } from "./taxes.js";

export const subjectToPb = (s: Subject): SubjectPb => toPb(SubjectSchema, s);

export function createSubjectInput(req: CreateSubjectRequest): CreateSubjectInput {
  return {
    email: req.email,
    externalId: req.externalId,
    metadata: req.metadata,
    name: req.name,
    testClockId: req.testClockId,
    billingDetails: req.billingDetails && billingDetailsInput(req.billingDetails),
  };
}

/** The fields an update may name in its mask; `subject_id` names the subject and changes nothing. */
const UPDATABLE = new Set(["email", "name", "metadata", "billing_details"]);

/**
 * The update: with an `update_mask`, exactly the fields it names (a named `email` or `name` left
 * out is cleared; a named `metadata` replaces the map, an empty one clears it); without, the fields
 * that are set and `metadata` when it is not empty. A JSON body's keys become its mask, null ones
 * included (rpc/json.ts): `{"email": null}` names `email` and leaves it unset, so it is cleared.
 */
export function updateSubjectInput(req: UpdateSubjectRequest): UpdateSubjectInput {
  if (carriesRetired(req, 4)) invalid("metadata", retired(4, "a google.protobuf.Struct", 6, "a map<string,string>"));
  const paths = req.updateMask?.paths ?? [];
  if (paths.length === 0) {
    return {
      email: req.email,
      name: req.name,
      metadata: Object.keys(req.metadata).length > 0 ? req.metadata : undefined,
      billingDetails: req.billingDetails && billingDetailsInput(req.billingDetails),
    };
  }
  const v = new Violations();
  paths.forEach((p, i) => {
    if (!UPDATABLE.has(p) && p !== "subject_id") v.at("update_mask").add(`paths[${i}]`, `cannot name "${p}": an update changes email, name, metadata or billing_details`);
  });
  v.throwIfAny();
  const named = new Set(paths);
  return {
    email: named.has("email") ? (req.email ?? "") : undefined,
    name: named.has("name") ? (req.name ?? "") : undefined,
    metadata: named.has("metadata") ? req.metadata : undefined,
    // Named and absent (JSON null): cleared.
    billingDetails: named.has("billing_details") ? (req.billingDetails ? billingDetailsInput(req.billingDetails) : null) : undefined,
  };
}
