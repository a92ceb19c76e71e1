/**
 * Which payment provider an environment pays through (DESIGN §8, §16): the one its payment
 * settings choose (payments/settings.ts), the built-in test provider or Stripe with the
 * environment's key; with no settings stored, the test provider for a test environment and none
 * for a live one. Live environments never use the test provider. A live environment without a
 * provider can run free plans, but anything that needs a payment is refused (NO_PAYMENT_PROVIDER),
 * its hosted checkouts take no card, and its invoices are never charged (they stay open).
 */
import { FailedPreconditionError } from "../errors.js";
import type { ProviderSettings } from "../payments/settings.js";
import type { EnvironmentMode } from "../tenancy.js";
import { TestPaymentProvider } from "./test-provider.js";
import type { PaymentProvider } from "./types.js";

/** Builds an environment's Stripe provider from its secret key (src/providers/stripe, given at wiring time). */
export type StripeFactory = (secretKey: string, environmentId: string) => PaymentProvider;

/** Where the providers read each environment's settings, secrets opened (PaymentSettingsService). */
export interface ProviderSettingsSource {
  providerOf(environmentId: string): Promise<ProviderSettings | undefined>;
}

export interface PerEnvironment {
  settings: ProviderSettingsSource;
  stripe: StripeFactory;
  /** Dresses each provider built (by its name), as tracing does. */
  wrap?: (provider: PaymentProvider, name: string) => PaymentProvider;
  /** How long an environment's provider is kept before its settings are read again (ms). */
  ttlMs?: number;
  now?: () => number;
}

/** A cached choice: the provider (or none) and, for Stripe, the key it was built with. */
interface Cached {
  provider: PaymentProvider | undefined;
  secretKey: string | null;
  at: number;
}

export class PaymentProviders {
  private readonly byMode: Partial<Record<EnvironmentMode, PaymentProvider>>;
  constructor(byMode: Partial<Record<EnvironmentMode, PaymentProvider>>) {
    // The one rule that must never bend: test cards are refused in live environments.
    if (byMode.live?.test) throw new Error("a test payment provider cannot serve live environments");
    this.byMode = byMode;
  }

  /** The provider of environments in `mode` when none chose one, or undefined when none is configured. */
  forMode(mode: EnvironmentMode): PaymentProvider | undefined {
    return this.byMode[mode];
  }

  private perEnvironment: PerEnvironment | undefined;
  private readonly cache = new Map<string, Cached>();

  /** From now on each environment's provider follows its payment settings (wiring/payments.ts). */
  configure(perEnvironment: PerEnvironment): this {
    this.perEnvironment = perEnvironment;
    this.cache.clear();
    return this;
  }

  /**
   * The provider of the environment `environmentId` (of `mode`): its settings' choice, kept for a
   * few seconds (settings change rarely; a change in this process is seen at once, on other
   * servers within the TTL). Undefined when it has none. Never a test provider for a live one.
   */
  async forEnvironment(environmentId: string, mode: EnvironmentMode): Promise<PaymentProvider | undefined> {
    const per = this.perEnvironment;
    if (!per) return this.forMode(mode);
    const now = (per.now ?? Date.now)();
    const hit = this.cache.get(environmentId);
    if (hit && now - hit.at < (per.ttlMs ?? 5_000)) return hit.provider;
    const settings = await per.settings.providerOf(environmentId);
    let provider: PaymentProvider | undefined;
    let secretKey: string | null = null;
    if (settings?.provider === "stripe" && settings.stripeSecretKey) {
      secretKey = settings.stripeSecretKey;
      // The same key keeps the same client (its connections); a new key builds a new one.
      provider = hit && hit.secretKey === secretKey ? hit.provider : this.dress(per.stripe(secretKey, environmentId), "stripe", per);
    } else if (!settings || settings.provider === "test") {
      provider = this.forMode(mode);
    }
    // The one rule that must never bend: test cards are refused in live environments.
    if (mode === "live" && provider?.test) provider = undefined;
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(environmentId, { provider, secretKey, at: now });
    return provider;
  }

  /** Forgets the environment's provider: its settings changed. */
  invalidate(environmentId: string): void {
    this.cache.delete(environmentId);
  }

  private dress(provider: PaymentProvider, name: string, per: PerEnvironment): PaymentProvider {
    return per.wrap ? per.wrap(provider, name) : provider;
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
