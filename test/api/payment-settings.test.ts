/**
 * Payment settings (DESIGN §16) through the real server on both stores: the defaults; an update
 * read back, its secrets never in any answer (only stripe_secret_key_last4); every validation
 * error with its field path, nothing written; a live environment refuses the test provider and
 * test keys; without SECRETS_ENCRYPTION_KEY a secret is refused (SECRETS_KEY_MISSING); the value
 * stored is sealed, not the secret; the CLI sets a provider from files and a key rotation
 * re-seals every secret (still opening); gRPC, gRPC-Web and Connect answer as REST does.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, type ConnectError } from "@connectrpc/connect";
import test from "ava";
import { keyId, open } from "../../src/billing/payments/secret-box.js";
import { run as runCli } from "../../src/cli/billing.js";
import { PaymentSettingsService } from "../../src/gen/billing/v1/payment_settings_service_pb.js";
import { PROTOCOLS, reasonOf, rest, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES, createTestDatabase, withDatabase } from "../helpers/db.js";
import { startAppOn, useServer } from "../helpers/server.js";

const K1 = randomBytes(32);
const K2 = randomBytes(32);
const SK_TEST = `sk_test_${"51Hx".repeat(6)}AbCd`;
const SK_LIVE = `sk_live_${"51Hx".repeat(6)}LiVe`;
const WHSEC = `whsec_${"q1w2e3r4".repeat(4)}`;

/** The environment id a key belongs to, from its settings' webhook URL. */
const envOf = (settings: { stripe_webhook_url: string }) => settings.stripe_webhook_url.split("/").pop() as string;

async function storedRow(url: string, environmentId: string): Promise<Record<string, unknown>> {
  return withDatabase(url, async (db) => {
    const rows = (await db.sql.run((em) => em.query("SELECT * FROM payment_settings WHERE environment_id = ?", [environmentId]))) as Record<string, unknown>[];
    return rows[0] ?? {};
  });
}

for (const store of STORES) {
  const server = useServer(store, { SECRETS_ENCRYPTION_KEY: K1.toString("base64") });
  const keyless = useServer(store);

  test(`${store}: the defaults: the test provider, no secrets, retries after 3, 5 and 7 days, leave_active`, async (t) => {
    const key = await server.freshKey();
    const r = await rest(server.url, "GET", "/payment-settings", key);
    t.is(r.status, 200);
    t.deepEqual(r.body, {
      provider: "test",
      stripe_secret_key_set: false,
      stripe_secret_key_last4: null,
      stripe_webhook_secret_set: false,
      stripe_webhook_url: `${server.url.replace("127.0.0.1", "localhost")}/providers/stripe/webhooks/${envOf(r.body)}`,
      retry_schedule_days: [3, 5, 7],
      after_last_attempt: "leave_active",
      mark_uncollectible: false,
    });
    t.regex(envOf(r.body), /^env_/);
    const live = await rest(server.url, "GET", "/payment-settings", await server.freshKey("live"));
    t.is(live.body.provider, "", "a live environment has no provider until it chooses Stripe");
  });

  test(`${store}: an update is read back; secrets never in any answer, only the key's last 4; the row holds them sealed`, async (t) => {
    const key = await server.freshKey();
    const body = { provider: "stripe", stripe_secret_key: SK_TEST, stripe_webhook_secret: WHSEC, retry_schedule_days: [1, 2, 10, 60], after_last_attempt: "cancel", mark_uncollectible: true };
    const r = await rest(server.url, "PATCH", "/payment-settings", key, body);
    t.is(r.status, 200, JSON.stringify(r.body));
    const want = {
      provider: "stripe",
      stripe_secret_key_set: true,
      stripe_secret_key_last4: "AbCd",
      stripe_webhook_secret_set: true,
      retry_schedule_days: [1, 2, 10, 60],
      after_last_attempt: "cancel",
      mark_uncollectible: true,
    };
    t.like(r.body, want);
    const got = await rest(server.url, "GET", "/payment-settings", key);
    t.deepEqual(got.body, r.body);
    for (const answer of [r, got]) {
      const text = JSON.stringify(answer.body);
      t.false(text.includes(SK_TEST) || text.includes(WHSEC) || text.includes(SK_TEST.slice(8, 20)), "no secret in an answer");
    }
    // Fields left out are unchanged; "" removes the webhook secret.
    const partial = await rest(server.url, "PATCH", "/payment-settings", key, { stripe_webhook_secret: "", mark_uncollectible: false });
    t.like(partial.body, { ...want, stripe_webhook_secret_set: false, mark_uncollectible: false });
    // An empty schedule (no retries) needs set_retry_schedule.
    t.deepEqual((await rest(server.url, "PATCH", "/payment-settings", key, { retry_schedule_days: [], set_retry_schedule: true })).body.retry_schedule_days, []);

    const row = await storedRow(server.db.url, envOf(r.body));
    const sealed = String(row.stripe_secret_key_sealed);
    t.not(sealed, SK_TEST);
    t.false(JSON.stringify(row).includes(SK_TEST), "the row never holds the secret in clear");
    t.regex(sealed, new RegExp(`^v1\\.${keyId(K1)}\\.`));
    t.is(open(sealed, { current: K1 }), SK_TEST, "the sealed value opens with the server's key");
    t.is(row.stripe_webhook_secret_sealed, null);
  });

  test(`${store}: every bad field is named (400 invalid_argument) and nothing is written`, async (t) => {
    const key = await server.freshKey();
    const before = (await rest(server.url, "GET", "/payment-settings", key)).body;
    const cases: [unknown, string[]][] = [
      [{ provider: "paypal" }, ["provider"]],
      [{ provider: "stripe" }, ["provider"]],
      [{ stripe_secret_key: SK_LIVE }, ["stripe_secret_key"]],
      [{ stripe_secret_key: "pk_test_abcdefghijkl" }, ["stripe_secret_key"]],
      [{ stripe_webhook_secret: "secret" }, ["stripe_webhook_secret"]],
      [{ retry_schedule_days: [0, 61] }, ["retry_schedule_days[0]", "retry_schedule_days[1]"]],
      [{ retry_schedule_days: [3, 3, 2] }, ["retry_schedule_days[1]", "retry_schedule_days[2]"]],
      [{ retry_schedule_days: [1, 2, 3, 4, 5, 6, 7, 8, 9] }, ["retry_schedule_days"]],
      [{ after_last_attempt: "delete" }, ["after_last_attempt"]],
      [{ provider: "paypal", after_last_attempt: "x", stripe_webhook_secret: "y" }, ["provider", "stripe_webhook_secret", "after_last_attempt"]],
    ];
    for (const [body, fields] of cases) {
      const r = await rest(server.url, "PATCH", "/payment-settings", key, body);
      t.is(r.status, 400, JSON.stringify(body));
      t.is(r.body.code, "invalid_argument");
      t.deepEqual(violatedFields(r.body), fields, JSON.stringify(body));
      t.false(JSON.stringify(r.body).includes(SK_LIVE), "a refusal never echoes the key");
    }
    t.deepEqual((await rest(server.url, "GET", "/payment-settings", key)).body, before, "nothing written");
    // Stripe chosen: its key cannot be removed.
    t.is((await rest(server.url, "PATCH", "/payment-settings", key, { provider: "stripe", stripe_secret_key: SK_TEST })).status, 200);
    const removed = await rest(server.url, "PATCH", "/payment-settings", key, { stripe_secret_key: "" });
    t.deepEqual(violatedFields(removed.body), ["stripe_secret_key"]);
    t.is((await rest(server.url, "PATCH", "/payment-settings", key, { provider: "test", stripe_secret_key: "" })).body.stripe_secret_key_set, false);
  });

  test(`${store}: a live environment refuses the test provider and test keys, takes live ones`, async (t) => {
    const key = await server.freshKey("live");
    const test1 = await rest(server.url, "PATCH", "/payment-settings", key, { provider: "test" });
    t.deepEqual([test1.status, violatedFields(test1.body)], [400, ["provider"]]);
    const test2 = await rest(server.url, "PATCH", "/payment-settings", key, { provider: "stripe", stripe_secret_key: SK_TEST });
    t.deepEqual([test2.status, violatedFields(test2.body)], [400, ["stripe_secret_key"]]);
    t.regex(test2.body.message, /sk_live_/);
    const rk = await rest(server.url, "PATCH", "/payment-settings", key, { provider: "stripe", stripe_secret_key: `rk_live_${"x".repeat(20)}` });
    t.is(rk.status, 200, JSON.stringify(rk.body));
    const live = await rest(server.url, "PATCH", "/payment-settings", key, { stripe_secret_key: SK_LIVE, retry_schedule_days: [2] });
    t.like(live.body, { provider: "stripe", stripe_secret_key_last4: "LiVe", retry_schedule_days: [2] });
  });

  test(`${store}: without SECRETS_ENCRYPTION_KEY a secret is refused (SECRETS_KEY_MISSING); other settings still change`, async (t) => {
    const key = await keyless.freshKey();
    for (const body of [{ stripe_secret_key: SK_TEST }, { stripe_webhook_secret: WHSEC }]) {
      const r = await rest(keyless.url, "PATCH", "/payment-settings", key, body);
      t.is(r.status, 400);
      t.is(r.body.code, "failed_precondition");
      t.is(reasonOf(r.body), "SECRETS_KEY_MISSING");
      t.regex(r.body.message, /SECRETS_ENCRYPTION_KEY/);
    }
    const other = await rest(keyless.url, "PATCH", "/payment-settings", key, { after_last_attempt: "pause" });
    t.like(other.body, { provider: "test", stripe_secret_key_set: false, after_last_attempt: "pause" });
  });

  test(`${store}: gRPC, gRPC-Web and Connect answer as REST does`, async (t) => {
    const key = await server.freshKey();
    await rest(server.url, "PATCH", "/payment-settings", key, { provider: "stripe", stripe_secret_key: SK_TEST, retry_schedule_days: [4, 9] });
    const viaRest = (await rest(server.url, "GET", "/payment-settings", key)).body;
    for (const protocol of PROTOCOLS) {
      const client = rpcClient(PaymentSettingsService, server.url, protocol, key);
      const got = (await client.getPaymentSettings({})).paymentSettings;
      t.like(got, { provider: "stripe", stripeSecretKeySet: true, stripeSecretKeyLast4: "AbCd", stripeWebhookUrl: viaRest.stripe_webhook_url, retryScheduleDays: [4, 9] }, protocol);
      const updated = (await client.updatePaymentSettings({ afterLastAttempt: "cancel", retryScheduleDays: [], setRetrySchedule: false })).paymentSettings;
      t.like(updated, { afterLastAttempt: "cancel", retryScheduleDays: [4, 9] }, protocol);
      const err = await t.throwsAsync(client.updatePaymentSettings({ provider: "test", retryScheduleDays: [9, 4] }));
      t.is((err as ConnectError).code, Code.InvalidArgument, protocol);
      t.regex((err as ConnectError).rawMessage, /retry_schedule_days\[1\]/, protocol);
    }
  });
}

for (const store of STORES) {
  test(`${store}: the CLI sets a provider from files and a rotation re-seals every secret, which still opens`, async (t) => {
    const tdb = await createTestDatabase(store);
    const app = await startAppOn(tdb.url, { SECRETS_ENCRYPTION_KEY: K1.toString("hex") });
    const dir = mkdtempSync(join(tmpdir(), "billing-secrets-"));
    try {
      const cli = async (env: Record<string, string>, ...args: string[]) => {
        let stdout = "";
        let stderr = "";
        const code = await runCli(args, { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) }, { DATABASE_URL: tdb.url, ...env });
        return { code, stdout, stderr, json: code === 0 && args.includes("--json") ? JSON.parse(stdout) : undefined };
      };
      const old = { SECRETS_ENCRYPTION_KEY: K1.toString("hex") };
      const env = (await cli(old, "keys", "env", "create", "acme", "--json")).json;
      writeFileSync(join(dir, "sk"), `${SK_TEST}\n`);
      writeFileSync(join(dir, "wh"), WHSEC);
      t.is((await cli({}, "keys", "env", "set-payment-provider", "acme", "stripe", "--stripe-secret-key-file", join(dir, "sk"))).code, 1, "no key configured: refused");
      t.is((await cli(old, "keys", "env", "set-payment-provider", "acme", "stripe")).code, 2, "stripe without a key: the command line's fault");
      t.is((await cli(old, "keys", "env", "set-payment-provider", "acme", "paypal")).code, 2);
      const set = await cli(old, "keys", "env", "set-payment-provider", "acme", "stripe", "--stripe-secret-key-file", join(dir, "sk"), "--stripe-webhook-secret-file", join(dir, "wh"), "--json");
      t.is(set.code, 0, set.stderr);
      t.like(set.json, { id: env.id, provider: "stripe", stripe_secret_key_set: true, stripe_secret_key_last4: "AbCd", stripe_webhook_secret_set: true });
      t.false((set.stdout + set.stderr).includes(SK_TEST) || (set.stdout + set.stderr).includes(WHSEC), "never printed");
      const before = await storedRow(tdb.url, env.id);
      t.is(open(String(before.stripe_secret_key_sealed), { current: K1 }), SK_TEST, "the line end is not part of the key");

      const rotated = await cli({ SECRETS_ENCRYPTION_KEY: K2.toString("base64"), SECRETS_ENCRYPTION_KEY_PREVIOUS: K1.toString("hex") }, "secrets", "rotate", "--json");
      t.is(rotated.code, 0, rotated.stderr);
      t.deepEqual(rotated.json, { environments: 1, secrets: 2 });
      const after = await storedRow(tdb.url, env.id);
      for (const [column, secret] of [
        ["stripe_secret_key_sealed", SK_TEST],
        ["stripe_webhook_secret_sealed", WHSEC],
      ] as const) {
        t.regex(String(after[column]), new RegExp(`^v1\\.${keyId(K2)}\\.`), column);
        t.is(open(String(after[column]), { current: K2 }), secret, `${column} opens with the new key alone`);
      }
      // Run again: everything is sealed with the new key already; without the old key it still works.
      t.deepEqual((await cli({ SECRETS_ENCRYPTION_KEY: K2.toString("hex") }, "secrets", "rotate", "--json")).json, { environments: 1, secrets: 2 });
      t.is((await cli({ SECRETS_ENCRYPTION_KEY: randomBytes(32).toString("hex") }, "secrets", "rotate")).code, 1, "a key that opens nothing: refused");
      t.is((await cli({}, "secrets", "rotate")).code, 1, "no key: refused");
    } finally {
      await app.stop();
      await tdb.drop();
    }
  });
}
