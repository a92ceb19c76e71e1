/** Subscriptions, invoices, billing state and test clocks: wire ⇄ domain. */
import type { BookedDiscount, BookedTax } from "../../billing/invoicing/booking.js";
import { formatDecimal } from "../../billing/money.js";
import { carriedInOf } from "../../billing/payments/carries.js";
import type { CallbackUrls } from "../../billing/subscriptions/checkout.js";
import type { StoredTestClock } from "../../billing/subscriptions/ports.js";
import { type Invoice, type Subscription, amountDueOf, shownCommitment } from "../../billing/subscriptions/types.js";
import { BillingDetailsSchema, SellerDetailsSchema } from "../../gen/billing/v1/billing_details_pb.js";
import { type Invoice as InvoicePb, InvoiceSchema } from "../../gen/billing/v1/invoice_pb.js";
import { BillingFailureSchema, type CheckoutCallbackUrls, type Subscription as SubscriptionPb, SubscriptionSchema } from "../../gen/billing/v1/subscription_pb.js";
import { type TestClock as TestClockPb, TestClockSchema } from "../../gen/billing/v1/test_clock_pb.js";
import { amount, toPb, ts } from "./common.js";

export function subscriptionToPb(s: Subscription): SubscriptionPb {
  const active = s.status === "active";
  const commitment = shownCommitment(s);
  return toPb(SubscriptionSchema, {
    ...s,
    currentPeriod: active ? { start: ts(s.periodStart), end: ts(s.periodEnd), inclusiveStart: true, inclusiveEnd: false } : undefined,
    cyclesNextAt: active ? s.periodEnd : s.status === "paused" ? s.resumesAt : undefined,
    // When it started: a resume moves the cycles' anchor, never this.
    effectiveAt: s.createdAt,
    ratePriceMultipliers: s.rateMultipliers,
    billingFailure: s.billingFailure && toPb(BillingFailureSchema, s.billingFailure),
    // The newest asked for (see shownCommitment), or none.
    minimumCommitment: commitment !== null && s.commitment ? amount(s.commitment.currency, commitment) : undefined,
  });
}

export function callbacksOf(c: CheckoutCallbackUrls | undefined): CallbackUrls | undefined {
  return c ? { successUrl: c.successUrl, cancelledUrl: c.cancelledUrl } : undefined;
}

export function invoiceToPb(i: Invoice, hostedUrl: string): InvoicePb {
  const money = (value: string) => amount(i.currency, value);
  const discountToPb = (d: BookedDiscount) => ({ ...d, amount: money(d.amount) });
  const taxToPb = (t: BookedTax) => ({ ...t, taxableAmount: money(t.taxableAmount), amount: money(t.amount) });
  // The PDF is GET /invoices/{id}/pdf on the server whose hosted page is `hostedUrl` (`<base>/hosted/invoices/<token>`).
  const base = hostedUrl.lastIndexOf("/hosted/invoices/");
  return toPb(InvoiceSchema, {
    ...i,
    hostedUrl,
    totalAmount: money(i.total),
    // DESIGN §14: the grants spent on it (on a draft: what would be spent now), and what is charged.
    creditsApplied: i.creditsApplied?.map((a) => ({ creditGrantId: a.grantId, amount: money(a.amount) })),
    amountDue: money(amountDueOf(i)),
    lineItems: i.lines.map((l) => ({
      ...l,
      priceInUnitAmount: money(l.unitAmount),
      amount: money(l.amount),
      discountAmounts: l.discountAmounts?.map(discountToPb),
      taxAmounts: l.taxAmounts?.map(taxToPb),
    })),
    finalizesAt: i.status === "draft" ? i.finalizesAt : undefined,
    usagePeriodStart: i.window?.from,
    usagePeriodEnd: i.window?.to,
    // DESIGN §15: the number and the booked totals; what it prints about buyer and seller.
    subtotal: money(i.subtotal ?? i.total),
    totalDiscount: money(i.totalDiscount ?? "0"),
    totalTax: money(i.totalTax ?? "0"),
    discounts: i.discounts?.map(discountToPb),
    taxAmounts: i.taxAmounts?.map(taxToPb),
    customer: i.customer && toPb(BillingDetailsSchema, i.customer),
    seller: i.seller && toPb(SellerDetailsSchema, i.seller),
    amountCredited: money(i.amountCredited ?? "0"),
    pdfUrl: i.status === "draft" ? "" : `${base >= 0 ? hostedUrl.slice(0, base) : ""}/invoices/${i.id}/pdf`,
    // DESIGN §16: only an open invoice is charged again (an ended one's retry time is its payment's cancel, payments/cancels.ts);
    // a processing bank debit's is its look-up at the provider (payments/processing.ts), no charge.
    nextPaymentAttempt: i.status === "open" && !i.payment?.processing ? i.nextPaymentAttempt : undefined,
    // DESIGN §16: a charge waiting for the customer: its hosted page's pay link.
    paymentUrl: i.status === "open" && i.payment?.actionRequired ? `${hostedUrl}#pay` : undefined,
    // DESIGN §16: below the provider's minimum charge, carried to the next invoice (payments/carries.ts).
    amountCarried: money(i.payment?.carried ?? "0"),
    // Earlier invoices' amounts carried in: outside the total, in the amount due (payments/carries.ts).
    amountCarriedIn: money(formatDecimal(carriedInOf(i))),
  });
}

export const clockToPb = (c: StoredTestClock): TestClockPb => toPb(TestClockSchema, c);
