/**
 * The hosted invoice's pay form (DESIGN §16), reached through the invoice's unguessable token
 * like the page itself: POST /hosted/invoices/{token}/pay completes a charge that waited for the
 * customer (authentication) — the test provider simulates it; the invoice is paid (`invoice.paid`)
 * and the browser goes back to the invoice (303). A GET of the address shows the invoice's form.
 * A provider with a page for the payment (Stripe) is reached through the form: a 303 to its page
 * (Stripe Checkout in payment mode), which sends the customer back to the invoice.
 */
import type { Dunning } from "../../billing/payments/attempts.js";
import type { Invoice } from "../../billing/subscriptions/types.js";
import { invoiceTitle } from "../pdf/invoice-pdf.js";
import { type Req, type Res, page } from "../shell.js";
import { invoiceHtml } from "./invoice.js";

/** What the hosted invoice needs of dunning. */
export type InvoicePayments = Pick<Dunning, "pendingAction" | "completeAction" | "startPayment">;

function back(res: Res, inv: Invoice): void {
  res.writeHead(303, { location: `/hosted/invoices/${inv.hostedToken}` });
  res.end();
}

export async function invoicePay(req: Req, res: Res, inv: Invoice, dunning: InvoicePayments | undefined): Promise<void> {
  const pending = await dunning?.pendingAction(inv);
  if (req.method === "GET" || !dunning) {
    res.writeHead(303, { location: `/hosted/invoices/${inv.hostedToken}#pay` });
    res.end();
    return;
  }
  // Nothing waits (paid meanwhile, or a repeat of the form): the invoice says how it stands.
  if (!pending) return back(res, inv);
  if (!pending.confirmHere) return page(res, 409, `Invoice ${invoiceTitle(inv)}`, invoiceHtml(inv, { ...pending, error: "Complete this payment on the payment provider's page." }));
  // A provider with a page for it (Stripe Checkout): the customer pays there, then comes back here.
  const onPage = await dunning.startPayment(inv, `/hosted/invoices/${inv.hostedToken}`);
  if (onPage) {
    res.writeHead(303, { location: onPage.url, "cache-control": "no-store" });
    res.end();
    return;
  }
  const done = await dunning.completeAction(inv);
  if (!done || done.decision.status === "paid") return back(res, inv);
  const after = done.invoice;
  return page(res, 402, `Invoice ${invoiceTitle(after)}`, invoiceHtml(after, { confirmHere: false, actionUrl: null, error: done.decision.payment.lastError ?? "The payment could not be completed." }));
}
