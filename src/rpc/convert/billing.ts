/** Subscriptions, invoices, billing state and test clocks: wire ⇄ domain. */
import { create } from "@bufbuild/protobuf";
import type { CallbackUrls } from "../../billing/subscriptions/checkout.js";
import type { StoredTestClock } from "../../billing/subscriptions/ports.js";
import { type Invoice, type Subscription, amountDueOf, shownCommitment } from "../../billing/subscriptions/types.js";
import { type Invoice as InvoicePb, InvoiceSchema } from "../../gen/billing/v1/invoice_pb.js";
import { type Subscription as SubscriptionPb, SubscriptionSchema, type CheckoutCallbackUrls } from "../../gen/billing/v1/subscription_pb.js";
import { type TestClock as TestClockPb, TestClockSchema } from "../../gen/billing/v1/test_clock_pb.js";
import { ts } from "./common.js";
import type { BookedDiscount, BookedTax } from "../../billing/invoicing/booking.js";
import type { Address, BillingDetails, SellerDetails } from "../../billing/taxes/types.js";
import {
  type Address as AddressPb,
  AddressSchema,
  type BillingDetails as BillingDetailsPb,
  BillingDetailsSchema,
  type SellerDetails as SellerDetailsPb,
  SellerDetailsSchema,
} from "../../gen/billing/v1/billing_details_pb.js";

export function subscriptionToPb(s: Subscription): SubscriptionPb {
  const active = s.status === "active";
  return create(SubscriptionSchema, {
    id: s.id,
    subjectId: s.subjectId,
    rateCardId: s.rateCardId,
    status: s.status,
    cancelsAtEndOfCycle: s.cancelsAtEndOfCycle,
    currentPeriod: active ? { start: ts(s.periodStart), end: ts(s.periodEnd), inclusiveStart: true, inclusiveEnd: false } : undefined,
    cyclesNextAt: active ? ts(s.periodEnd) : s.status === "paused" && s.resumesAt ? ts(s.resumesAt) : undefined,
    // When it started: a resume moves the cycles' anchor, never this.
    effectiveAt: ts(s.createdAt),
    fixedRateQuantities: s.fixedRateQuantities,
    ratePriceMultipliers: s.rateMultipliers,
    metadata: s.metadata,
    billingFailure: s.billingFailure
      ? { message: s.billingFailure.message, attempts: s.billingFailure.attempts, failedAt: ts(s.billingFailure.failedAt), retryAt: ts(s.billingFailure.retryAt) }
      : undefined,
    pausedAt: s.pausedAt ? ts(s.pausedAt) : undefined,
    resumesAt: s.resumesAt ? ts(s.resumesAt) : undefined,
    minimumCommitment: commitmentOf(s),
  });
}

/** The minimum commitment a subscription shows (the newest asked for; see shownCommitment), or none. */
function commitmentOf(s: Subscription): { currencyCode: string; value: string } | undefined {
  const value = shownCommitment(s);
  return value !== null && s.commitment ? { currencyCode: s.commitment.currency, value } : undefined;
}

export function callbacksOf(c: CheckoutCallbackUrls | undefined): CallbackUrls | undefined {
  return c ? { successUrl: c.successUrl, cancelledUrl: c.cancelledUrl } : undefined;
}

export function invoiceToPb(i: Invoice, hostedUrl: string): InvoicePb {
  const money = (value: string) => ({ currencyCode: i.currency, value });
  return create(InvoiceSchema, {
    id: i.id,
    subjectId: i.subjectId,
    createdAt: ts(i.createdAt),
    status: i.status,
    hostedUrl,
    totalAmount: money(i.total),
    // DESIGN §14: the grants spent on it (on a draft: what would be spent now), and what is charged.
    creditsApplied: (i.creditsApplied ?? []).map((a) => ({ creditGrantId: a.grantId, amount: money(a.amount) })),
    amountDue: money(amountDueOf(i)),
    lineItems: i.lines.map((l) => ({
      description: l.description,
      quantity: l.quantity,
      priceInUnitAmount: money(l.unitAmount),
      amount: money(l.amount),
      kind: l.kind,
      discountAmounts: (l.discountAmounts ?? []).map(discountToPb),
      taxAmounts: (l.taxAmounts ?? []).map(taxToPb),
    })),
    subscriptionId: i.subscriptionId,
    finalizesAt: i.status === "draft" && i.finalizesAt ? ts(i.finalizesAt) : undefined,
    finalizedAt: i.finalizedAt ? ts(i.finalizedAt) : undefined,
    periodStart: ts(i.periodStart),
    periodEnd: ts(i.periodEnd),
    usagePeriodStart: i.window ? ts(i.window.from) : undefined,
    usagePeriodEnd: i.window ? ts(i.window.to) : undefined,
    // DESIGN §15: the number and the booked totals; what it prints about buyer and seller.
    number: i.number ?? "",
    subtotal: money(i.subtotal ?? i.total),
    totalDiscount: money(i.totalDiscount ?? "0"),
    totalTax: money(i.totalTax ?? "0"),
    discounts: (i.discounts ?? []).map(discountToPb),
    taxAmounts: (i.taxAmounts ?? []).map(taxToPb),
    notes: i.notes ?? [],
    customer: i.customer ? billingDetailsToPb(i.customer) : undefined,
    customerName: i.customerName ?? undefined,
    seller: i.seller ? sellerToPb(i.seller) : undefined,
    amountCredited: money(i.amountCredited ?? "0"),
    pdfUrl: i.status === "draft" ? "" : pdfUrlOf(hostedUrl, i.id),
    // DESIGN §16: dunning's attempts and next retry; a charge waiting for the customer: its hosted page's pay link.
    attemptCount: i.attemptCount ?? 0,
    nextPaymentAttempt: i.nextPaymentAttempt ? ts(i.nextPaymentAttempt) : undefined,
    paymentUrl: i.status === "open" && i.payment?.actionRequired ? `${hostedUrl}#pay` : undefined,
  });

  function discountToPb(d: BookedDiscount) {
    return { discountId: d.discountId, couponId: d.couponId, name: d.name, amount: money(d.amount) };
  }
  function taxToPb(t: BookedTax) {
    return { taxRateId: t.taxRateId, displayName: t.displayName, percentage: t.percentage, inclusive: t.inclusive, taxableAmount: money(t.taxableAmount), amount: money(t.amount) };
  }
}

/** GET /invoices/{id}/pdf on the server whose hosted page is `hostedUrl` (`<base>/hosted/invoices/<token>`). */
function pdfUrlOf(hostedUrl: string, id: string): string {
  const at = hostedUrl.lastIndexOf("/hosted/invoices/");
  return `${at >= 0 ? hostedUrl.slice(0, at) : ""}/invoices/${id}/pdf`;
}

export function addressToPb(a: Address): AddressPb {
  return create(AddressSchema, {
    line1: a.line1 ?? undefined,
    line2: a.line2 ?? undefined,
    city: a.city ?? undefined,
    postalCode: a.postalCode ?? undefined,
    state: a.state ?? undefined,
    country: a.country,
  });
}

export function billingDetailsToPb(d: BillingDetails): BillingDetailsPb {
  return create(BillingDetailsSchema, {
    legalName: d.legalName ?? undefined,
    email: d.email ?? undefined,
    address: d.address ? addressToPb(d.address) : undefined,
    taxIds: d.taxIds.map((t) => ({ type: t.type, value: t.value })),
    taxExempt: d.taxExempt,
    taxRateIds: d.taxRateIds,
  });
}

export function sellerToPb(s: SellerDetails): SellerDetailsPb {
  return create(SellerDetailsSchema, {
    legalName: s.legalName ?? undefined,
    address: s.address ? addressToPb(s.address) : undefined,
    taxId: s.taxId ?? undefined,
    email: s.email ?? undefined,
    footer: s.footer ?? undefined,
  });
}

export function clockToPb(c: StoredTestClock): TestClockPb {
  return create(TestClockSchema, { id: c.id, name: c.name, frozenTime: ts(c.frozenTime), createdAt: ts(c.createdAt), status: c.status });
}
