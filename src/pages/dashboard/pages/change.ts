/** GET /dashboard/subscriptions/{id}/change?rate_card_id=&behavior=: the proration preview of a rate card change (changes nothing), with the form that makes it. */
import { displayMoney } from "../../../billing/money.js";
import { lineAmountHtml } from "../../prices.js";
import { BillingError, NotFoundError } from "../../../billing/errors.js";
import type { SubscriptionChanges } from "../../../billing/subscriptions/changes.js";
import { html } from "../../html.js";
import { type PageContext, type View, refusal, subLink } from "../common.js";
import { csrfField, minute, table } from "../layout.js";

export async function changePreviewPage({ services: s, caller: c, open, params: [param], query: q }: PageContext): Promise<View> {
  const id = param as string;
  const rateCardId = q.get("rate_card_id") ?? "";
  const behavior = q.get("behavior") ?? "prorate";
  let p: Awaited<ReturnType<SubscriptionChanges["previewChange"]>>;
  try {
    p = await s.changes.previewChange(c, id, { rateCardId, behavior });
  } catch (err) {
    if (err instanceof BillingError && !(err instanceof NotFoundError)) return refusal(err, `/dashboard/subscriptions/${id}`);
    throw err;
  }
  const currency = p.currency;
  const m = (v: string) => (currency ? displayMoney(v, currency) : v);
  const lines = table(
    "What the change invoices now",
    ["Description", "#Quantity", "#Unit price", "#Amount"],
    p.lines.map((l) => [l.description, l.quantity, currency ? lineAmountHtml(l.unitAmount, currency) : l.unitAmount, currency ? lineAmountHtml(l.amount, currency) : l.amount]),
    "Nothing: no usage so far and no upgrade charge.",
  );
  const body = html`<h1>Change ${subLink(id)} from ${p.from.name} to ${p.to.name}?</h1>
<div class="card"><p>At ${minute(p.at)} (the subject's time), this change invoices the old card's usage so far${p.upgrade !== "0" ? html` and an upgrade charge of <strong>${m(p.upgrade)}</strong>` : ""}; the new card applies from then, in the same cycle.${p.upgrade === "0" ? " A downgrade or an equal price charges nothing for the fixed rates." : ""}</p>
${lines}<p>Total now: <strong>${m(p.total)}</strong></p>
${p.needsCheckout ? html`<p class="error">The subject has no card on file: the change waits for a checkout, whose link the next page shows.</p>` : ""}
<form method="post" action="/dashboard/subscriptions/${id}/change">${csrfField(open.session.csrfToken)}<input type="hidden" name="rate_card_id" value="${p.to.id}"><input type="hidden" name="behavior" value="${behavior}">
<button type="submit">Change to ${p.to.name}</button></form><p><a href="/dashboard/subscriptions/${id}">Keep ${p.from.name}</a></p></div>`;
  return { title: "Preview: change rate card", body, current: "/dashboard/subscriptions" };
}
