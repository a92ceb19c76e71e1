/** The subject page's billing details card (DESIGN §15): legal name, address, tax IDs, exemption, tax rates. */
import type { Address, BillingDetails } from "../../../billing/taxes/types.js";
import { type Html, html, join } from "../../html.js";

const EXEMPTION: Record<string, string> = { none: "none (taxed)", exempt: "exempt", reverse: "reverse charge" };

export function addressLines(a: Address): Html {
  const cityLine = [a.postalCode, a.city, a.state].filter((x) => x).join(" ");
  return join(
    [a.line1, a.line2, cityLine, a.country].filter((x): x is string => Boolean(x)).map((l) => html`${l}`),
    html`<br>`,
  );
}

export function billingDetailsCard(d: BillingDetails | null | undefined): Html {
  if (!d)
    return html`<div class="card" aria-labelledby="h-billing"><h2 id="h-billing" style="margin-top:0">Billing details</h2><p class="muted">None set: invoices print the subject's name and are taxed by the rate cards' defaults.</p></div>`;
  const taxIds =
    d.taxIds.length > 0
      ? join(
          d.taxIds.map((t) => html`<span class="mono">${t.value}</span> <span class="muted">(${t.type})</span>`),
          html`<br>`,
        )
      : "—";
  return html`<div class="card" aria-labelledby="h-billing"><h2 id="h-billing" style="margin-top:0">Billing details</h2><dl><dt>Legal name</dt><dd>${d.legalName ?? "—"}</dd><dt>Billing email</dt><dd>${d.email ?? "—"}</dd>
<dt>Address</dt><dd>${d.address ? addressLines(d.address) : "—"}</dd><dt>Tax IDs</dt><dd>${taxIds}</dd><dt>Tax exemption</dt><dd>${EXEMPTION[d.taxExempt] ?? d.taxExempt}</dd>
<dt>Tax rates</dt><dd class="mono">${d.taxRateIds.length > 0 ? d.taxRateIds.join(", ") : html`<span class="muted">the rate cards' defaults</span>`}</dd></dl></div>`;
}
