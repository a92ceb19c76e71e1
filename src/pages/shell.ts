/**
 * The shell every page people see shares (the hosted checkout, invoice and customer portal, the
 * dashboard, the server's own refusals of a form): the security headers, the hosted pages' frame
 * and styles, reading a POSTed form, and serving a prefix of page routes with their failures.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { AbortedError, UnavailableError } from "../billing/errors.js";
import { isTransient, isUnavailable } from "../db/errors.js";
import type { Logger } from "../log.js";
import { traceOf } from "../ops/trace.js";
import { formBodyOf } from "./form-body.js";
import { type Html, html, raw } from "./html.js";

export type Req = IncomingMessage | Http2ServerRequest;
export type Res = ServerResponse | Http2ServerResponse;

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#111}
h1{font-size:1.5rem}table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.4rem;border-bottom:1px solid #ddd}
td.n,th.n{text-align:right}.total td{font-weight:bold;border-top:2px solid #111}label{display:block;font-weight:600;margin:.5rem 0 .25rem}
input{font-size:1.1rem;padding:.5rem;width:100%;box-sizing:border-box}button{font-size:1.1rem;padding:.6rem 1.2rem;margin-top:1rem}
.error{color:#a00;background:#fee;border:1px solid #a00;padding:.5rem;border-radius:4px}.muted{color:#555;font-size:.9rem}
td,th{overflow-wrap:break-word}td:first-child{overflow-wrap:anywhere}.nowrap{white-space:nowrap}.notice{background:#efe;border:1px solid #070;padding:.5rem;border-radius:4px}
.box{border:1px solid #ccc;border-radius:6px;padding:0 1rem;margin:1rem 0}h2{font-size:1.2rem;margin-top:2rem}h3{font-size:1.05rem;margin-bottom:.25rem}
a.button{display:inline-block;padding:.45rem 1rem;border:1px solid #111;border-radius:4px;color:#111;text-decoration:none;margin:.25rem 0}
.over{color:#a00;font-weight:600}.credit{color:#1f6b35}.kind{white-space:nowrap}@media (max-width:30rem){th,td{padding:.35rem .25rem}.box{padding:0 .75rem}}
@media print{.noprint{display:none}body{margin:0}a{color:#111;text-decoration:none}}`;

/** The one inline script any page has: the hosted invoice's Print button (allowed by its hash, nothing else runs). */
export const PRINT_SCRIPT = "window.print()";
const PRINT_HASH = `sha256-${createHash("sha256").update(PRINT_SCRIPT).digest("base64")}`;

/**
 * Every page's Content-Security-Policy (hosted checkout, invoice and portal, the dashboard): no
 * script but the Print button's handler, nothing loaded from elsewhere (the CSS is inline), forms
 * post only to this service, no framing. A bug that let markup through escaping could still not
 * run anything. `formTargets`: other origins a form may end up at (a browser applies form-action
 * to the redirect after the POST too: the checkout's 303 to the application's callback).
 */
export function pageCsp(formTargets: readonly string[] = []): string {
  const forms = ["'self'", ...formTargets].join(" ");
  return `default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; script-src 'unsafe-hashes' '${PRINT_HASH}'; form-action ${forms}; frame-ancestors 'none'; base-uri 'none'`;
}

/** Where Stripe's card and payment pages are: a form whose POST is answered with a 303 there (the checkout's, the portal's card form, a hosted invoice's pay link) needs it in form-action. */
export const STRIPE_CHECKOUT_ORIGIN = "https://checkout.stripe.com";

/** The headers of every page (the hosted pages and the dashboard): see pageCsp. */
export function pageHeaders(formTargets: readonly string[] = []): Record<string, string> {
  return {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "content-security-policy": pageCsp(formTargets),
  };
}

/** The origin of an http(s) URL, for form-action; undefined for anything else. */
export function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Writes a whole page: the shared shell (viewport for phones, print styles) around `body`, with pageHeaders. */
export function page(res: Res, status: number, title: string, body: Html, formTargets: readonly string[] = []): void {
  const doc = html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${title}</title><style>${raw(STYLE)}</style></head><body>${body}</body></html>`;
  res.writeHead(status, pageHeaders(formTargets));
  res.end(doc.text);
}

/** A page that says one thing: a heading and, when given, a paragraph. */
export function messagePage(res: Res, status: number, title: string, heading: string, text?: Html | string): void {
  page(res, status, title, html`<main><h1>${heading}</h1>${text === undefined ? "" : html`<p>${text}</p>`}</main>`);
}

export function notAllowed(res: Res): void {
  res.setHeader("allow", "GET, POST");
  messagePage(res, 405, "Not allowed", "Method not allowed");
}

/**
 * A POSTed form (application/x-www-form-urlencoded), as the server read it before the page was
 * called (form-body.ts: bounded, with its own deadline, before admission); empty when there
 * was none (the form's CSRF check then refuses it).
 */
export async function readForm(req: Req): Promise<URLSearchParams> {
  return new URLSearchParams((formBodyOf(req) ?? "").toString("utf8"));
}

/**
 * The page routes under `prefix`: `handle` answers them (the path without the query); returns
 * false for any other path. A page that fails answers 503 with Retry-After when trying again can
 * work (the database out of reach, a lost write conflict, a server stopping), else 500, and is logged.
 */
export function servePages(prefix: string, handle: (req: Req, res: Res, path: string) => Promise<void>, log: Logger) {
  return (req: Req, res: Res): boolean => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (!path.startsWith(prefix)) return false;
    handle(req, res, path).catch((err) => {
      // A database out of reach, a write that lost a conflict (a deadlock, a cluster's certification)
      // or a server stopping: 503 with Retry-After, and the same click works again. Anything else: 500.
      const later = isUnavailable(err) || isTransient(err) || err instanceof AbortedError || err instanceof UnavailableError;
      if (later) log.warn("page failed; it can be tried again", { path, request_id: traceOf(res)?.id, err });
      else log.error("page failed", { path, request_id: traceOf(res)?.id, err });
      if (res.headersSent) return void res.end();
      if (later) res.setHeader("retry-after", "1");
      messagePage(res, later ? 503 : 500, "Error", "Something went wrong", "Try again in a moment.");
    });
    return true;
  };
}
