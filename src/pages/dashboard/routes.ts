/**
 * The signed-in dashboard's routes (sign-in, switch and sign-out are session.ts's):
 *
 *   GET  /dashboard                            overview
 *   GET  /dashboard/subjects[?q=]              subjects, searched
 *   GET  /dashboard/subjects/{id}              a subject: billing state, credit, subscriptions, invoices, usage charts
 *   POST /dashboard/subjects/{id}/credit-grants                grants promotional credit (amount, currency, expires_at?, priority?)
 *   POST /dashboard/subjects/{id}/credit-grants/{grant}/void   voids what is left of a grant
 *   GET  /dashboard/subscriptions[?status=&rate_card_id=]
 *   GET  /dashboard/subscriptions/{id}         with the cancel forms
 *   POST /dashboard/subscriptions/{id}/cancel  when=now | end_of_cycle
 *   GET  /dashboard/subscriptions/{id}/change?rate_card_id=&behavior=   the proration preview (changes nothing)
 *   POST /dashboard/subscriptions/{id}/change  the change, through the API's change-rate-card use case
 *   GET  /dashboard/invoices[?status=]
 *   GET  /dashboard/invoices/{id}              with finalize (draft), void (open) and the hosted page's link
 *   POST /dashboard/invoices/{id}/finalize | /void
 *   GET  /dashboard/invoice-settings           the number prefix, the next number, the seller; POST changes them (linked from the invoices page)
 *   GET  /dashboard/events[?show=rejected]     the newest stored usage events, or the newest rejected ones with their reasons
 *   GET  /dashboard/webhooks/{id}[?status=]    a webhook endpoint and its deliveries (linked from the overview's endpoints needing attention)
 *   GET  /dashboard/catalog                    rate cards with their rates and prices; pricing metrics
 *   GET  /dashboard/clocks, /dashboard/clocks/{id}; POST /dashboard/clocks/{id}/advance
 */
import { advanceClock, cancelSubscription, changeRateCard, finalizeOrVoid, grantCredit, voidCredit } from "./actions.js";
import { catalogPage } from "./pages/catalog.js";
import { changePreviewPage } from "./pages/change.js";
import { clockPage, clocksPage } from "./pages/clocks.js";
import { eventsPage } from "./pages/events.js";
import { invoiceSettingsPage, updateInvoiceSettings } from "./pages/invoice-settings.js";
import { invoicePage, invoicesPage } from "./pages/invoices.js";
import { overview } from "./pages/overview.js";
import { subjectPage } from "./pages/subject.js";
import { subjectsPage } from "./pages/subjects.js";
import { subscriptionPage } from "./pages/subscription.js";
import { subscriptionsPage } from "./pages/subscriptions.js";
import { webhookPage } from "./pages/webhook.js";
import type { Route } from "./router.js";

const ID = "([0-9A-Za-z_]{1,64})";
const path = (pattern: string) => new RegExp(`^/dashboard/${pattern.replaceAll("{id}", ID)}$`);

export const ROUTES: Route[] = [
  { method: "GET", path: /^\/dashboard\/?$/, page: overview },
  { method: "GET", path: path("subjects"), page: subjectsPage },
  { method: "GET", path: path("subjects/{id}"), page: subjectPage },
  { method: "POST", path: path("subjects/{id}/credit-grants"), action: grantCredit, back: ([id]) => `/dashboard/subjects/${id}` },
  { method: "POST", path: path("subjects/{id}/credit-grants/{id}/void"), action: voidCredit, back: ([id]) => `/dashboard/subjects/${id}` },
  { method: "GET", path: path("subscriptions"), page: subscriptionsPage },
  { method: "GET", path: path("subscriptions/{id}"), page: subscriptionPage },
  { method: "POST", path: path("subscriptions/{id}/cancel"), action: cancelSubscription, back: ([id]) => `/dashboard/subscriptions/${id}` },
  { method: "GET", path: path("subscriptions/{id}/change"), page: changePreviewPage },
  { method: "POST", path: path("subscriptions/{id}/change"), action: changeRateCard, back: ([id]) => `/dashboard/subscriptions/${id}` },
  { method: "GET", path: path("invoices"), page: invoicesPage },
  { method: "GET", path: path("invoices/{id}"), page: invoicePage },
  { method: "POST", path: path("invoices/{id}/(finalize|void)"), action: finalizeOrVoid, back: ([id]) => `/dashboard/invoices/${id}` },
  { method: "GET", path: path("invoice-settings"), page: invoiceSettingsPage },
  { method: "POST", path: path("invoice-settings"), action: updateInvoiceSettings, back: () => "/dashboard/invoice-settings" },
  { method: "GET", path: path("catalog"), page: catalogPage },
  { method: "GET", path: path("events"), page: eventsPage },
  { method: "GET", path: path("webhooks/{id}"), page: webhookPage },
  { method: "GET", path: path("clocks"), page: clocksPage },
  { method: "GET", path: path("clocks/{id}"), page: clockPage },
  { method: "POST", path: path("clocks/{id}/advance"), action: advanceClock, back: ([id]) => `/dashboard/clocks/${id}` },
];
