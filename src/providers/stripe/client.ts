/** A `stripe` library client (DESIGN §16): every call to Stripe goes through the official library. */
import Stripe from "stripe";

/** Where the Stripe API is (STRIPE_API_BASE): Stripe's own by default, a local fake in tests. */
export interface StripeApi {
  host: string;
  port: number;
  protocol: "http" | "https";
}

/**
 * A client for `secretKey`. The library retries network failures itself, each retry with the
 * same idempotency key, so a retried charge is never a second charge.
 */
export function stripeClient(secretKey: string, api?: StripeApi): Stripe {
  return new Stripe(secretKey, { ...(api ?? {}), maxNetworkRetries: 2, timeout: 30_000 });
}

/** Whether a key is a test key (sk_test_…, rk_test_…). */
export function isTestKey(secretKey: string): boolean {
  return /^(sk|rk)_test_/.test(secretKey);
}
