/**
 * Which payment provider an environment pays through, chosen by its mode (DESIGN §8): test
 * environments use the built-in test provider; live environments never do. No real processor
 * is built yet, so a live environment has no provider: it can run free plans, but anything that
 * needs a payment is refused (NO_PAYMENT_PROVIDER), its hosted checkouts take no card, and its
 * invoices are never charged (they stay open).
 */
import { FailedPreconditionError } from "../errors.js";
import type { EnvironmentMode } from "../tenancy.js";
import { TestPaymentProvider } from "./test-provider.js";
import type { PaymentProvider } from "./types.js";

export class PaymentProviders {
  private readonly byMode: Partial<Record<EnvironmentMode, PaymentProvider>>;
  constructor(byMode: Partial<Record<EnvironmentMode, PaymentProvider>>) {
    // The one rule that must never bend: test cards are refused in live environments.
    if (byMode.live?.test) throw new Error("a test payment provider cannot serve live environments");
    this.byMode = byMode;
  }

  /** The provider of environments in `mode`, or undefined when none is configured. */
  forMode(mode: EnvironmentMode): PaymentProvider | undefined {
    return this.byMode[mode];
  }
}

/**
 * What this build has: the test provider for test environments, nothing for live ones. `wrap`
 * dresses each provider (by its name) for the app, as tracing does with a span per charge.
 */
export function builtInPaymentProviders(wrap: (provider: PaymentProvider, name: string) => PaymentProvider = (p) => p): PaymentProviders {
  return new PaymentProviders({ test: wrap(new TestPaymentProvider(), "test") });
}

export const NO_PAYMENT_PROVIDER_MESSAGE = "this live environment has no payment provider configured";

/** The refusal of anything that needs a payment in an environment without a provider. */
export function noPaymentProvider(what: string): FailedPreconditionError {
  return new FailedPreconditionError("NO_PAYMENT_PROVIDER", `${NO_PAYMENT_PROVIDER_MESSAGE}: ${what} (test cards are not accepted in live mode; free plans work)`);
}
