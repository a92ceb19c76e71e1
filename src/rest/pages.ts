/**
 * The pages people see: the hosted checkout (a plain HTML form that works without JavaScript),
 * the hosted invoice (readable and printable) and the customer portal (portal-pages.ts, on the
 * same page shell). Reached without an API key, through unguessable tokens in their URLs.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { NotFoundError } from "../billing/errors.js";
import { displayMoney } from "../billing/money.js";
import { NO_PROVIDER_PAGE_MESSAGE, normalizeCallbackUrl } from "../billing/subscriptions/checkout.js";
import type { HostedCheckout } from "../billing/subscriptions/hosted-checkout.js";
import type { Invoices } from "../billing/subscriptions/invoices.js";
import type { CheckoutSession, Invoice, PaymentProvider } from "../billing/subscriptions/types.js";
import { isUnavailable } from "../db/errors.js";
import type { Logger } from "../log.js";
import { traceOf } from "../ops/trace.js";
import { formBodyOf } from "./form-body.js";

export type Req = IncomingMessage | Http2ServerRequest;
export type Res = ServerResponse | Http2ServerResponse;

export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#111}
h1{font-size:1.5rem}table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.4rem;border-bottom:1px solid #ddd}
td.n,th.n{text-align:right}.total td{font-weight:bold;border-top:2px solid #111}label{display:block;font-weight:600;margin:.5rem 0 .25rem}
input{font-size:1.1rem;padding:.5rem;width:100%;box-sizing:border-box}button{font-size:1.1rem;padding:.6rem 1.2rem;margin-top:1rem}
.error{color:#a00;background:#fee;border:1px solid #a00;padding:.5rem;border-radius:4px}.muted{color:#555;font-size:.9rem}
td,th{overflow-wrap:break-word}td:first-child{overflow-wrap:anywhere}.nowrap{white-space:nowrap}.notice{background:#efe;border:1px solid #070;padding:.5rem;border-radius:4px}
.box{border:1px solid #ccc;border-radius:6px;padding:0 1rem;margin:1rem 0}h2{font-size:1.2rem;margin-top:2rem}h3{font-size:1.05rem;margin-bottom:.25rem}
a.button{display:inline-block;padding:.45rem 1rem;border:1px solid #111;border-radius:4px;color:#111;text-decoration:none;margin:.25rem 0}
.over{color:#a00;font-weight:600}@media (max-width:30rem){th,td{padding:.35rem .25rem}.box{padding:0 .75rem}}
@media print{.noprint{display:none}body{margin:0}a{color:#111;text-decoration:none}}`;

/** The one inline script any page has: the hosted invoice's Print button (allowed by its hash, nothing else runs). */
const PRINT_SCRIPT = "window.print()";

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
const PRINT_HASH = `sha256-${createHash("sha256").update(PRINT_SCRIPT).digest("base64")}`;

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
export function page(res: Res, status: number, title: string, body: string, formTargets: readonly string[] = []): void {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${esc(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`;
  res.writeHead(status, pageHeaders(formTargets));
  res.end(html);
}

/** Where a checkout's forms may end up: this service and the application's callbacks (their 303s). */
function callbackOrigins(s: CheckoutSession): string[] {
  return [...new Set([originOf(s.successUrl), originOf(s.cancelledUrl)].filter((o): o is string => o !== undefined))];
}

/**
 * Cancelling is a POST (a button), never a GET: links are prefetched and followed by scanners,
 * and a GET must change nothing.
 */
function cancelForm(token: string): string {
  return `<form method="post" action="/hosted/checkout/${esc(token)}/cancel"><button type="submit">Cancel and go back</button></form>`;
}

/**
 * The checkout form. `provider` is the environment's payment provider: its card hint (the test
 * cards, in a test environment) is shown under the field. Without one (a live environment, no
 * processor configured) there is no card field at all: the page says why, and offers only cancel.
 */
function checkoutPage(res: Res, status: number, s: CheckoutSession, token: string, provider: PaymentProvider | undefined, error?: string): void {
  const hint = provider?.cardHint;
  const form = provider
    ? `<form method="post" action="/hosted/checkout/${esc(token)}">
<label for="card_number">Card number</label>
<input id="card_number" name="card_number" inputmode="numeric" autocomplete="cc-number" required${hint ? ' aria-describedby="cards"' : ""}${error ? ' aria-invalid="true"' : ""}>
${hint ? `<p class="muted" id="cards">${esc(hint)}</p>` : ""}
<button type="submit">Pay and subscribe</button>
</form>`
    : "";
  page(
    res,
    status,
    s.description,
    `<main><h1>${esc(s.description)}</h1>
<p>Due today: <strong>${esc(displayMoney(s.amountDue, s.currency))}</strong></p>
${error ? `<p class="error" role="alert" id="error">${esc(error)}</p>` : ""}
${form}
${cancelForm(token)}</main>`,
    callbackOrigins(s),
  );
}

/** GET on the cancel address: asks to confirm (a prefetch or a scanner changes nothing). */
function cancelConfirmPage(res: Res, s: CheckoutSession, token: string): void {
  page(
    res,
    200,
    `Cancel: ${s.description}`,
    `<main><h1>Cancel this checkout?</h1>
<p>${esc(s.description)}: nothing has been charged. Cancelling takes you back to the application.</p>
${cancelForm(token)}
<p><a href="/hosted/checkout/${esc(token)}">Return to the checkout</a></p></main>`,
    callbackOrigins(s),
  );
}

/**
 * Sends the browser on with a 303. The stored URL was normalized when the checkout was made;
 * it is serialized again here (older rows), and should even that fail, the customer gets a page
 * with a link instead of an error — this runs after the card was charged.
 */
function redirect(res: Res, url: string, title: string): void {
  const location = normalizeCallbackUrl(url);
  if (location !== undefined) {
    res.writeHead(303, { location });
    res.end();
    return;
  }
  page(res, 200, title, `<main><h1>${esc(title)}</h1><p><a href="${esc(url)}">Continue to the application</a></p></main>`);
}

export function notAllowed(res: Res): void {
  res.setHeader("allow", "GET, POST");
  page(res, 405, "Not allowed", "<main><h1>Method not allowed</h1></main>");
}

function gonePage(res: Res): void {
  page(res, 410, "Checkout unavailable", "<main><h1>This checkout is no longer available</h1><p>It was completed, cancelled or has expired. Start again from the application.</p></main>");
}

export function invoiceHtml(inv: Invoice): string {
  const m = (v: string) => esc(displayMoney(v, inv.currency));
  const rows = inv.lines.map((l) => `<tr><td>${esc(l.description)}</td><td class="n">${esc(l.quantity)}</td><td class="n">${m(l.unitAmount)}</td><td class="n">${m(l.amount)}</td></tr>`).join("");
  return `<main><h1>Invoice ${esc(inv.id)}</h1>
<p>Status: <strong>${esc(inv.status)}</strong> · Issued ${esc(inv.createdAt.toISOString().slice(0, 10))} · Period ${esc(inv.periodStart.toISOString().slice(0, 10))} – ${esc(inv.periodEnd.toISOString().slice(0, 10))}</p>${
    inv.status === "draft" && inv.finalizesAt
      ? `\n<p class="draft">Draft: usage that still arrives for this period is added until it is finalized, ${esc(inv.finalizesAt.toISOString().replace(".000Z", "Z"))}. Amounts may change until then.</p>`
      : ""
  }
<table><thead><tr><th>Description</th><th class="n">Quantity</th><th class="n">Unit price</th><th class="n">Amount</th></tr></thead>
<tbody>${rows || '<tr><td colspan="4">No charges</td></tr>'}</tbody>
<tfoot><tr class="total"><td colspan="3">Total</td><td class="n">${m(inv.total)}</td></tr></tfoot></table>
<p class="noprint"><button type="button" onclick="${PRINT_SCRIPT}">Print</button></p></main>`;
}

/**
 * A POSTed form (application/x-www-form-urlencoded), as the server read it before the page was
 * called (rest/form-body.ts: bounded, with its own deadline, before admission); empty when there
 * was none (the form's CSRF check then refuses it).
 */
export async function readForm(req: Req): Promise<URLSearchParams> {
  return new URLSearchParams((formBodyOf(req) ?? "").toString("utf8"));
}

/** Handles the page routes; returns false for any other path. */
export function createPages(subs: HostedCheckout, invoices: Invoices, log: Logger) {
  const handle = async (req: Req, res: Res, path: string): Promise<void> => {
    let m = /^\/hosted\/invoices\/([0-9A-Za-z]{16,64})$/.exec(path);
    if (m) {
      if (req.method !== "GET") return notAllowed(res);
      const inv = await invoices.invoiceByToken(m[1] as string);
      if (!inv) return page(res, 404, "Not found", "<main><h1>Invoice not found</h1></main>");
      return page(res, 200, `Invoice ${inv.id}`, invoiceHtml(inv));
    }
    m = /^\/hosted\/checkout\/([0-9A-Za-z]{16,64})(\/cancel)?$/.exec(path);
    if (!m) return page(res, 404, "Not found", "<main><h1>Not found</h1></main>");
    const token = m[1] as string;
    let view: Awaited<ReturnType<HostedCheckout["checkout"]>>;
    try {
      view = await subs.checkout(token);
    } catch (err) {
      if (err instanceof NotFoundError) return page(res, 404, "Not found", "<main><h1>Checkout not found</h1></main>");
      throw err;
    }
    if (req.method !== "GET" && req.method !== "POST") return notAllowed(res);
    if (m[2]) {
      // GET asks to confirm; only the POST of its button cancels.
      if (req.method === "GET") return view.usable ? cancelConfirmPage(res, view.session, token) : gonePage(res);
      return redirect(res, await subs.cancelCheckout(token), "Checkout cancelled");
    }
    if (!view.usable) return gonePage(res);
    // No payment provider (a live environment): 409, no card field, no test-card hints.
    if (!view.provider) return checkoutPage(res, 409, view.session, token, undefined, NO_PROVIDER_PAGE_MESSAGE);
    if (req.method === "GET") return checkoutPage(res, 200, view.session, token, view.provider);
    const form = await readForm(req);
    const result = await subs.completeCheckout(token, form.get("card_number") ?? "");
    if (result.ok) return redirect(res, result.redirect, "Payment complete");
    if (result.gone) return gonePage(res);
    if (result.noProvider) return checkoutPage(res, 409, view.session, token, undefined, result.message);
    return checkoutPage(res, 402, view.session, token, view.provider, result.message);
  };
  return servePages("/hosted/", handle, log);
}

/**
 * The page routes under `prefix`: `handle` answers them (the path without the query); returns
 * false for any other path. A page that fails answers 503 when the database cannot be reached
 * (it works again once it is back), else 500, and is logged.
 */
export function servePages(prefix: string, handle: (req: Req, res: Res, path: string) => Promise<void>, log: Logger) {
  return (req: Req, res: Res): boolean => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (!path.startsWith(prefix)) return false;
    handle(req, res, path).catch((err) => {
      log.error("page failed", { path, request_id: traceOf(res)?.id, err });
      // An unreachable database is 503 (the page works again once it is back), anything else 500.
      if (!res.headersSent) page(res, isUnavailable(err) ? 503 : 500, "Error", "<main><h1>Something went wrong</h1><p>Try again in a moment.</p></main>");
      else res.end();
    });
    return true;
  };
}
