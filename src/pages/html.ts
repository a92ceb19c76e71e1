/**
 * HTML for the pages, built with a tagged template that escapes every value put into it:
 *
 *   html`<td>${name}</td>`            text is escaped (& < > " ')
 *   html`<td>${link}</td>`            markup made by `html` goes in as it is
 *   html`<p>${raw(fixedMarkup)}</p>`  `raw` marks text that is already markup (escaped or fixed)
 *
 * So a page escapes by default, and markup that is let through unescaped is named (`raw`) where
 * it is made. Numbers are written as they are; false, null and undefined write nothing (for
 * `${cond ? html`…` : ""}` and optional parts); a list writes each of its items in turn.
 */

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text escaped for HTML content and double- or single-quoted attribute values. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ENTITIES[c] as string);
}

/** Markup that is safe to write as it is: made by `html`, or marked by `raw`. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** What a template takes. */
export type Value = Html | string | number | false | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value instanceof Html) return value.text;
  if (typeof value === "string") return esc(value);
  if (typeof value === "number") return String(value);
  if (value === false || value === null || value === undefined) return "";
  if (Array.isArray(value)) return value.map(render).join("");
  throw new TypeError(`html: cannot write a ${typeof value}`);
}

/** The template tag: the literal parts as they are, every value escaped unless it is Html. */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0] as string;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

/** Marks `text` as markup, written unescaped: only for text that is already escaped or fixed. */
export function raw(text: string): Html {
  return new Html(text);
}

/** The items written in turn with `separator` between them. */
export function join(items: readonly Value[], separator: Value = ""): Html {
  const sep = render(separator);
  return new Html(items.map(render).join(sep));
}
