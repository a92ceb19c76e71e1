/**
 * One interface over the subject API for every protocol, so the same scenarios run over REST,
 * Connect, gRPC and gRPC-Web. Results are proto-JSON objects (snake_case, as REST returns them);
 * failures are `{ error: code }` with the Connect code name (`not_found`, `invalid_argument`…).
 */
import { type DescMessage, type JsonObject, type MessageShape, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { SubjectService } from "../../src/gen/billing/v1/subject_service_pb.js";
import { withNulls } from "../../src/rpc/json-out.js";
import { type Protocol, rest, rpcClient } from "./clients.js";

export type Api = "rest" | Protocol;
export const APIS: Api[] = ["rest", "connect", "grpc", "grpcweb"];

// biome-ignore lint: JSON results are loosely typed in tests
export type Json = any;
export type Result = { ok: Json } | { error: string; fields?: string[] };

export interface SubjectsApi {
  create(body: Json): Promise<Result>;
  get(id: string): Promise<Result>;
  update(id: string, body: Json): Promise<Result>;
  list(limit?: number, offset?: number): Promise<Result>;
  search(query: string, limit?: number, offset?: number): Promise<Result>;
  delete(id: string): Promise<Result>;
}

const CODE_NAMES: Record<number, string> = {
  [Code.InvalidArgument]: "invalid_argument",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.Unauthenticated]: "unauthenticated",
  [Code.PermissionDenied]: "permission_denied",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Internal]: "internal",
};

/** As the server writes JSON (src/rpc/json-out.ts): unset optional fields are null. */
const json = <D extends DescMessage>(desc: D, m: MessageShape<D>) => withNulls(desc, toJson(desc, m, { useProtoFieldName: true, alwaysEmitImplicit: true }) as JsonObject);

async function rpc<D extends DescMessage>(desc: D, call: () => Promise<MessageShape<D>>, pick?: string): Promise<Result> {
  try {
    const out = json(desc, await call()) as Json;
    return { ok: pick ? out[pick] : out };
  } catch (err) {
    const e = ConnectError.from(err);
    return { error: CODE_NAMES[e.code] ?? String(e.code) };
  }
}

function restApi(url: string, key: string | undefined): SubjectsApi {
  const call = async (method: string, path: string, body?: unknown): Promise<Result> => {
    const r = await rest(url, method, path, key, body);
    if (r.status === 200) return { ok: r.body };
    return { error: r.body.code };
  };
  const page = (limit?: number, offset?: number) => [limit !== undefined ? `limit=${limit}` : "", offset !== undefined ? `offset=${offset}` : ""].filter(Boolean).join("&");
  return {
    create: (b) => call("POST", "/subjects", b),
    get: (id) => call("GET", `/subjects/${encodeURIComponent(id)}`),
    update: (id, b) => call("PUT", `/subjects/${encodeURIComponent(id)}`, b),
    list: (l, o) => call("GET", `/subjects?${page(l, o)}`),
    search: (q, l, o) => call("GET", `/subjects/search?query=${encodeURIComponent(q)}&${page(l, o)}`),
    delete: (id) => call("DELETE", `/subjects/${encodeURIComponent(id)}`),
  };
}

function rpcApi(url: string, protocol: Protocol, key: string | undefined): SubjectsApi {
  const c = rpcClient(SubjectService, url, protocol, key);
  const S = SubjectService.method;
  return {
    create: (b) =>
      rpc(S.createSubject.output, () => c.createSubject({ email: b.email ?? undefined, externalId: b.external_id ?? undefined, name: b.name ?? undefined, metadata: b.metadata ?? {} }), "subject"),
    get: (id) => rpc(S.getSubject.output, () => c.getSubject({ subjectId: id }), "subject"),
    // A null in the body (REST: cleared) is the field named in the mask and left unset.
    update: (id, b) =>
      rpc(
        S.updateSubject.output,
        () =>
          c.updateSubject({
            subjectId: id,
            email: b.email ?? undefined,
            name: b.name ?? undefined,
            metadata: b.metadata ?? undefined,
            updateMask: Object.values(b).includes(null) ? { paths: Object.keys(b) } : undefined,
          }),
        "subject",
      ),
    list: (limit, offset) => rpc(S.listSubjects.output, () => c.listSubjects({ limit, offset })),
    search: (query, limit, offset) => rpc(S.searchSubjects.output, () => c.searchSubjects({ query, limit, offset })),
    delete: (id) => rpc(S.deleteSubject.output, () => c.deleteSubject({ subjectId: id })),
  };
}

export function subjectsApi(api: Api, url: string, key: string | undefined): SubjectsApi {
  return api === "rest" ? restApi(url, key) : rpcApi(url, api, key);
}

/** The value of a successful result; fails loudly with the error otherwise. */
export function ok(r: Result): Json {
  if ("error" in r) throw new Error(`expected success, got ${r.error}`);
  return r.ok;
}
