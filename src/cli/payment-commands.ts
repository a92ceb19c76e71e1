/**
 * `billing keys env set-payment-provider` and `billing secrets rotate` (DESIGN §16): an
 * environment's payment provider with its Stripe secrets, read from files or stdin (`-`), never
 * from the command line (which shell history and `ps` keep); and the re-sealing of every stored
 * secret with the current SECRETS_ENCRYPTION_KEY after a rotation. Secrets are never printed.
 */
import { readFileSync } from "node:fs";
import { BillingError, FailedPreconditionError, InvalidArgumentError } from "../billing/errors.js";
import { PaymentSettingsService, type PaymentSettingsView } from "../billing/payments/settings.js";
import { systemCaller } from "../billing/tenancy.js";
import type { Database } from "../db/datasource.js";
import { SqlAuthStore } from "../db/stores/auth-store.js";
import { SqlPaymentSettingsStore } from "../db/stores/payment-settings-store.js";
import { type Command, type Context, Refusal, print, withMigratedDatabase } from "./context.js";

const KEY_FILE = "--stripe-secret-key-file";
const WEBHOOK_FILE = "--stripe-webhook-secret-file";

/** The settings service over the CLI's database, with the configured secrets keys. */
function settingsOf(ctx: Context, db: Database): PaymentSettingsService {
  return new PaymentSettingsService(
    new SqlPaymentSettingsStore(db.sql, db.entities),
    ctx.secrets,
    () => ctx.publicBaseUrl,
    () => new Date(),
  );
}

/** A secret from the file a flag names (`-`: stdin), without its line end; undefined when the flag is not given. */
function secretFrom(ctx: Context, flag: string): string | undefined {
  const path = ctx.flags.get(flag);
  if (path === undefined) return undefined;
  try {
    return readFileSync(path === "-" ? 0 : path, "utf8").replace(/\r?\n$/, "");
  } catch (err) {
    throw new Refusal(`${flag}: cannot read ${path === "-" ? "stdin" : path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, 2);
  }
}

/** A domain refusal as the CLI's: bad input is the command line's (2), a missing key what it found (1). */
function refusal(err: unknown): never {
  if (err instanceof InvalidArgumentError) throw new Refusal(err.message.replace(/\bstripe_secret_key\b/, KEY_FILE).replace(/\bstripe_webhook_secret\b/, WEBHOOK_FILE), 2);
  if (err instanceof FailedPreconditionError) throw new Refusal(`${err.reason}: ${err.message}`, 1);
  if (err instanceof BillingError) throw new Refusal(err.message, 1);
  throw err;
}

/** The settings as the CLI shows them (never a secret). */
function shown(s: PaymentSettingsView) {
  return {
    provider: s.provider,
    stripe_secret_key_set: s.stripeSecretKeySet,
    stripe_secret_key_last4: s.stripeSecretKeyLast4,
    stripe_webhook_secret_set: s.stripeWebhookSecretSet,
    stripe_webhook_url: s.stripeWebhookUrl,
  };
}

const setPaymentProvider: Command = {
  positionals: ["name", "provider"],
  flags: { [KEY_FILE]: "value", [WEBHOOK_FILE]: "value" },
  synopsis: `<name> test|stripe [${KEY_FILE} F] [${WEBHOOK_FILE} F]`,
  summary: "the environment's payment provider; Stripe secrets read from files (- for stdin), never argv",
  writes: true,
  run: async (ctx) => {
    const [name, provider] = ctx.positionals as [string, string];
    if (provider !== "test" && provider !== "stripe") throw new Refusal("<provider> must be test or stripe", 2);
    const stripeSecretKey = secretFrom(ctx, KEY_FILE);
    const stripeWebhookSecret = secretFrom(ctx, WEBHOOK_FILE);
    await withMigratedDatabase(ctx.databaseUrl, async (db) => {
      const env = await new SqlAuthStore(db.sql, db.entities).findEnvironmentByName(name);
      if (!env) throw new Refusal(`no environment named ${name}`, 1);
      const after = await settingsOf(ctx, db).update(systemCaller(env.id, env.mode), { provider, stripeSecretKey, stripeWebhookSecret }).catch(refusal);
      const s = shown(after);
      print(ctx, { id: env.id, name: env.name, ...s }, [
        `${env.id}\t${env.name}\tprovider ${s.provider}${s.stripe_secret_key_set ? `\tkey …${s.stripe_secret_key_last4}` : ""}${s.stripe_webhook_secret_set ? "\twebhook secret set" : ""}`,
        ...(provider === "stripe" ? [`Stripe webhook endpoint: ${s.stripe_webhook_url}`] : []),
      ]);
    });
  },
};

const rotate: Command = {
  positionals: [],
  flags: {},
  synopsis: "",
  summary: "re-seals every stored provider secret with SECRETS_ENCRYPTION_KEY (opened with it or _PREVIOUS)",
  writes: true,
  run: (ctx) =>
    withMigratedDatabase(ctx.databaseUrl, async (db) => {
      const done = await settingsOf(ctx, db).rotate().catch(refusal);
      print(ctx, { environments: done.environments, secrets: done.secrets }, [`re-sealed ${done.secrets} secret(s) of ${done.environments} environment(s)`]);
    }),
};

/** The payment commands by their words. */
export const PAYMENT_COMMANDS: Record<string, Command> = {
  "keys env set-payment-provider": setPaymentProvider,
  "secrets rotate": rotate,
};
