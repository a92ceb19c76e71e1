/**
 * Each environment's payment provider (src/billing/subscriptions/payments.ts forEnvironment,
 * DESIGN §16), over fake settings: no row gives the test provider to a test environment and none
 * to a live one; "stripe" builds the provider with the environment's key through the factory,
 * once, kept for the TTL and rebuilt on a new key; an invalidation is seen at once; and a test
 * provider never serves a live environment, whatever the settings or the factory say.
 */
import test from "ava";
import type { ProviderSettings } from "../../src/billing/payments/settings.js";
import { defaultPaymentSettings } from "../../src/billing/payments/types.js";
import { PaymentProviders, builtInPaymentProviders } from "../../src/billing/subscriptions/payments.js";
import { TestPaymentProvider } from "../../src/billing/subscriptions/test-provider.js";
import type { PaymentProvider } from "../../src/billing/subscriptions/types.js";

function fakeStripe(secretKey: string, environmentId: string): PaymentProvider & { secretKey: string; environmentId: string } {
  return {
    test: false,
    kind: "stripe",
    secretKey,
    environmentId,
    tokenize: () => ({ ok: false, message: "Stripe takes cards on its own page" }),
    charge: async () => ({ ok: true }),
    refund: async () => ({ ok: true, refundId: "re_1" }),
  };
}

/** Providers over settings held in a map, with a clock and a count of reads and builds. */
function world() {
  const rows = new Map<string, { provider: "test" | "stripe"; key: string | null }>();
  let reads = 0;
  const built: string[] = [];
  let clock = 0;
  const providers = builtInPaymentProviders().configure({
    settings: {
      providerOf: async (env): Promise<ProviderSettings | undefined> => {
        reads++;
        const r = rows.get(env);
        return r && { provider: r.provider, stripeSecretKey: r.key, stripeWebhookSecret: null, settings: { ...defaultPaymentSettings(env, new Date(0)), provider: r.provider } };
      },
    },
    stripe: (key, env) => {
      built.push(`${env}:${key}`);
      return fakeStripe(key, env);
    },
    ttlMs: 1000,
    now: () => clock,
  });
  return { providers, rows, built, reads: () => reads, tick: (ms: number) => (clock += ms) };
}

test("no settings: the test provider for a test environment, none for a live one", async (t) => {
  const w = world();
  t.true((await w.providers.forEnvironment("env_t", "test"))?.test);
  t.is(await w.providers.forEnvironment("env_l", "live"), undefined);
});

test("stripe: built through the factory with the environment's key, once per key, kept for the TTL", async (t) => {
  const w = world();
  w.rows.set("env_s", { provider: "stripe", key: "sk_test_one" });
  const first = (await w.providers.forEnvironment("env_s", "test")) as ReturnType<typeof fakeStripe>;
  t.like(first, { kind: "stripe", secretKey: "sk_test_one", environmentId: "env_s" });
  t.is(await w.providers.forEnvironment("env_s", "test"), first);
  t.is(w.reads(), 1, "read once within the TTL");
  w.tick(1001);
  t.is(await w.providers.forEnvironment("env_s", "test"), first, "read again after the TTL; the same key keeps the same client");
  t.is(w.reads(), 2);
  w.rows.set("env_s", { provider: "stripe", key: "sk_test_two" });
  t.is(await w.providers.forEnvironment("env_s", "test"), first, "another server's change is seen after the TTL, not before");
  w.providers.invalidate("env_s");
  t.like(await w.providers.forEnvironment("env_s", "test"), { secretKey: "sk_test_two" });
  t.deepEqual(w.built, ["env_s:sk_test_one", "env_s:sk_test_two"]);
});

test("a test provider never serves a live environment: not from its settings, not from the factory", async (t) => {
  const w = world();
  w.rows.set("env_l", { provider: "test", key: null });
  t.is(await w.providers.forEnvironment("env_l", "live"), undefined);
  const sneaky = builtInPaymentProviders().configure({
    settings: { providerOf: async (env) => ({ provider: "stripe", stripeSecretKey: "sk_live_x", stripeWebhookSecret: null, settings: defaultPaymentSettings(env, new Date(0)) }) },
    stripe: () => new TestPaymentProvider(),
  });
  t.is(await sneaky.forEnvironment("env_l", "live"), undefined);
  t.throws(() => new PaymentProviders({ live: new TestPaymentProvider() }), { message: /cannot serve live/ });
});

test("stripe chosen without a key (removed meanwhile) gives no provider; back to test gives the test cards", async (t) => {
  const w = world();
  w.rows.set("env_t", { provider: "stripe", key: null });
  t.is(await w.providers.forEnvironment("env_t", "test"), undefined);
  w.rows.set("env_t", { provider: "test", key: null });
  w.providers.invalidate("env_t");
  t.true((await w.providers.forEnvironment("env_t", "test"))?.test);
});

test("without per-environment settings (tests, tools) the provider is the mode's", async (t) => {
  const p = builtInPaymentProviders();
  t.true((await p.forEnvironment("env_x", "test"))?.test);
  t.is(await p.forEnvironment("env_x", "live"), undefined);
});
