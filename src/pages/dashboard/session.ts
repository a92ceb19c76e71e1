/**
 * The browser's sessions: signing in (a secret key of the environment), switching the active
 * environment, signing out. The cookie holds one session token per environment the browser signed
 * in to (at most MAX_BROWSER_SESSIONS), the active one first: HttpOnly, SameSite=Strict, scoped to
 * /dashboard, with an expiry. The sign-in form carries a token bound to a short-lived pre-session
 * cookie; every other form the session's CSRF token, compared in constant time; without it: 403.
 * Failed sign-ins are throttled per address and per server (429, Retry-After).
 */
import { randomBase62 } from "../../billing/ids.js";
import { MAX_BROWSER_SESSIONS, type OperatorSessions, sameToken } from "../../billing/operator-sessions.js";
import { SignInThrottle } from "./sign-in-throttle.js";
import { html } from "../html.js";
import { type Req, type Res, readForm } from "../shell.js";
import { type DashSession, csrfField, dashPage } from "./layout.js";
import { redirect } from "./router.js";

export const SESSION_COOKIE = "billing_dashboard";
const LOGIN_COOKIE = "billing_dashboard_login";

export interface DashboardOptions {
  /** Adds `Secure` to the cookies (the public URL is https). */
  secureCookies: boolean;
  /** The session's lifetime (the cookie's Max-Age), seconds. */
  sessionSeconds: number;
  /** Failed sign-ins' throttle (default: SIGN_IN_PER_ADDRESS and SIGN_IN_GLOBAL on real time). */
  throttle?: SignInThrottle;
}

/** The request's cookies by name. */
export function cookies(req: Req): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0) out.set(part.slice(0, i).trim(), part.slice(i + 1).trim());
  }
  return out;
}

/** The browser's sign-ins, one per environment, the active one first (`token.token…`). */
export function sessionTokens(jar: Map<string, string>): string[] {
  return (jar.get(SESSION_COOKIE) ?? "")
    .split(".")
    .filter((x) => x !== "")
    .slice(0, 2 * MAX_BROWSER_SESSIONS);
}

export type BrowserSessions = ReturnType<typeof browserSessions>;

export function browserSessions(sessions: OperatorSessions, opts: DashboardOptions) {
  const secure = opts.secureCookies ? "; Secure" : "";
  const throttle = opts.throttle ?? new SignInThrottle();
  const sessionCookie = (tokens: string[]) => `${SESSION_COOKIE}=${tokens.join(".")}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${opts.sessionSeconds}${secure}`;
  const clearSession = `${SESSION_COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0${secure}`;
  const loginCookie = (token: string) => `${LOGIN_COOKIE}=${token}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=3600${secure}`;
  const clearLogin = `${LOGIN_COOKIE}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0${secure}`;

  function signInPage(res: Res, status: number, error?: string, headers: Record<string, string> = {}): void {
    const token = randomBase62(32);
    const body = html`<div class="signin card"><h1>Billing dashboard</h1>
<p>Sign in with a <strong>secret API key</strong> of the environment you operate. The dashboard shows one environment at a time; signing in with a key of another environment adds it to the switcher at the top.</p>
${error ? html`<p class="error" role="alert">${error}</p>` : ""}
<form method="post" action="/dashboard/sign-in">${csrfField(token)}
<label for="api_key">Secret API key</label>
<input id="api_key" name="api_key" type="password" autocomplete="current-password" required spellcheck="false">
<button type="submit">Sign in</button></form>
<p class="muted">The session lasts ${Math.round(opts.sessionSeconds / 60)} minutes, or until you sign out.</p></div>`;
    dashPage(res, status, "Sign in", body, undefined, "", { ...headers, "set-cookie": loginCookie(token) });
  }

  /** GET: the form; POST: checks the form's token and the throttle, then the key; a session for its environment, the active one. */
  async function signIn(req: Req, res: Res, jar: Map<string, string>, tokens: string[]): Promise<void> {
    if (req.method === "GET") return signInPage(res, 200);
    if (req.method !== "POST") return dashPage(res, 405, "Not allowed", html`<h1>Method not allowed</h1>`, undefined, "", { allow: "GET, POST" });
    const form = await readForm(req);
    const expected = jar.get(LOGIN_COOKIE) ?? "";
    if (expected === "" || !sameToken(form.get("csrf") ?? "", expected)) return signInPage(res, 403, "The sign-in form expired or came from elsewhere. Try again.");
    // Failed sign-ins are throttled per client address and for the server (sign-in-throttle.ts):
    // while throttled, no key is looked at.
    const address = req.socket?.remoteAddress;
    const wait = throttle.refusal(address);
    if (wait !== undefined) return signInPage(res, 429, `Too many failed sign-ins. Try again in ${wait} s.`, { "retry-after": String(wait) });
    const result = await sessions.signIn(form.get("api_key") ?? "");
    if (!result.ok) {
      throttle.failed(address);
      return signInPage(res, 401, result.message);
    }
    // A sign-in adds its environment to the browser's session and makes it the active one; an
    // earlier sign-in to the same environment is replaced (ended on the server), and so are the
    // oldest beyond MAX_BROWSER_SESSIONS and any that no longer open.
    const held = await sessions.openAll(tokens);
    const others = held.filter((h) => h.open.environment.id !== result.open.environment.id);
    const kept = others.slice(0, MAX_BROWSER_SESSIONS - 1).map((h) => h.token);
    for (const t of tokens) if (!kept.includes(t)) await sessions.signOut(t);
    return redirect(res, "/dashboard", { "set-cookie": [sessionCookie([result.token, ...kept]), clearLogin] });
  }

  type Held = Awaited<ReturnType<OperatorSessions["openAll"]>>;

  /** POST: ends every environment's sign-in of the browser (on the server) and clears the cookie. */
  async function signOut(req: Req, res: Res, tokens: string[], active: Held[number] | undefined): Promise<void> {
    if (req.method !== "POST") return dashPage(res, 405, "Not allowed", html`<h1>Method not allowed</h1>`, undefined, "", { allow: "POST" });
    if (active) {
      const form = await readForm(req);
      if (!sameToken(form.get("csrf") ?? "", active.open.session.csrfToken))
        return dashPage(res, 403, "Refused", html`<h1>Refused</h1><p class="error" role="alert">The form's security token is missing or out of date.</p>`, active.open);
      // Every environment's sign-in ends.
      for (const t of tokens) await sessions.signOut(t);
    }
    return redirect(res, "/dashboard/sign-in", { "set-cookie": clearSession });
  }

  /** POST environment_id: makes another environment of the browser's the active one. */
  async function switchTo(req: Req, res: Res, held: Held, open: DashSession): Promise<void> {
    if (req.method !== "POST") return dashPage(res, 405, "Not allowed", html`<h1>Method not allowed</h1>`, open, "", { allow: "POST" });
    const form = await readForm(req);
    if (!sameToken(form.get("csrf") ?? "", open.session.csrfToken))
      return dashPage(res, 403, "Refused", html`<h1>Refused</h1><p class="error" role="alert">The form's security token is missing or out of date. Reload the page and try again.</p>`, open);
    const to = held.find((h) => h.open.environment.id === form.get("environment_id"));
    if (!to) return dashPage(res, 404, "Not found", html`<h1>Not found</h1><p>This browser is not signed in to that environment.</p>`, open);
    return redirect(res, "/dashboard", { "set-cookie": sessionCookie([to.token, ...held.filter((h) => h !== to).map((h) => h.token)]) });
  }

  return { signIn, signOut, switchTo, sessionCookie, clearSession };
}
