/**
 * gRPC server reflection, both versions tools call (grpc.reflection.v1 and the older v1alpha, the
 * same messages under another package), so `buf curl` and grpcurl can list and call the services
 * with no schema file. Answers from the generated descriptors.
 */
import { type DescFile, type DescService, type MessageInitShape, createRegistry, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import type { ServerReflection, ServerReflectionRequest, ServerReflectionResponseSchema } from "../gen/grpc/reflection/v1/reflection_pb.js";
import type { ServerReflection as ServerReflectionV1alpha } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";

/**
 * The two reflection services over `services` (listed, their files resolvable) and `typeFiles`
 * (resolvable by file name and symbol, their services not listed).
 */
export function reflectionServices(services: DescService[], typeFiles: DescFile[]): { v1: ServiceImpl<typeof ServerReflection>; v1alpha: ServiceImpl<typeof ServerReflectionV1alpha> } {
  const byName = new Map<string, DescFile>();
  const bySymbol = new Map<string, DescFile>();
  const addFile = (file: DescFile) => {
    if (byName.has(`${file.name}.proto`)) return;
    byName.set(`${file.name}.proto`, file);
    for (const dep of file.dependencies) addFile(dep);
    // Every type of the file, nested ones included; a message's fields and a service's methods are symbols too.
    for (const t of createRegistry(file)) {
      bySymbol.set(t.typeName, file);
      for (const m of t.kind === "message" ? t.fields : t.kind === "service" ? t.methods : []) bySymbol.set(`${t.typeName}.${m.name}`, file);
    }
  };
  for (const s of services) addFile(s.file);
  for (const f of typeFiles) addFile(f);

  /** The file and every file it depends on, each once, the file first. */
  const withDeps = (file: DescFile): Uint8Array[] => {
    const seen = new Set<string>();
    const out: Uint8Array[] = [];
    const visit = (f: DescFile) => {
      if (seen.has(f.name)) return;
      seen.add(f.name);
      for (const d of f.dependencies) visit(d);
      out.push(toBinary(FileDescriptorProtoSchema, f.proto));
    };
    visit(file);
    return out.reverse();
  };

  const error = (errorCode: Code, errorMessage: string) => ({ case: "errorResponse" as const, value: { errorCode, errorMessage } });
  const files = (file: DescFile | undefined, what: string) =>
    file ? { case: "fileDescriptorResponse" as const, value: { fileDescriptorProto: withDeps(file) } } : error(Code.NotFound, `${what} not found`);
  const answer = (req: Pick<ServerReflectionRequest, "messageRequest">): MessageInitShape<typeof ServerReflectionResponseSchema>["messageResponse"] => {
    const r = req.messageRequest;
    switch (r.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: services.map((s) => ({ name: s.typeName })) } };
      case "fileByFilename":
        return files(byName.get(r.value), `file ${r.value}`);
      case "fileContainingSymbol":
        return files(bySymbol.get(r.value.replace(/^\./, "")), `symbol ${r.value}`);
      case "fileContainingExtension":
        return error(Code.NotFound, `extension ${r.value.extensionNumber} of ${r.value.containingType} not found`);
      case "allExtensionNumbersOfType":
        return { case: "allExtensionNumbersResponse", value: { baseTypeName: r.value, extensionNumber: [] } };
      default:
        return error(Code.InvalidArgument, "empty request");
    }
  };

  // The versions differ only in their messages' package: one answer, typed for each.
  const v1: ServiceImpl<typeof ServerReflection> = {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield { validHost: req.host, originalRequest: req, messageResponse: answer(req) as never };
    },
  };
  const v1alpha: ServiceImpl<typeof ServerReflectionV1alpha> = {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield { validHost: req.host, originalRequest: req, messageResponse: answer(req as never) as never };
    },
  };
  return { v1, v1alpha };
}
