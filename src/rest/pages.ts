/**
 * The server's own refusal of a form (too large, too slow, too many at once) is a page in the
 * hosted pages' shell (src/pages/shell.ts); this module keeps the name the server imports it by,
 * with the body given as markup text.
 */
import { raw } from "../pages/html.js";
import { type Res, page as shellPage } from "../pages/shell.js";

export function page(res: Res, status: number, title: string, body: string, formTargets: readonly string[] = []): void {
  shellPage(res, status, title, raw(body), formTargets);
}
