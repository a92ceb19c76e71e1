/**
 * The customer portal's card page in a Stripe environment (DESIGN §16), both stores, the real
 * server against the fake Stripe: its form's POST is answered with a 303 to Stripe Checkout (setup
 * mode), and a browser applies form-action to that redirect too, so the page's CSP allows Stripe's
 * Checkout origin (shell.ts STRIPE_CHECKOUT_ORIGIN, as the checkout page does). Before, the card
 * page allowed only 'self', and Chrome blocked the redirect: no card could be saved there. The
 * test provider's card page (a card typed in, a 303 back to the portal) stays 'self' only.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { STORES } from "../helpers/db.js";
import { RETURN_URL, form, stripeDriver, useStripeServer } from "../helpers/payment-flows.js";
import { Scenario } from "../helpers/scenario.js";

const formAction = (res: Response) => /form-action ([^;]*);/.exec(res.headers.get("content-security-policy") ?? "")?.[1];

for (const store of STORES) {
  const ctx = useStripeServer(store, { SECRETS_ENCRYPTION_KEY: randomBytes(32).toString("base64") });

  test.serial(`${store}: the portal's card page in a Stripe environment allows Stripe Checkout in form-action; its form leads there`, async (t) => {
    const { server, fake } = ctx;
    const s = await stripeDriver(server, fake).start(server);
    const portal = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: RETURN_URL });
    const cardUrl = `${server.url}${new URL(String(portal.body.url)).pathname}/card`;
    const page = await fetch(cardUrl);
    await page.body?.cancel();
    t.is(page.status, 200);
    t.is(formAction(page), "'self' https://checkout.stripe.com");
    const post = await form(cardUrl);
    await post.body?.cancel();
    t.is(post.status, 303);
    t.true(String(post.headers.get("location")).startsWith(`${fake.url}/checkout/cs_`), "the POST is answered with a 303 to Stripe Checkout");
  });

  test.serial(`${store}: the portal's card page of the test provider allows only its own origin`, async (t) => {
    const s = await Scenario.start(ctx.server, "2026-01-15T00:00:00Z");
    const portal = await s.raw("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: RETURN_URL });
    const page = await fetch(`${ctx.server.url}${new URL(String(portal.body.url)).pathname}/card`);
    await page.body?.cancel();
    t.is(page.status, 200);
    t.is(formAction(page), "'self'");
  });
}
