/**
 * What the server's detours read of an RPC request before Connect does (src/server.ts, the
 * binary and strict-instant checks): one definition each.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";

/** The request's media type, lower-cased, without parameters (`application/grpc+proto`). */
export const contentType = (req: UniversalServerRequest): string => (req.header.get("content-type") ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";

/** Whether the client sends a stream of messages (client or bidi streaming), not one. */
export const isStreamingRequest = (method: DescMethod): boolean => method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming";
