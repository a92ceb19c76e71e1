/**
 * Authentication (DESIGN §3): every call carries `X-API-Key` (as `x-api-key` metadata on
 * gRPC). The key decides the environment every query is scoped to. Publishable keys reach only
 * the methods listed in PUBLISHABLE.
 */
import type { Interceptor } from "@connectrpc/connect";
import { PermissionDeniedError, UnauthenticatedError } from "../billing/errors.js";
import { type AuthStore, type KeyWithEnvironment, callerOf, hashKey } from "../billing/keys.js";
import { toConnectError } from "./errors.js";
import { callerKey } from "./context.js";

/** Services that need no key: liveness and server reflection. */
const PUBLIC_SERVICES = new Set(["billing.v1.HealthService", "grpc.reflection.v1.ServerReflection"]);

/** Methods a publishable key may call (`Service/Method`). */
const PUBLISHABLE = new Set<string>(["billing.v1.CustomerAccessService/GetBillingState"]);

export const API_KEY_HEADER = "x-api-key";

/** Looks keys up, trusting a verified key for `cacheMs` (0: look up on every call). */
export class KeyVerifier {
  private readonly cache = new Map<string, { found: KeyWithEnvironment; until: number }>();
  constructor(
    private readonly store: AuthStore,
    private readonly cacheMs: number,
  ) {}

  async verify(key: string): Promise<KeyWithEnvironment | undefined> {
    const hash = hashKey(key);
    if (this.cacheMs > 0) {
      const hit = this.cache.get(hash);
      if (hit && hit.until > Date.now()) return hit.found;
    }
    const found = await this.store.findKeyByHash(hash);
    if (!found || found.key.revokedAt !== null) {
      this.cache.delete(hash);
      return undefined;
    }
    if (this.cacheMs > 0) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(hash, { found, until: Date.now() + this.cacheMs });
    }
    return found;
  }
}

export function authInterceptor(verifier: KeyVerifier): Interceptor {
  return (next) => async (req) => {
    if (PUBLIC_SERVICES.has(req.service.typeName)) return next(req);
    const key = req.header.get(API_KEY_HEADER)?.trim();
    if (!key) {
      throw toConnectError(new UnauthenticatedError("API_KEY_MISSING", "missing API key: send it in the X-API-Key header"));
    }
    const found = await verifier.verify(key);
    if (!found) {
      throw toConnectError(new UnauthenticatedError("API_KEY_INVALID", "the API key is not valid or has been revoked"));
    }
    const method = `${req.service.typeName}/${req.method.name}`;
    if (found.key.kind === "publishable" && !PUBLISHABLE.has(method)) {
      throw toConnectError(
        new PermissionDeniedError("PUBLISHABLE_KEY_NOT_ALLOWED", "a publishable key can only read billing state; use a secret key for this call"),
      );
    }
    req.contextValues.set(callerKey, callerOf(found));
    return next(req);
  };
}
