/**
 * The dashboard's changes, each the POST of a signed-in form (the router checks its CSRF token
 * first): an action answers the page to go back to (a 303) or, when the change needs more, a page.
 */
import { InvalidArgumentError, NotFoundError } from "../../billing/errors.js";
import { html } from "../html.js";
import { type PageContext, type View, creditsOf } from "./common.js";
import { formErrors, readGrantForm } from "./pages/credit.js";
import { subjectView } from "./pages/subject.js";

/** An action: the form's fields in, the address to send the browser to (303) or a page out. */
export type Action = (ctx: PageContext, form: URLSearchParams) => Promise<string | View>;

/** POST /dashboard/subscriptions/{id}/cancel: when=now | end_of_cycle. */
export const cancelSubscription: Action = async ({ services: s, caller: c, params: [id] }, form) => {
  const atEnd = form.get("when") === "end_of_cycle";
  await s.changes.cancel(c, id as string, { ...(atEnd ? { atEndOfCycle: true } : {}), reason: "cancelled from the dashboard" });
  return `/dashboard/subscriptions/${id}?done=${atEnd ? "cancelling" : "cancelled"}`;
};

/** POST /dashboard/subscriptions/{id}/change: through the API's change-rate-card use case; without a card on file, the checkout to send. */
export const changeRateCard: Action = async ({ services: s, caller: c, params: [id] }, form) => {
  const back = `/dashboard/subscriptions/${id}`;
  const r = await s.changes.changeRateCard(c, id as string, { rateCardId: form.get("rate_card_id") ?? "", behavior: form.get("behavior") ?? "" });
  if (r.kind !== "requires_action") return `${back}?done=changed`;
  const url = r.checkoutUrl;
  return {
    title: "Checkout needed",
    body: html`<h1>The change waits for a payment</h1><p>The subject has no card on file. Send them this checkout; the change happens when it is paid:</p><p><a href="${url}">${url}</a></p><p><a href="${back}">Back to the subscription</a></p>`,
  };
};

/** POST /dashboard/invoices/{id}/finalize | /void. */
export const finalizeOrVoid: Action = async ({ services: s, caller: c, params: [id, verb] }) => {
  if (verb === "finalize") await s.invoices.finalize(c, id as string);
  else await s.invoices.setInvoiceStatus(c, id as string, "void");
  return `/dashboard/invoices/${id}?done=${verb === "finalize" ? "finalized" : "voided"}`;
};

/** POST /dashboard/clocks/{id}/advance: frozen_time as datetime-local sends it, read as UTC. */
export const advanceClock: Action = async ({ services: s, caller: c, params: [param] }, form) => {
  const id = param as string;
  const raw = (form.get("frozen_time") ?? "").trim();
  // datetime-local sends 2026-02-15T00:00 (minutes; seconds when given): read as UTC.
  const to = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,3})?)?$/.test(raw) ? new Date(`${raw}Z`) : undefined;
  if (!to || Number.isNaN(to.getTime())) throw new InvalidArgumentError([{ field: "frozen_time", description: "must be a date and time, as 2026-02-15T00:00 (UTC)" }]);
  const before = await s.clocks.clock(c, id);
  await s.clocks.advanceClock(c, id, to);
  return `/dashboard/clocks/${id}?from=${encodeURIComponent(before.frozenTime.toISOString())}`;
};

/**
 * POST /dashboard/subjects/{id}/credit-grants: grants promotional credit through the credit use
 * case. Bad input (read here, or judged by the use case) is the subject page again with the form
 * as typed and each error beside its field (400); nothing is written.
 */
export const grantCredit: Action = async (ctx, form) => {
  const credits = creditsOf(ctx.services);
  if (!credits) throw new NotFoundError("NOT_FOUND", "credits are not available here");
  const subject = await ctx.services.subjects.get(ctx.caller, ctx.params[0] as string);
  const read = readGrantForm(subject.id, form);
  if (!read.input) return subjectView({ ...ctx, params: [subject.id] }, read.form);
  try {
    await credits.grant(ctx.caller, read.input);
  } catch (err) {
    if (err instanceof InvalidArgumentError) return subjectView({ ...ctx, params: [subject.id] }, formErrors(read.form, err.violations));
    throw err;
  }
  return `/dashboard/subjects/${subject.id}?done=credit_granted#h-credit`;
};

/** POST /dashboard/subjects/{id}/credit-grants/{grant}/void: what is left of the grant leaves the balance. */
export const voidCredit: Action = async ({ services: s, caller: c, params: [subjectId, grantId] }) => {
  const credits = creditsOf(s);
  if (!credits) throw new NotFoundError("NOT_FOUND", "credits are not available here");
  await credits.voidGrant(c, subjectId as string, grantId as string);
  return `/dashboard/subjects/${subjectId}?done=credit_voided#h-credit`;
};
