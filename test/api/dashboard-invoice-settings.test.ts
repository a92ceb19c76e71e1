/**
 * The dashboard's invoice settings page (DESIGN §15) over plain HTTP, on both stores: it shows
 * what the API set (prefix, next number, seller, escaped); its form changes the prefix and the
 * seller through the API's use case (GET /invoice-settings then shows them); a bad prefix is the
 * page again with the error beside its field and changes nothing; a POST without the session's
 * CSRF token is refused and changes nothing.
 */
import test from "ava";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";

interface Browser {
  get(path: string): Promise<Response>;
  post(path: string, form: Record<string, string>): Promise<Response>;
}

/** A cookie jar over fetch (no redirects followed). */
function browser(server: TestServer): Browser {
  const cookies = new Map<string, string>();
  const remember = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const pair = c.split(";")[0] as string;
      const i = pair.indexOf("=");
      if (/Max-Age=0/.test(c)) cookies.delete(pair.slice(0, i));
      else cookies.set(pair.slice(0, i), pair.slice(i + 1));
    }
    return res;
  };
  const cookie = () => [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  return {
    get: async (path) => remember(await fetch(`${server.url}${path}`, { headers: { cookie: cookie() }, redirect: "manual" })),
    post: async (path, form) =>
      remember(
        await fetch(`${server.url}${path}`, {
          method: "POST",
          headers: { cookie: cookie(), "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams(form).toString(),
          redirect: "manual",
        }),
      ),
  };
}

const csrfOf = (page: string) => /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";

/** A browser signed in to the scenario's environment, and its CSRF token. */
async function signedIn(server: TestServer, s: Scenario): Promise<{ b: Browser; csrf: string }> {
  const b = browser(server);
  const form = await b.get("/dashboard/sign-in");
  const res = await b.post("/dashboard/sign-in", { csrf: csrfOf(await form.text()), api_key: s.key });
  if (res.status !== 303) throw new Error(`sign-in: ${res.status}`);
  return { b, csrf: csrfOf(await (await b.get("/dashboard")).text()) };
}

const EMPTY = { number_prefix: "", legal_name: "", email: "", tax_id: "", line1: "", line2: "", city: "", postal_code: "", state: "", country: "", footer: "" };

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: the page shows what the API set, escaped, and is linked from the invoices page`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { b } = await signedIn(server, s);
    const empty = await (await b.get("/dashboard/invoice-settings")).text();
    t.regex(empty, /Next invoice number<\/dt><dd class="mono">INV-000001</);
    t.regex(empty, /None set/);
    t.regex(await (await b.get("/dashboard/invoices")).text(), /href="\/dashboard\/invoice-settings"/);

    const seller = {
      legal_name: "Seller <b>Ltd</b> & Co",
      address: { line1: "1 Main St", city: "Dublin", country: "IE" },
      tax_id: "IE1234567T",
      email: "ar@seller.example",
      footer: 'IBAN "IE00" <script>',
    };
    await s.call("PATCH", "/invoice-settings", { number_prefix: "ACME-2026", seller });
    const res = await b.get("/dashboard/invoice-settings");
    t.is(res.status, 200);
    const page = await res.text();
    t.regex(page, /Number prefix<\/dt><dd class="mono">ACME-2026</);
    t.regex(page, /Next invoice number<\/dt><dd class="mono">ACME-2026-000001</);
    t.true(page.includes("Seller &lt;b&gt;Ltd&lt;/b&gt; &amp; Co"), "the legal name, escaped");
    t.true(page.includes("IBAN &quot;IE00&quot; &lt;script&gt;"), "the footer, escaped");
    t.false(page.includes("<script>") || page.includes("<b>Ltd"), "nothing unescaped");
    t.true(page.includes("1 Main St") && page.includes("Dublin") && page.includes("IE1234567T") && page.includes("ar@seller.example"));
    t.true(page.includes('name="legal_name" value="Seller &lt;b&gt;Ltd&lt;/b&gt; &amp; Co"'), "the form holds the seller as it is");
  });

  test(`${store}: the form changes the prefix and the seller (the API then shows them); all seller fields empty clear it`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { b, csrf } = await signedIn(server, s);
    const form = {
      ...EMPTY,
      number_prefix: "DASH-1",
      legal_name: "Dash GmbH",
      line1: "Hauptstr. 1",
      postal_code: "10115",
      city: "Berlin",
      country: "de",
      tax_id: "DE123456789",
      email: "billing@dash.example",
      footer: "Thank you",
    };
    const res = await b.post("/dashboard/invoice-settings", { csrf, ...form });
    t.is(res.status, 303);
    t.is(res.headers.get("location"), "/dashboard/invoice-settings?done=saved");
    t.deepEqual(await s.call("GET", "/invoice-settings"), {
      number_prefix: "DASH-1",
      next_invoice_sequence: "1",
      seller: {
        legal_name: "Dash GmbH",
        address: { line1: "Hauptstr. 1", line2: null, city: "Berlin", postal_code: "10115", state: null, country: "DE" },
        tax_id: "DE123456789",
        email: "billing@dash.example",
        footer: "Thank you",
      },
    });
    const page = await (await b.get("/dashboard/invoice-settings?done=saved")).text();
    t.regex(page, /role="status">The invoice settings were saved/);
    t.regex(page, /DASH-1-000001/);

    t.is((await b.post("/dashboard/invoice-settings", { csrf, ...EMPTY, number_prefix: "DASH-2" })).status, 303);
    t.deepEqual(await s.call("GET", "/invoice-settings"), { number_prefix: "DASH-2", next_invoice_sequence: "1", seller: null });
  });

  test(`${store}: a bad prefix or seller is shown beside its field and changes nothing`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    await s.call("PATCH", "/invoice-settings", { number_prefix: "KEEP", seller: { legal_name: "Kept Ltd" } });
    const before = await s.call("GET", "/invoice-settings");
    const { b, csrf } = await signedIn(server, s);
    const res = await b.post("/dashboard/invoice-settings", { csrf, ...EMPTY, number_prefix: "acme<x>", legal_name: "Changed Ltd", city: "Dublin", email: "nope" });
    t.is(res.status, 400);
    const page = await res.text();
    t.regex(page, /role="alert">Nothing was changed: number_prefix: must be 1 to 12 characters/);
    t.regex(page, /id="settings-number_prefix" name="number_prefix" value="acme&lt;x&gt;" required aria-invalid="true"/, "the form as typed, escaped");
    t.regex(page, /id="settings-country-error">is required</, "an address without a country: the use case's error, beside the country");
    t.regex(page, /id="settings-email-error">must be a valid email address</);
    t.deepEqual(await s.call("GET", "/invoice-settings"), before);
  });

  test(`${store}: a POST without the session's CSRF token (or with a wrong one) is refused and changes nothing`, async (t) => {
    const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
    const { b } = await signedIn(server, s);
    for (const csrf of [undefined, "x".repeat(43)]) {
      const res = await b.post("/dashboard/invoice-settings", { ...EMPTY, number_prefix: "EVIL", legal_name: "Evil", ...(csrf ? { csrf } : {}) });
      t.is(res.status, 403);
    }
    t.deepEqual(await s.call("GET", "/invoice-settings"), { number_prefix: "INV", next_invoice_sequence: "1", seller: null });
    const anonymous = await fetch(`${server.url}/dashboard/invoice-settings`, { redirect: "manual" });
    t.is(anonymous.status, 303, "signed out: to the sign-in page");
  });
}
