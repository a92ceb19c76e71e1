/**
 * The hosted pages reached through unguessable tokens, without an API key: the checkout (a plain
 * HTML form that works without JavaScript) and the invoice (invoice.ts). The customer portal is
 * portal.ts, on the same shell.
 *
 *   GET  /hosted/invoices/{token}             the invoice
 *   GET  /hosted/invoices/{token}/pdf         its PDF (pdf/routes.ts; ?paper=a4|letter)
 *   POST /hosted/invoices/{token}/pay         completes a charge waiting for the customer (invoice-pay.ts)
 *   GET  /hosted/checkout/{token}             the checkout form (POST: pays); once completed with its
 *                                             charge waiting (the provider unreachable) or refused
 *                                             by the provider, a page saying so
 *   GET  /hosted/checkout/{token}/cancel      asks to confirm (POST: cancels, back to the application)
 */
import { NotFoundError } from "../../billing/errors.js";
import { displayMoney } from "../../billing/money.js";
import { NO_PROVIDER_PAGE_MESSAGE, normalizeCallbackUrl } from "../../billing/subscriptions/checkout.js";
import type { CheckoutPreviews } from "../../billing/subscriptions/checkout-preview.js";
import type { HostedCheckout, WaitingCharge } from "../../billing/subscriptions/hosted-checkout.js";
import type { Invoices } from "../../billing/subscriptions/invoices.js";
import { type CheckoutSession, type PaymentProvider, amountDueOf } from "../../billing/subscriptions/types.js";
import type { Logger } from "../../log.js";
import { type Html, html } from "../html.js";
import { type Req, type Res, STRIPE_CHECKOUT_ORIGIN, messagePage, notAllowed, originOf, page, readForm, servePages } from "../shell.js";
import { invoiceTitle } from "../pdf/invoice-pdf.js";
import { sendInvoicePdf } from "../pdf/routes.js";
import { dueTodayHtml } from "./checkout-summary.js";
import { invoiceHtml } from "./invoice.js";
import { type InvoicePayments, invoicePay } from "./invoice-pay.js";

/** Where a checkout's forms may end up: this service and the application's callbacks (their 303s). */
function callbackOrigins(s: CheckoutSession): string[] {
  return [...new Set([originOf(s.successUrl), originOf(s.cancelledUrl)].filter((o): o is string => o !== undefined))];
}

/**
 * Cancelling is a POST (a button), never a GET: links are prefetched and followed by scanners,
 * and a GET must change nothing.
 */
function cancelForm(token: string): Html {
  return html`<form method="post" action="/hosted/checkout/${token}/cancel"><button type="submit">Cancel and go back</button></form>`;
}

/**
 * The checkout form. `provider` is the environment's payment provider: its card hint (the test
 * cards, in a test environment) is shown under the field. Without one (a live environment, no
 * processor configured) there is no card field at all: the page says why, and offers only cancel.
 * `due`: what completing it charges, worked out now (checkout-summary.ts).
 */
function checkoutPage(res: Res, status: number, s: CheckoutSession, token: string, provider: PaymentProvider | undefined, error?: string, due?: Html): void {
  const hint = provider?.cardHint;
  // A provider with its own card page (Stripe Checkout, DESIGN §16): a button that leads there.
  const form = provider?.startCardSetup
    ? html`<form method="post" action="/hosted/checkout/${token}"><button type="submit">Continue to card entry</button></form>`
    : provider
      ? html`<form method="post" action="/hosted/checkout/${token}">
<label for="card_number">Card number</label>
<input id="card_number" name="card_number" inputmode="numeric" autocomplete="cc-number" required${hint ? html` aria-describedby="cards"` : ""}${error ? html` aria-invalid="true"` : ""}>
${hint ? html`<p class="muted" id="cards">${hint}</p>` : ""}
<button type="submit">Pay and subscribe</button>
</form>`
      : "";
  const body = html`<main><h1>${s.description}</h1>
${due ?? dueTodayHtml(s, undefined)}
${error ? html`<p class="error" role="alert" id="error">${error}</p>` : ""}
${form}
${cancelForm(token)}</main>`;
  page(res, status, s.description, body, provider?.kind === "stripe" ? [...callbackOrigins(s), STRIPE_CHECKOUT_ORIGIN] : callbackOrigins(s));
}

/** GET on the cancel address: asks to confirm (a prefetch or a scanner changes nothing). */
function cancelConfirmPage(res: Res, s: CheckoutSession, token: string): void {
  const body = html`<main><h1>Cancel this checkout?</h1>
<p>${s.description}: nothing has been charged. Cancelling takes you back to the application.</p>
${cancelForm(token)}
<p><a href="/hosted/checkout/${token}">Return to the checkout</a></p></main>`;
  page(res, 200, `Cancel: ${s.description}`, body, callbackOrigins(s));
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
  messagePage(res, 200, title, title, html`<a href="${url}">Continue to the application</a>`);
}

/**
 * A completed checkout whose charge could not be made (the provider unreachable; DESIGN §16): the
 * card is saved and what it was for stands, the payment is retried by dunning; the invoice's
 * hosted page shows when it is paid. 200: the customer's action succeeded. A reload shows the same.
 */
function processingPage(res: Res, s: CheckoutSession, waiting: WaitingCharge): void {
  const { invoice, card } = waiting;
  const saved = card ? html`Your card ending ${card.last4} is saved.` : html`Your card is saved.`;
  const what = s.kind === "credit" ? html`The credit is added to your balance once the payment goes through.` : html`${s.description}: confirmed, nothing more is needed from you.`;
  const body = html`<main><h1>Payment processing</h1>
<p role="status">${saved} ${what}</p>
<p>We could not reach the payment processor to charge <strong>${displayMoney(amountDueOf(invoice), invoice.currency)}</strong> just now. The payment is being processed and will be retried automatically: you do not need to pay again.</p>
<p><a href="/hosted/invoices/${invoice.hostedToken}">View the invoice</a>, which shows when it is paid.</p>
<p><a href="${s.successUrl}">Continue to the application</a></p></main>`;
  page(res, 200, "Payment processing", body, callbackOrigins(s));
}

/**
 * A completed checkout whose charge the payment provider refused for good (its credentials or
 * account, not the card; DESIGN §16): an error, never "processing". Nothing was charged; a credit
 * purchase ended (its invoice void), anything else keeps its invoice open on dunning's schedule,
 * each retry a counted attempt. 402: the payment was not made. A reload shows the same.
 */
function refusedPage(res: Res, s: CheckoutSession, { invoice }: WaitingCharge): void {
  const what =
    s.kind === "credit"
      ? html`The credit purchase was cancelled: no credit was added and nothing is owed.`
      : html`${s.description}: your card is saved; the invoice stays open and the payment will be tried again.`;
  const body = html`<main><h1>Payment not completed</h1>
<p class="error" role="alert">The payment processor refused this payment (a problem with the merchant's payment account, not your card), so nothing was charged.</p>
<p>${what}</p>
<p><a href="/hosted/invoices/${invoice.hostedToken}">View the invoice</a></p>
<p><a href="${s.kind === "credit" ? s.cancelledUrl : s.successUrl}">Continue to the application</a></p></main>`;
  page(res, 402, "Payment not completed", body, callbackOrigins(s));
}

function gonePage(res: Res): void {
  messagePage(res, 410, "Checkout unavailable", "This checkout is no longer available", "It was completed, cancelled or has expired. Start again from the application.");
}

/** GET or POST on a checkout (`cancel`: its cancel address). */
async function checkout(req: Req, res: Res, subs: HostedCheckout, token: string, cancel: boolean, previews?: CheckoutPreviews): Promise<void> {
  let view: Awaited<ReturnType<HostedCheckout["checkout"]>>;
  try {
    view = await subs.checkout(token);
  } catch (err) {
    if (err instanceof NotFoundError) return messagePage(res, 404, "Not found", "Checkout not found");
    throw err;
  }
  if (req.method !== "GET" && req.method !== "POST") return notAllowed(res);
  if (cancel) {
    // GET asks to confirm; only the POST of its button cancels.
    if (req.method === "GET") return view.usable ? cancelConfirmPage(res, view.session, token) : gonePage(res);
    // Only an open checkout is cancelled: one completed (in another tab) lands where a completed one does; cancelled or expired, gone.
    const cancelled = await subs.cancelCheckout(token);
    return "gone" in cancelled ? gonePage(res) : redirect(res, cancelled.redirect, view.session.status === "completed" ? "Payment complete" : "Checkout cancelled");
  }
  if (!view.usable) {
    // Completed, its charge waiting for the provider (or refused by it): the page that says so, on every reload (a GET, or the form sent again).
    const waiting = await subs.waitingCharge(view.session);
    if (waiting?.refused) return refusedPage(res, view.session, waiting);
    return waiting ? processingPage(res, view.session, waiting) : gonePage(res);
  }
  // "Due today" is what completing it would charge now (checkout-preview.ts), worked out for the page shown (one that can take a payment).
  const show = async (status: number, provider: PaymentProvider | undefined, error?: string) =>
    checkoutPage(res, status, view.session, token, provider, error, dueTodayHtml(view.session, provider ? await previews?.preview(view.session) : undefined));
  // No payment provider (a live environment): 409, no card field, no test-card hints.
  if (!view.provider) return show(409, undefined, NO_PROVIDER_PAGE_MESSAGE);
  if (req.method === "GET") return show(200, view.provider);
  // A provider with its own card page: the customer is sent there; its webhook or return completes the checkout.
  const setup = view.provider.startCardSetup ? await subs.startCardSetup(token) : undefined;
  if (setup?.ok) return redirect(res, setup.redirect, "Continue to card entry");
  const form = await readForm(req);
  const result = setup ?? (await subs.completeCheckout(token, form.get("card_number") ?? ""));
  // A credit purchase that ended unpaid (declined, voided meanwhile) sends the customer to the cancelled URL.
  // Completed with its charge waiting (the provider unreachable) or refused by it: the checkout's own page says so (processingPage, refusedPage).
  if (result.ok) return redirect(res, result.redirect, "cancelled" in result ? "Payment not completed" : "pending" in result ? "Payment status" : "Payment complete");
  if (result.gone) return gonePage(res);
  if (result.noProvider) return show(409, undefined, result.message);
  return show(402, view.provider, result.message);
}

/** Handles the hosted checkout and invoice routes; returns false for any other path. */
export function createPages(subs: HostedCheckout, invoices: Invoices, log: Logger, dunning?: InvoicePayments, previews?: CheckoutPreviews) {
  const handle = async (req: Req, res: Res, path: string): Promise<void> => {
    const inv = /^\/hosted\/invoices\/([0-9A-Za-z]{16,64})(\/pdf|\/pay)?$/.exec(path);
    if (inv) {
      if (req.method !== "GET" && !(req.method === "POST" && inv[2] === "/pay")) return notAllowed(res);
      const found = await invoices.invoiceByToken(inv[1] as string);
      if (!found) return messagePage(res, 404, "Not found", "Invoice not found");
      if (inv[2] === "/pay") return invoicePay(req, res, found, dunning);
      if (inv[2]) {
        if (found.status === "draft") return messagePage(res, 400, "No PDF yet", "This invoice is a draft", "Its PDF exists once it is finalized.");
        return sendInvoicePdf(res, found, new URL(req.url ?? "/", "http://localhost"));
      }
      const pending = await dunning?.pendingAction(found);
      // Stripe's pay link: the form's POST answers a 303 to Stripe Checkout (form-action covers the redirect).
      return page(res, 200, `Invoice ${invoiceTitle(found)}`, invoiceHtml(found, pending), pending?.providerPage === "stripe" ? [STRIPE_CHECKOUT_ORIGIN] : []);
    }
    const m = /^\/hosted\/checkout\/([0-9A-Za-z]{16,64})(\/cancel)?$/.exec(path);
    if (!m) return messagePage(res, 404, "Not found", "Not found");
    return checkout(req, res, subs, m[1] as string, m[2] !== undefined, previews);
  };
  return servePages("/hosted/", handle, log);
}
