/** Registers every service on one router: the single list of what the server serves. */
import type { DescFile } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import type { SubjectService as Subjects } from "../billing/subjects.js";
import { HealthService, file_billing_v1_health_service } from "../gen/billing/v1/health_service_pb.js";
import { SubjectService, file_billing_v1_subject_service } from "../gen/billing/v1/subject_service_pb.js";
import { ServerReflection, file_grpc_reflection_v1_reflection } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { reflectionService } from "./reflection.js";
import { healthService } from "./services/health-service.js";
import { subjectService } from "./services/subject-service.js";

export interface Services {
  subjects: Subjects;
}

/** The contract files whose services are served (reflection and the REST bridge read these). */
export const servedFiles: DescFile[] = [file_billing_v1_subject_service, file_billing_v1_health_service, file_grpc_reflection_v1_reflection];

/** The services whose google.api.http annotations become REST routes. */
export const restServices = [SubjectService, HealthService];

export function routes(services: Services) {
  return (router: ConnectRouter) => {
    router.service(HealthService, healthService());
    router.service(SubjectService, subjectService(services.subjects));
    router.service(ServerReflection, reflectionService(servedFiles));
  };
}
