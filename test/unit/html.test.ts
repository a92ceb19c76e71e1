/**
 * The pages' template tag (src/pages/html.ts): every interpolated value is escaped unless it is
 * markup made by `html` or marked by `raw`; numbers as they are; false, null and undefined write
 * nothing; lists write each item; `join` puts a separator between items.
 */
import test from "ava";
import { Html, esc, html, join, raw } from "../../src/pages/html.js";

test("esc escapes the five characters that matter in content and quoted attributes", (t) => {
  t.is(esc(`<a href="x">Tom & Jerry's</a>`), "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  t.is(esc("plain text, 100%"), "plain text, 100%");
  t.is(esc(""), "");
});

test("a string put into a template is escaped; the template's own text is not", (t) => {
  const name = `<script>alert("x")</script>`;
  t.is(html`<td class="n">${name}</td>`.text, `<td class="n">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</td>`);
  t.is(html`<input value="${`" onfocus="x`}">`.text, `<input value="&quot; onfocus=&quot;x">`);
  t.is(html`<a title='${"it's"}'>`.text, `<a title='it&#39;s'>`);
});

test("markup made by html goes in as it is, and is escaped only once", (t) => {
  const cell = html`<b>${"a & b"}</b>`;
  t.true(cell instanceof Html);
  t.is(html`<td>${cell}</td>`.text, "<td><b>a &amp; b</b></td>");
  t.is(html`${html`${html`${"<"}`}`}`.text, "&lt;");
});

test("raw marks text as markup", (t) => {
  t.is(html`<p>${raw("<em>fixed</em>")}</p>`.text, "<p><em>fixed</em></p>");
  t.is(raw("&amp;").text, "&amp;");
});

test("numbers are written as they are; false, null and undefined write nothing", (t) => {
  t.is(html`${0} ${42} ${1.5} ${-3}`.text, "0 42 1.5 -3");
  t.is(html`[${false}${null}${undefined}]`.text, "[]");
  const error: string | undefined = undefined;
  t.is(html`<div>${error ? html`<p>${error}</p>` : ""}</div>`.text, "<div></div>");
});

test("a list writes each item in turn, each escaped or not by its kind", (t) => {
  t.is(html`<ul>${["<a>", html`<li>x</li>`, 7, null, ["&", raw("&amp;")]]}</ul>`.text, "<ul>&lt;a&gt;<li>x</li>7&amp;&amp;</ul>");
  t.is(html`${[]}`.text, "");
});

test("join puts a separator between the items; the separator is escaped unless it is markup", (t) => {
  t.is(join(["a", "<b>", html`<i>c</i>`], raw("<br>")).text, "a<br>&lt;b&gt;<br><i>c</i>");
  t.is(join(["a", "b"], " & ").text, "a &amp; b");
  t.is(join([]).text, "");
  t.is(join(["x", "y"]).text, "xy");
});

test("Html prints as its markup (String, template literals)", (t) => {
  const h = html`<p>${"<"}</p>`;
  t.is(String(h), "<p>&lt;</p>");
  t.is(`${h}`, "<p>&lt;</p>");
});

test("a value of another type is refused rather than written", (t) => {
  t.throws(() => html`${true as unknown as string}`, { instanceOf: TypeError });
  t.throws(() => html`${{} as unknown as string}`, { instanceOf: TypeError });
});
