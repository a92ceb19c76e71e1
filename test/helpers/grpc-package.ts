/**
 * The project's protos loaded for @grpc/grpc-js, the client nobody here wrote: proto-loader reads
 * the .proto files themselves (from proto/ and third_party/), so the tests check the contract as
 * any other language's client would see it. Field names as written (keepCase) and 64-bit integers
 * as strings; `options` adds or overrides proto-loader's options (enums as strings, defaults, oneofs).
 */
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const ROOT = path.resolve(import.meta.dirname, "../..");

// biome-ignore lint: grpc-js package objects are untyped
export function grpcPackage(files: string[], options: protoLoader.Options = {}): any {
  const definition = protoLoader.loadSync(files, { includeDirs: [path.join(ROOT, "proto"), path.join(ROOT, "third_party")], keepCase: true, longs: String, ...options });
  return grpc.loadPackageDefinition(definition);
}
