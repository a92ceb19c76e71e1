/**
 * The operator dashboard (issue 19), served on the API's port under /dashboard: plain HTML forms
 * that work without JavaScript, on the same use cases the RPC services call (a Caller for the
 * session's environment), never a second data path.
 *
 *   GET  /dashboard/sign-in        the sign-in form (a secret key of the environment); POST opens a session
 *   POST /dashboard/switch         environment_id: makes another environment of the browser's the active one
 *   POST /dashboard/sign-out       ends the browser's sessions (deleted on the server) and clears the cookie
 *   the pages and changes          routes.ts, one module per page under pages/, the changes in actions.ts
 *
 * A GET never changes anything; every POST carries a CSRF token (session.ts). A request acts for
 * the browser's active environment only (its caller, its CSRF token): another environment's IDs
 * are 404, as on the API, even one the browser is signed in to, until it is switched to. A
 * changing POST answers 303 back to its page.
 */
import { OperatorSessions } from "../../billing/operator-sessions.js";
import type { Logger } from "../../log.js";
import { html } from "../html.js";
import { type Req, type Res, servePages } from "../shell.js";
import type { DashboardServices } from "./common.js";
import { type DashSession, dashPage } from "./layout.js";
import { dispatch, redirect } from "./router.js";
import { ROUTES } from "./routes.js";
import { type DashboardOptions, browserSessions, cookies, sessionTokens } from "./session.js";

export type { DashboardServices } from "./common.js";
export { type DashboardOptions, SESSION_COOKIE } from "./session.js";

export function createDashboard(sessions: OperatorSessions, s: DashboardServices, opts: DashboardOptions, log: Logger) {
  const browser = browserSessions(sessions, opts);

  const handle = async (req: Req, res: Res, path: string): Promise<void> => {
    const jar = cookies(req);
    const tokens = sessionTokens(jar);
    if (path === "/dashboard/sign-in") return browser.signIn(req, res, jar, tokens);
    const held = tokens.length > 0 ? await sessions.openAll(tokens) : [];
    const active = held[0];
    if (path === "/dashboard/sign-out") return browser.signOut(req, res, tokens, active);
    if (!active) {
      if (req.method === "GET") return redirect(res, "/dashboard/sign-in", tokens.length > 0 ? { "set-cookie": browser.clearSession } : {});
      return dashPage(res, 401, "Signed out", html`<h1>Your session has ended</h1><p><a href="/dashboard/sign-in">Sign in again</a></p>`);
    }
    // A sign-in that no longer opens (expired, its key revoked) drops out of the browser's list.
    if (held.length !== tokens.length && req.method === "GET") return redirect(res, req.url ?? "/dashboard", { "set-cookie": browser.sessionCookie(held.map((h) => h.token)) });
    const open: DashSession = { ...active.open, environments: held.map((h) => h.open.environment) };
    if (path === "/dashboard/switch") return browser.switchTo(req, res, held, open);
    const query = new URLSearchParams((req.url ?? "").split("?")[1] ?? "");
    return dispatch(ROUTES, req, res, path, { open, caller: OperatorSessions.callerOf(open), services: s, query });
  };

  const serve = servePages("/dashboard", handle, log);
  return (req: Req, res: Res): boolean => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (path !== "/dashboard" && !path.startsWith("/dashboard/")) return false;
    return serve(req, res);
  };
}
