/**
 * Operator dashboard sessions (issue 19): a secret key of an environment is exchanged for a
 * session, whose random token lives only in the operator's cookie (the store keeps its SHA-256).
 * A session sees exactly the environment of its key; it ends at its expiry, at sign-out, or as
 * soon as its key is revoked. Each session has its own CSRF token, which every form posts back.
 */
import { timingSafeEqual } from "node:crypto";
import { hashKey } from "./keys.js";
import { newId, randomBase62 } from "./ids.js";
import type { KeyWithEnvironment } from "./keys.js";
import type { Caller, EnvironmentMode } from "./tenancy.js";

export interface OperatorSession {
  id: string;
  environmentId: string;
  keyId: string;
  csrfToken: string;
  expiresAt: Date;
  createdAt: Date;
}

/** A live session with what the dashboard shows of its environment. */
export interface OpenOperatorSession {
  session: OperatorSession;
  environment: { id: string; name: string; mode: EnvironmentMode };
  /** The key's display prefix (`sk_test_AbCd`). */
  keyPrefix: string;
}

export interface OperatorSessionStore {
  insert(s: OperatorSession, tokenHash: string): Promise<void>;
  /** The session with this token hash, its environment and whether its key is revoked (undefined: none). */
  get(tokenHash: string): Promise<(OpenOperatorSession & { keyRevoked: boolean }) | undefined>;
  /** Deletes the session with this token hash; false when there was none. */
  delete(tokenHash: string): Promise<boolean>;
  /** Deletes sessions that expired before `now` (at most `limit`); how many. */
  deleteExpired(now: Date, limit: number): Promise<number>;
}

export type SignIn = { ok: true; token: string; open: OpenOperatorSession } | { ok: false; message: string };

/** A token compared in constant time (its length is no secret). */
export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a, "utf8");
  const y = Buffer.from(b, "utf8");
  return x.length === y.length && timingSafeEqual(x, y);
}

export class OperatorSessions {
  /**
   * `verify`: the API's own key check (rpc/auth.ts KeyVerifier.verify: unknown and revoked keys
   * give undefined). `lifetimeMs`: how long a session lasts from sign-in.
   */
  constructor(
    private readonly store: OperatorSessionStore,
    private readonly verify: (key: string) => Promise<KeyWithEnvironment | undefined>,
    private readonly lifetimeMs: number,
    private readonly now: () => Date,
  ) {}

  async signIn(key: string): Promise<SignIn> {
    const trimmed = key.trim();
    if (trimmed === "") return { ok: false, message: "Enter a secret API key." };
    const found = await this.verify(trimmed);
    if (!found) return { ok: false, message: "This key is not valid or has been revoked." };
    if (found.key.kind !== "secret") return { ok: false, message: "A publishable key cannot open the dashboard; use a secret key of the environment." };
    const now = this.now();
    await this.store.deleteExpired(now, 100);
    const token = randomBase62(43);
    const session: OperatorSession = {
      id: newId("ds"),
      environmentId: found.environment.id,
      keyId: found.key.id,
      csrfToken: randomBase62(43),
      expiresAt: new Date(now.getTime() + this.lifetimeMs),
      createdAt: now,
    };
    await this.store.insert(session, hashKey(token));
    return { ok: true, token, open: { session, environment: { id: found.environment.id, name: found.environment.name, mode: found.environment.mode }, keyPrefix: found.key.prefix } };
  }

  /** The open session of a cookie's token; undefined when unknown, expired, or its key was revoked. */
  async open(token: string): Promise<OpenOperatorSession | undefined> {
    if (!/^[0-9A-Za-z]{43}$/.test(token)) return undefined;
    const found = await this.store.get(hashKey(token));
    if (!found || found.keyRevoked || found.session.expiresAt.getTime() <= this.now().getTime()) return undefined;
    return { session: found.session, environment: found.environment, keyPrefix: found.keyPrefix };
  }

  /** Ends the session of this token (sign-out): it no longer opens, whoever holds the cookie. */
  async signOut(token: string): Promise<void> {
    if (/^[0-9A-Za-z]{43}$/.test(token)) await this.store.delete(hashKey(token));
  }

  /** The caller a session acts as: its environment, with a secret key's rights, as the API. */
  static callerOf(open: OpenOperatorSession): Caller {
    return { environmentId: open.environment.id, mode: open.environment.mode, keyKind: "secret" };
  }
}
