/**
 * An environment's payment settings (DESIGN §16): its provider ("test" or "stripe"), its Stripe
 * secrets (write-only, sealed with the server's SECRETS_ENCRYPTION_KEY: secret-box.ts) and its
 * dunning. Read and changed through the API and the CLI; the providers (subscriptions/payments.ts)
 * read them through `providerOf`. A live environment never has the test provider: its stored
 * "test" (the default row) means it has none yet, shown as provider "".
 */
import { FailedPreconditionError, Violations } from "../errors.js";
import type { Caller, EnvironmentMode } from "../tenancy.js";
import { type SecretKeys, SecretOpenError, open, seal } from "./secret-box.js";
import { AFTER_LAST_ATTEMPT, type AfterLastAttempt, PROVIDER_KINDS, type PaymentSettings, type ProviderKind, defaultPaymentSettings } from "./types.js";

/** Storage port: one row per environment (none: the defaults). */
export interface PaymentSettingsStore {
  get(environmentId: string): Promise<PaymentSettings | undefined>;
  /** Inserts or replaces the environment's row. */
  save(settings: PaymentSettings): Promise<void>;
  /** Every stored row (for a key rotation). */
  all(): Promise<PaymentSettings[]>;
  /** Replaces the sealed secrets of a row if they are still `before` (a rotation racing an update loses); whether it did. */
  reseal(environmentId: string, before: SealedSecrets, after: SealedSecrets): Promise<boolean>;
}

export interface SealedSecrets {
  stripeSecretKeySealed: string | null;
  stripeWebhookSecretSealed: string | null;
}

/** What the API shows: never a secret, only whether one is stored (and the key's last 4). */
export interface PaymentSettingsView {
  /** "" in a live environment that has not chosen Stripe: it has no provider. */
  provider: ProviderKind | "";
  stripeSecretKeySet: boolean;
  stripeSecretKeyLast4: string | null;
  stripeWebhookSecretSet: boolean;
  stripeWebhookUrl: string;
  retryScheduleDays: number[];
  afterLastAttempt: AfterLastAttempt;
  markUncollectible: boolean;
}

export interface UpdatePaymentSettingsInput {
  provider?: string;
  /** Write-only; "" removes it. */
  stripeSecretKey?: string;
  /** Write-only; "" removes it. */
  stripeWebhookSecret?: string;
  /** Replaces the schedule when given. */
  retryScheduleDays?: number[];
  afterLastAttempt?: string;
  markUncollectible?: boolean;
}

/** What a provider is built from: the environment's provider and its secrets, opened. */
export interface ProviderSettings {
  provider: ProviderKind;
  stripeSecretKey: string | null;
  stripeWebhookSecret: string | null;
  settings: PaymentSettings;
}

export const MAX_RETRY_ATTEMPTS = 8;
export const MAX_RETRY_DAY = 60;
const WEBHOOK_SECRET = /^whsec_[A-Za-z0-9+/=_-]{1,200}$/;

/** The Stripe key prefixes an environment of `mode` accepts (a test key never serves a live environment, nor the reverse). */
export function stripeKeyProblem(key: string, mode: EnvironmentMode): string | undefined {
  if (!new RegExp(`^(sk|rk)_${mode}_[A-Za-z0-9]{8,250}$`).test(key)) {
    return `must be a Stripe ${mode} secret key (sk_${mode}_… or rk_${mode}_…) in a ${mode} environment`;
  }
  return undefined;
}

/** Checks a retry schedule: 1–60 days, strictly increasing, at most 8 entries. */
export function checkRetrySchedule(days: readonly number[], v: Violations): void {
  if (days.length > MAX_RETRY_ATTEMPTS) v.add("", `at most ${MAX_RETRY_ATTEMPTS} retries (got ${days.length})`);
  days.forEach((d, i) => {
    if (!Number.isInteger(d) || d < 1 || d > MAX_RETRY_DAY) v.at(i).add("", `must be a whole number of days from 1 to ${MAX_RETRY_DAY} (got ${d})`);
    else if (i > 0 && d <= (days[i - 1] as number)) v.at(i).add("", `must be after the previous entry (${days[i - 1]}): the schedule is strictly increasing`);
  });
}

export class PaymentSettingsService {
  /** Told of each change (the providers' cache in this process). */
  changed: (environmentId: string) => void = () => {};

  constructor(
    private readonly store: PaymentSettingsStore,
    private readonly keys: SecretKeys | undefined,
    private readonly publicBaseUrl: () => string,
    private readonly now: () => Date,
  ) {}

  /** The stored settings, or the defaults. */
  async stored(environmentId: string): Promise<PaymentSettings> {
    return (await this.store.get(environmentId)) ?? defaultPaymentSettings(environmentId, this.now());
  }

  async get(caller: Caller): Promise<PaymentSettingsView> {
    return this.view(await this.stored(caller.environmentId), caller.mode);
  }

  async update(caller: Caller, input: UpdatePaymentSettingsInput): Promise<PaymentSettingsView> {
    const current = await this.stored(caller.environmentId);
    const v = new Violations();
    const next = { ...current };
    if (input.provider !== undefined) {
      if (!PROVIDER_KINDS.includes(input.provider as ProviderKind)) v.add("provider", `must be one of ${PROVIDER_KINDS.join(", ")} (got ${JSON.stringify(input.provider)})`);
      else if (input.provider === "test" && caller.mode === "live") v.add("provider", "the test provider (test cards) is not accepted in a live environment: use stripe");
      else next.provider = input.provider as ProviderKind;
    }
    const secretKey = input.stripeSecretKey;
    const keyProblem = secretKey ? stripeKeyProblem(secretKey, caller.mode) : undefined;
    if (keyProblem) v.add("stripe_secret_key", keyProblem);
    const webhookSecret = input.stripeWebhookSecret;
    if (webhookSecret && !WEBHOOK_SECRET.test(webhookSecret)) v.add("stripe_webhook_secret", "must be a Stripe webhook signing secret (whsec_…)");
    if (input.retryScheduleDays !== undefined) {
      checkRetrySchedule(input.retryScheduleDays, v.at("retry_schedule_days"));
      next.retryScheduleDays = [...input.retryScheduleDays];
    }
    if (input.afterLastAttempt !== undefined) {
      if (!AFTER_LAST_ATTEMPT.includes(input.afterLastAttempt as AfterLastAttempt)) {
        v.add("after_last_attempt", `must be one of ${AFTER_LAST_ATTEMPT.join(", ")} (got ${JSON.stringify(input.afterLastAttempt)})`);
      } else next.afterLastAttempt = input.afterLastAttempt as AfterLastAttempt;
    }
    if (input.markUncollectible !== undefined) next.markUncollectible = input.markUncollectible;
    const keyAfter = secretKey === undefined ? current.stripeSecretKeySealed !== null : secretKey !== "";
    if (next.provider === "stripe" && !keyAfter && !keyProblem) {
      if (secretKey === "") v.add("stripe_secret_key", "cannot be removed while the provider is stripe: choose another provider first");
      else v.add("provider", "stripe needs the environment's Stripe secret key: give stripe_secret_key");
    }
    v.throwIfAny();
    if (secretKey !== undefined) {
      next.stripeSecretKeySealed = secretKey === "" ? null : this.seal(secretKey);
      next.stripeSecretKeyLast4 = secretKey === "" ? null : secretKey.slice(-4);
    }
    if (webhookSecret !== undefined) next.stripeWebhookSecretSealed = webhookSecret === "" ? null : this.seal(webhookSecret);
    next.updatedAt = this.now();
    await this.store.save(next);
    this.changed(caller.environmentId);
    return this.view(next, caller.mode);
  }

  /**
   * The environment's provider with its secrets opened, for building it (subscriptions/payments.ts)
   * and checking Stripe's webhooks. A secret that does not open (no key configured, or sealed by a
   * key this server does not have) is a FailedPreconditionError naming the problem, never the secret.
   */
  async providerOf(environmentId: string): Promise<ProviderSettings | undefined> {
    const settings = await this.store.get(environmentId);
    if (!settings) return undefined;
    // Secrets kept while another provider is chosen are not opened (nor needed): a server without the key still serves the test cards.
    const stripe = settings.provider === "stripe";
    return {
      provider: settings.provider,
      stripeSecretKey: stripe ? this.open(settings.stripeSecretKeySealed) : null,
      stripeWebhookSecret: stripe ? this.open(settings.stripeWebhookSecretSealed) : null,
      settings,
    };
  }

  /** Re-seals every stored secret with the current key (opened with the current or the previous one); how many were re-sealed. */
  async rotate(): Promise<{ environments: number; secrets: number }> {
    const keys = this.requireKeys();
    let environments = 0;
    let secrets = 0;
    for (const s of await this.store.all()) {
      const before = { stripeSecretKeySealed: s.stripeSecretKeySealed, stripeWebhookSecretSealed: s.stripeWebhookSecretSealed };
      const reseal = (sealed: string | null) => (sealed === null ? null : seal(this.open(sealed) as string, keys.current));
      const after = { stripeSecretKeySealed: reseal(before.stripeSecretKeySealed), stripeWebhookSecretSealed: reseal(before.stripeWebhookSecretSealed) };
      const count = [after.stripeSecretKeySealed, after.stripeWebhookSecretSealed].filter((x) => x !== null).length;
      if (count === 0) continue;
      if (!(await this.store.reseal(s.environmentId, before, after))) continue;
      this.changed(s.environmentId);
      environments++;
      secrets += count;
    }
    return { environments, secrets };
  }

  private view(s: PaymentSettings, mode: EnvironmentMode): PaymentSettingsView {
    return {
      provider: mode === "live" && s.provider === "test" ? "" : s.provider,
      stripeSecretKeySet: s.stripeSecretKeySealed !== null,
      stripeSecretKeyLast4: s.stripeSecretKeyLast4,
      stripeWebhookSecretSet: s.stripeWebhookSecretSealed !== null,
      stripeWebhookUrl: `${this.publicBaseUrl().replace(/\/+$/, "")}/providers/stripe/webhooks/${s.environmentId}`,
      retryScheduleDays: [...s.retryScheduleDays],
      afterLastAttempt: s.afterLastAttempt,
      markUncollectible: s.markUncollectible,
    };
  }

  private requireKeys(): SecretKeys {
    if (!this.keys) {
      throw new FailedPreconditionError("SECRETS_KEY_MISSING", "this server has no SECRETS_ENCRYPTION_KEY to store secrets with: set it (32 bytes, base64 or 64 hex digits) and restart");
    }
    return this.keys;
  }

  private seal(secret: string): string {
    return seal(secret, this.requireKeys().current);
  }

  private open(sealed: string | null): string | null {
    if (sealed === null) return null;
    const keys = this.requireKeys();
    try {
      return open(sealed, keys);
    } catch (err) {
      if (!(err instanceof SecretOpenError)) throw err;
      throw new FailedPreconditionError("SECRETS_KEY_MISMATCH", `a stored provider secret cannot be opened: ${err.message}`);
    }
  }
}
