/**
 * The dashboard's signed-in routes and their dispatch: a page (GET) answers a View; an action
 * (POST) runs after its form's CSRF token is checked and answers a 303 or a View. Another
 * method on a known path is 405 (unless another route takes the path); an unknown ID is 404, as on
 * the API; bad input is 400 on a page, and a refused change is said on the page it came from.
 */
import { BillingError, InvalidArgumentError, NotFoundError } from "../../billing/errors.js";
import { sameToken } from "../../billing/operator-sessions.js";
import { html } from "../html.js";
import { type Req, type Res, readForm } from "../shell.js";
import type { Action } from "./actions.js";
import { type PageContext, type View, refusal } from "./common.js";
import { type DashSession, dashPage } from "./layout.js";

export type Route = { method: "GET"; path: RegExp; page: (ctx: PageContext) => Promise<View> } | { method: "POST"; path: RegExp; action: Action; back: (params: string[]) => string };

export function redirect(res: Res, location: string, headers: Record<string, string | string[]> = {}): void {
  res.writeHead(303, { location, "cache-control": "no-store", ...headers });
  res.end();
}

export function render(res: Res, view: View, open: DashSession): void {
  dashPage(res, view.status ?? 200, view.title, view.body, open, view.current ?? "");
}

/** A POST of a signed-in form: the action after the CSRF check; a refused change on a page with a link back. */
async function post(req: Req, res: Res, route: Extract<Route, { method: "POST" }>, ctx: PageContext): Promise<void> {
  const back = route.back(ctx.params);
  const form = await readForm(req);
  if (!sameToken(form.get("csrf") ?? "", ctx.open.session.csrfToken)) {
    const body = html`<h1>Refused</h1><p class="error" role="alert">The form's security token is missing or out of date. Reload the page and try again.</p><p><a href="${back}">Back</a></p>`;
    return render(res, { status: 403, title: "Refused", body }, ctx.open);
  }
  let out: string | View;
  try {
    out = await route.action(ctx, form);
  } catch (err) {
    if (err instanceof BillingError && !(err instanceof NotFoundError)) return render(res, refusal(err, back), ctx.open);
    throw err;
  }
  if (typeof out === "string") redirect(res, out);
  else render(res, out, ctx.open);
}

/** Answers a signed-in request by the first route whose path and method match. */
export async function dispatch(routes: Route[], req: Req, res: Res, path: string, base: Omit<PageContext, "params">): Promise<void> {
  const { open } = base;
  for (const route of routes) {
    const m = route.path.exec(path);
    if (!m) continue;
    if (req.method !== route.method) {
      if (req.method === "GET" || req.method === "HEAD" || req.method === "POST") {
        if (routes.some((r) => r.method !== route.method && r.path.test(path))) continue;
      }
      return dashPage(res, 405, "Not allowed", html`<h1>Method not allowed</h1>`, open, "", { allow: route.method });
    }
    const ctx: PageContext = { ...base, params: m.slice(1) };
    try {
      if (route.method === "POST") return await post(req, res, route, ctx);
      return render(res, await route.page(ctx), open);
    } catch (err) {
      if (err instanceof NotFoundError) return dashPage(res, 404, "Not found", html`<h1>Not found</h1><p>${err.message}</p>`, open);
      if (err instanceof InvalidArgumentError && req.method === "GET") return dashPage(res, 400, "Bad request", html`<h1>Bad request</h1><p class="error" role="alert">${err.message}</p>`, open);
      throw err;
    }
  }
  return dashPage(res, 404, "Not found", html`<h1>Not found</h1>`, open);
}
