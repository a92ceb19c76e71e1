/**
 * Moved to src/pages (shell.ts, hosted/checkout.ts, hosted/invoice.ts); this module re-exports
 * them for the importers not yet updated. `page` here takes its body as markup text.
 */
import { raw } from "../pages/html.js";
import { type Res, page as shellPage } from "../pages/shell.js";

export { esc } from "../pages/html.js";
export { createPages } from "../pages/hosted/checkout.js";
export { invoiceHtml } from "../pages/hosted/invoice.js";
export { type Req, type Res, notAllowed, originOf, pageCsp, pageHeaders, readForm, servePages } from "../pages/shell.js";

export function page(res: Res, status: number, title: string, body: string, formTargets: readonly string[] = []): void {
  shellPage(res, status, title, raw(body), formTargets);
}
