/**
 * gRPC server reflection, both versions tools call (grpc.reflection.v1 and the older v1alpha, the
 * same messages under another package), so `buf curl` and grpcurl can list and call the services
 * with no schema file. Answers from the generated descriptors of the served files, and of the
 * files whose types the server sends without serving them (google.rpc error details, so a client
 * can decode grpc-status-details-bin).
 */
import { type DescFile, type DescMessage, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import type { ServerReflectionRequest, ServerReflection, ServerReflectionResponseSchema } from "../gen/grpc/reflection/v1/reflection_pb.js";
import type { ServerReflection as ServerReflectionV1alpha } from "../gen/grpc/reflection/v1alpha/reflection_pb.js";

/** A response's oneof, the same shape in both versions. */
type Answer = MessageInitShape<typeof ServerReflectionResponseSchema>["messageResponse"];

/**
 * The two reflection services over `files` (listed with their services) and `typeFiles`
 * (resolvable by file name and symbol, their services not listed).
 */
export function reflectionServices(files: DescFile[], typeFiles: DescFile[] = []): { v1: ServiceImpl<typeof ServerReflection>; v1alpha: ServiceImpl<typeof ServerReflectionV1alpha> } {
  const byName = new Map<string, DescFile>();
  const bySymbol = new Map<string, DescFile>();
  const serviceNames: string[] = [];

  const addMessage = (file: DescFile, m: DescMessage) => {
    bySymbol.set(m.typeName, file);
    for (const f of m.fields) bySymbol.set(`${m.typeName}.${f.name}`, file);
    for (const n of m.nestedMessages) addMessage(file, n);
    for (const e of m.nestedEnums) bySymbol.set(e.typeName, file);
  };
  const addFile = (file: DescFile) => {
    if (byName.has(`${file.name}.proto`)) return;
    byName.set(`${file.name}.proto`, file);
    for (const dep of file.dependencies) addFile(dep);
    for (const m of file.messages) addMessage(file, m);
    for (const e of file.enums) bySymbol.set(e.typeName, file);
    for (const x of file.extensions) bySymbol.set(x.typeName, file);
    for (const s of file.services) {
      bySymbol.set(s.typeName, file);
      for (const m of s.methods) bySymbol.set(`${s.typeName}.${m.name}`, file);
    }
  };
  for (const f of files) {
    addFile(f);
    for (const s of f.services) serviceNames.push(s.typeName);
  }
  for (const f of typeFiles) addFile(f);

  /** The file and every file it depends on, each once, dependencies first. */
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

  const answer = (req: Pick<ServerReflectionRequest, "messageRequest">): Answer => {
    const notFound = (what: string) => ({
      case: "errorResponse" as const,
      value: { errorCode: Code.NotFound, errorMessage: `${what} not found` },
    });
    const files = (file: DescFile | undefined, what: string) =>
      file
        ? {
            case: "fileDescriptorResponse" as const,
            value: { fileDescriptorProto: withDeps(file) },
          }
        : notFound(what);
    const r = req.messageRequest;
    switch (r.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: { service: serviceNames.map((name) => ({ name })) },
        };
      case "fileByFilename":
        return files(byName.get(r.value), `file ${r.value}`);
      case "fileContainingSymbol":
        return files(bySymbol.get(r.value.replace(/^\./, "")), `symbol ${r.value}`);
      case "fileContainingExtension":
        return notFound(`extension ${r.value.extensionNumber} of ${r.value.containingType}`);
      case "allExtensionNumbersOfType":
        return {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: r.value, extensionNumber: [] },
        };
      default:
        return { case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "empty request" } };
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
