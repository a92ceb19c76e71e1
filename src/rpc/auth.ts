/**
 * Authentication (DESIGN §3): every call carries `X-API-Key` (as `x-api-key` metadata on
 * gRPC). The key decides the environment every query is scoped to. Publishable keys reach only
 * the methods listed in PUBLISHABLE.
 */
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { type ConnectError, type Interceptor, createContextKey } from "@connectrpc/connect";
import { PermissionDeniedError, UnauthenticatedError } from "../billing/errors.js";
import { type AuthStore, type KeyWithEnvironment, callerOf, hashKey } from "../billing/keys.js";
import { toConnectError } from "./errors.js";
import type { Caller } from "../billing/tenancy.js";
import { callerKey } from "./context.js";

/** Services that need no key: liveness, gRPC health and server reflection. */
const PUBLIC_SERVICES = new Set(["billing.v1.HealthService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]);

/** Methods a publishable key may call (`Service/Method`). */
const PUBLISHABLE = new Set<string>(["billing.v1.CustomerAccessService/GetBillingState"]);

export const API_KEY_HEADER = "x-api-key";

/** Whether calls of `service` need a key (the OpenAPI document marks the others as open). */
export const needsKey = (service: DescService): boolean => !PUBLIC_SERVICES.has(service.typeName);

/** Whether a publishable key may call `method`. */
export const publishableMay = (method: DescMethod): boolean => PUBLISHABLE.has(`${method.parent.typeName}/${method.name}`);

/**
 * What the server decided from a call's headers before reading its body (edge/admit.ts): the caller,
 * or the error to answer with. Unset when a call did not come through the server's handler.
 */
export type PreAuth = { caller: Caller | undefined } | { error: ConnectError };
export const preAuthKey = createContextKey<PreAuth | undefined>(undefined, { description: "authenticated from headers" });

/**
 * Looks keys up, trusting a verified key for `cacheMs` (0: look up on every call). The key comes
 * with its environment, and so with the environment's rate-limit overrides: a change to them
 * reaches a server within `cacheMs` too.
 */
export class KeyVerifier {
  /**
   * Keyed by the key itself rather than its hash: a hit costs no SHA-256 (the key is in the
   * request's memory anyway for as long); the caller is kept with it, built once.
   */
  private readonly cache = new Map<string, { found: KeyWithEnvironment; authenticated: Authenticated; until: number }>();
  constructor(
    private readonly store: AuthStore,
    private readonly cacheMs: number,
  ) {}

  /** The verified key and its caller if `key` is cached and fresh (no lookup); undefined otherwise. */
  cached(key: string): Authenticated | undefined {
    if (this.cacheMs <= 0) return undefined;
    const hit = this.cache.get(key);
    return hit && hit.until > Date.now() ? hit.authenticated : undefined;
  }

  async verify(key: string): Promise<KeyWithEnvironment | undefined> {
    const hit = this.cached(key);
    if (hit) return hit.found;
    const found = await this.store.findKeyByHash(hashKey(key));
    if (!found || found.key.revokedAt !== null) {
      this.cache.delete(key);
      return undefined;
    }
    if (this.cacheMs > 0) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(key, { found, authenticated: { caller: callerOf(found), found }, until: Date.now() + this.cacheMs });
    }
    return found;
  }
}

/** A caller with the key it used (its ID and environment, for the key's rate limits). */
export interface Authenticated {
  caller: Caller;
  found: KeyWithEnvironment;
}

/**
 * The caller of `method` holding `key` (the X-API-Key value) with its verified key, or undefined
 * for the services that need no key; throws the Connect error for a missing, unknown,
 * revoked or publishable-where-secret-is-needed key. The server calls it from the headers. The
 * answer is synchronous (no promise) when it needs no lookup: a service that needs no key, a
 * missing key, a key the verifier has cached.
 */
export function authenticateKey(verifier: KeyVerifier, method: DescMethod, key: string | undefined): Authenticated | undefined | Promise<Authenticated | undefined> {
  if (!needsKey(method.parent)) return undefined;
  const trimmed = key?.trim();
  if (!trimmed) {
    throw toConnectError(new UnauthenticatedError("API_KEY_MISSING", "missing API key: send it in the X-API-Key header"));
  }
  const hit = verifier.cached(trimmed);
  if (hit) return allowed(hit, method);
  return verifier.verify(trimmed).then((found) => {
    if (!found) {
      throw toConnectError(new UnauthenticatedError("API_KEY_INVALID", "the API key is not valid or has been revoked"));
    }
    return allowed({ caller: callerOf(found), found }, method);
  });
}

/** `authenticated`, unless its key is publishable and `method` is not one such a key may call (throws). */
function allowed(authenticated: Authenticated, method: DescMethod): Authenticated {
  if (authenticated.found.key.kind === "publishable" && !publishableMay(method)) {
    throw toConnectError(new PermissionDeniedError("PUBLISHABLE_KEY_NOT_ALLOWED", "a publishable key can only read billing state; use a secret key for this call"));
  }
  return authenticated;
}

export function authInterceptor(verifier: KeyVerifier): Interceptor {
  return (next) => async (req) => {
    const pre = req.contextValues.get(preAuthKey);
    if (pre !== undefined) {
      if ("error" in pre) throw pre.error;
      if (pre.caller) req.contextValues.set(callerKey, pre.caller);
      return next(req);
    }
    // A call that did not come through the server's handler (an in-process transport): its key now.
    const caller = (await authenticateKey(verifier, req.method, req.header.get(API_KEY_HEADER) ?? undefined))?.caller;
    if (caller) req.contextValues.set(callerKey, caller);
    return next(req);
  };
}
