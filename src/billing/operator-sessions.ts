/**
 * Operator dashboard sessions (issue 19): a secret key of an environment is exchanged for a
 * session, whose random token lives only in the operator's cookie (the store keeps its SHA-256).
 * A session sees exactly the environment of its key; a browser may hold one session per
 * environment it signed in to (the switcher), each acting for its own environment only; it ends at its expiry, at sign-out, or as
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
  /** The sessions with these token hashes (those that exist, in any order), each with its hash. */
  getMany(tokenHashes: string[]): Promise<(OpenOperatorSession & { keyRevoked: boolean; tokenHash: string })[]>;
  /** Deletes the session with this token hash; false when there was none. */
  delete(tokenHash: string): Promise<boolean>;
  /** Deletes sessions that expired before `now` (at most `limit`); how many. */
  deleteExpired(now: Date, limit: number): Promise<number>;
}

/** The most environments one browser holds sign-ins for at once (the switcher's). */
export const MAX_BROWSER_SESSIONS = 10;

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

  /**
   * The open sessions of a browser's tokens (one per environment it signed in to), in the
   * tokens' order; unknown, expired and revoked ones are left out. At most MAX_BROWSER_SESSIONS.
   */
  async openAll(tokens: readonly string[]): Promise<{ token: string; open: OpenOperatorSession }[]> {
    const valid = [...new Set(tokens.filter((t) => /^[0-9A-Za-z]{43}$/.test(t)))].slice(0, MAX_BROWSER_SESSIONS);
    if (valid.length === 0) return [];
    const found = new Map((await this.store.getMany(valid.map(hashKey))).map((f) => [f.tokenHash, f]));
    const now = this.now().getTime();
    const out: { token: string; open: OpenOperatorSession }[] = [];
    for (const token of valid) {
      const f = found.get(hashKey(token));
      if (!f || f.keyRevoked || f.session.expiresAt.getTime() <= now) continue;
      out.push({ token, open: { session: f.session, environment: f.environment, keyPrefix: f.keyPrefix } });
    }
    return out;
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
