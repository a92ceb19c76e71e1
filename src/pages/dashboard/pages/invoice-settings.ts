/**
 * GET /dashboard/invoice-settings and its form's POST (DESIGN §15): the environment's invoice
 * number prefix, the number the next finalized invoice gets, and the seller its invoices and
 * credit notes print. The form sends the prefix and the seller whole (an empty field: none), to
 * the API's own use case (InvoiceSettingsService), which judges them; a refused change is the
 * page again with the form as typed and each error beside its field (400), and nothing is written.
 */
import { type FieldViolation, InvalidArgumentError } from "../../../billing/errors.js";
import { formatNumber } from "../../../billing/subscriptions/booking.js";
import type { AddressInput, SellerInput } from "../../../billing/taxes/details.js";
import type { InvoiceSettings } from "../../../billing/taxes/settings.js";
import type { SellerDetails } from "../../../billing/taxes/types.js";
import { type Html, html } from "../../html.js";
import type { Action } from "../actions.js";
import type { PageContext, View } from "../common.js";
import { csrfField } from "../layout.js";
import { addressLines } from "./billing-details.js";

const ADDRESS = ["line1", "line2", "city", "postal_code", "state", "country"] as const;
const FIELDS = ["number_prefix", "legal_name", "email", "tax_id", ...ADDRESS, "footer"] as const;
type Field = (typeof FIELDS)[number];

const LABELS: Record<Field, string> = {
  number_prefix: "Number prefix",
  legal_name: "Legal name",
  email: "Email",
  tax_id: "Tax ID",
  line1: "Address line 1",
  line2: "Address line 2",
  city: "City",
  postal_code: "Postal code",
  state: "State or region",
  country: "Country (ISO code, as IE)",
  footer: "Footer",
};

/** The form's fields as typed, and what is wrong with them (by field; "" for the form as a whole). */
export interface SettingsForm {
  values: Record<Field, string>;
  errors: Map<Field | "", string[]>;
}

/** Which form field an API field path belongs to ("" when none). */
function fieldOf(path: string): Field | "" {
  const name = path.replace(/^seller\.(address\.)?/, "");
  return (FIELDS as readonly string[]).includes(name) ? (name as Field) : "";
}

function withErrors(form: SettingsForm, violations: readonly FieldViolation[]): SettingsForm {
  const errors = new Map(form.errors);
  for (const v of violations) {
    const f = fieldOf(v.field);
    errors.set(f, [...(errors.get(f) ?? []), f === "" ? `${v.field}: ${v.description}` : v.description]);
  }
  return { values: form.values, errors };
}

/** The form's values from the settings as they are. */
function valuesOf(s: InvoiceSettings): Record<Field, string> {
  const seller = s.seller;
  const a = seller?.address;
  return {
    number_prefix: s.numberPrefix,
    legal_name: seller?.legalName ?? "",
    email: seller?.email ?? "",
    tax_id: seller?.taxId ?? "",
    line1: a?.line1 ?? "",
    line2: a?.line2 ?? "",
    city: a?.city ?? "",
    postal_code: a?.postalCode ?? "",
    state: a?.state ?? "",
    country: a?.country ?? "",
    footer: seller?.footer ?? "",
  };
}

/** The posted seller as the use case takes it: an address only when one of its fields is filled. */
function sellerInput(v: Record<Field, string>): SellerInput {
  const address: AddressInput = { line1: v.line1, line2: v.line2, city: v.city, postalCode: v.postal_code, state: v.state, country: v.country };
  const hasAddress = ADDRESS.some((f) => v[f] !== "");
  return { legalName: v.legal_name, email: v.email, taxId: v.tax_id, footer: v.footer, ...(hasAddress ? { address } : {}) };
}

function sellerHtml(seller: SellerDetails | null): Html {
  if (!seller) return html`<p class="muted">None set: invoices and credit notes print no seller.</p>`;
  return html`<dl><dt>Legal name</dt><dd>${seller.legalName ?? "—"}</dd><dt>Address</dt><dd>${seller.address ? addressLines(seller.address) : "—"}</dd>
<dt>Tax ID</dt><dd class="mono">${seller.taxId ?? "—"}</dd><dt>Email</dt><dd>${seller.email ?? "—"}</dd><dt>Footer</dt><dd>${seller.footer ?? "—"}</dd></dl>`;
}

function formHtml(csrf: string, form: SettingsForm): Html {
  const { values: v, errors } = form;
  const input = (f: Field) => {
    const list = errors.get(f);
    const err = list ? html` <span class="err" id="settings-${f}-error">${list.join("; ")}</span>` : "";
    const aria = list ? html` aria-invalid="true" aria-describedby="settings-${f}-error"` : "";
    const control =
      f === "footer"
        ? html`<textarea id="settings-${f}" name="${f}" rows="3" cols="60"${aria}>${v[f]}</textarea>`
        : html`<input id="settings-${f}" name="${f}" value="${v[f]}"${f === "number_prefix" ? html` required` : ""}${aria}>`;
    return html`<div><label for="settings-${f}">${LABELS[f]}</label>${control}${err}</div>`;
  };
  const said = (["", ...FIELDS] as const).filter((f) => errors.has(f)).map((f) => `${f === "" ? "" : `${f}: `}${(errors.get(f) ?? []).join("; ")}`);
  const summary = said.length > 0 ? html`<p class="error" role="alert">Nothing was changed: ${said.join("; ")}.</p>` : "";
  return html`<form method="post" action="/dashboard/invoice-settings" class="card" aria-labelledby="h-settings-form">${csrfField(csrf)}
<h2 id="h-settings-form" style="margin-top:0">Change</h2>${summary}
<div class="filters">${input("number_prefix")}</div>
<h3>Seller</h3><div class="filters">${["legal_name", "email", "tax_id"].map((f) => input(f as Field))}</div>
<div class="filters">${ADDRESS.map(input)}</div>
<div class="filters">${input("footer")}</div>
<p class="muted">The prefix applies from the next finalized invoice on (1 to 12 of A-Z, 0-9 and "-"). The seller is replaced whole: an empty field prints nothing; all empty, no seller.</p>
<div><button type="submit">Save</button></div></form>`;
}

/** The page, with `form` (as typed, with its errors) in place of the settings' own values. */
async function settingsView({ services: s, caller: c, open, query: q }: PageContext, form?: SettingsForm): Promise<View> {
  const settings = await s.invoiceSettings.get(c);
  const next = formatNumber(settings.numberPrefix, "invoice", settings.nextInvoiceSequence);
  const saved = !form && q.get("done") === "saved" ? html`<p class="notice" role="status">The invoice settings were saved.</p>` : "";
  const body = html`<h1>Invoice settings</h1>${saved}<p><a href="/dashboard/invoices">← Invoices</a></p>
<div class="card"><dl><dt>Number prefix</dt><dd class="mono">${settings.numberPrefix}</dd><dt>Next invoice number</dt><dd class="mono">${next}</dd></dl></div>
<section class="card" aria-labelledby="h-seller"><h2 id="h-seller" style="margin-top:0">Seller</h2>${sellerHtml(settings.seller)}</section>
${formHtml(open.session.csrfToken, form ?? { values: valuesOf(settings), errors: new Map() })}`;
  return { status: form ? 400 : 200, title: "Invoice settings", body, current: "/dashboard/invoices" };
}

export const invoiceSettingsPage = (ctx: PageContext): Promise<View> => settingsView(ctx);

/** POST /dashboard/invoice-settings: the prefix and the seller, through the API's use case. */
export const updateInvoiceSettings: Action = async (ctx, posted) => {
  const values = Object.fromEntries(FIELDS.map((f) => [f, (posted.get(f) ?? "").trim()])) as Record<Field, string>;
  try {
    await ctx.services.invoiceSettings.update(ctx.caller, { numberPrefix: values.number_prefix, seller: sellerInput(values) });
  } catch (err) {
    if (err instanceof InvalidArgumentError) return settingsView(ctx, withErrors({ values, errors: new Map() }, err.violations));
    throw err;
  }
  return "/dashboard/invoice-settings?done=saved";
};
