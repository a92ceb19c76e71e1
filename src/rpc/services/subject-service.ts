import type { ServiceImpl } from "@connectrpc/connect";
import type { SubjectService as Subjects } from "../../billing/subjects.js";
import type { SubjectService } from "../../gen/billing/v1/subject_service_pb.js";
import { pageOf } from "../convert/common.js";
import { callerOf } from "../context.js";
import { createSubjectInput, subjectToPb, updateSubjectInput } from "../convert/subject.js";

export function subjectService(subjects: Subjects): ServiceImpl<typeof SubjectService> {
  return {
    async createSubject(req, ctx) {
      const subject = await subjects.create(callerOf(ctx), createSubjectInput(req));
      return { subject: subjectToPb(subject) };
    },
    async getSubject(req, ctx) {
      return { subject: subjectToPb(await subjects.get(callerOf(ctx), req.subjectId)) };
    },
    async updateSubject(req, ctx) {
      const subject = await subjects.update(callerOf(ctx), req.subjectId, updateSubjectInput(req));
      return { subject: subjectToPb(subject) };
    },
    async listSubjects(req, ctx) {
      return pageOf(await subjects.list(callerOf(ctx), req.limit, req.offset), "subjects", subjectToPb);
    },
    async searchSubjects(req, ctx) {
      return pageOf(await subjects.search(callerOf(ctx), req.query, req.limit, req.offset), "subjects", subjectToPb);
    },
    async deleteSubject(req, ctx) {
      const subject = await subjects.delete(callerOf(ctx), req.subjectId);
      return { id: subject.id, deleted: true };
    },
  };
}
