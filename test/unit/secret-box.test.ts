/**
 * Sealing provider secrets (src/billing/payments/secret-box.ts, DESIGN §16), table-driven: a
 * round trip opens what was sealed; an altered text, a text sealed by an unknown key and a
 * malformed text are refused; the previous key still opens what it sealed; the sealed text never
 * contains the secret; and the configured key's forms (hex, base64) are read, others refused.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { SecretOpenError, keyId, needsReseal, open, parseSecretsKey, seal, sealedKeyId } from "../../src/billing/payments/secret-box.js";
import { ConfigError, loadConfig } from "../../src/config.js";
import { createLogger, redactSecrets } from "../../src/log.js";

const K1 = randomBytes(32);
const K2 = randomBytes(32);
const K3 = randomBytes(32);
const SECRETS = ["sk_test_51AbCdEfGhIjKlMnOpQrStUvWx", "whsec_0123456789abcdef", "", "ünïcödé ✓ secret", "x".repeat(500)];

for (const secret of SECRETS) {
  test(`round trip: ${JSON.stringify(secret.slice(0, 20))} opens with the key that sealed it`, (t) => {
    const sealed = seal(secret, K1);
    t.is(open(sealed, { current: K1 }), secret);
    t.regex(sealed, /^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/);
    t.is(sealedKeyId(sealed), keyId(K1));
    if (secret.length >= 4) t.false(sealed.includes(secret), "the sealed text never contains the secret");
    t.false(sealed.includes(Buffer.from(secret).toString("base64url")) && secret.length >= 4);
    t.not(seal(secret, K1), sealed, "a fresh nonce each time");
  });
}

/** Ways to alter a sealed text, each refused. */
const TAMPERS: [string, (s: string) => string][] = [
  ["a flipped ciphertext character", (s) => s.slice(0, -3) + (s.at(-3) === "A" ? "B" : "A") + s.slice(-2)],
  [
    "a changed nonce",
    (s) =>
      s
        .split(".")
        .map((p, i) => (i === 2 ? randomBytes(12).toString("base64url") : p))
        .join("."),
  ],
  ["a cut tag", (s) => s.slice(0, -4)],
  ["another version", (s) => `v2${s.slice(2)}`],
  ["a missing part", (s) => s.split(".").slice(0, 3).join(".")],
  ["not sealed at all", () => "sk_test_plaintext"],
];

for (const [name, tamper] of TAMPERS) {
  test(`tamper: ${name} is refused`, (t) => {
    const sealed = seal("sk_test_abcdefgh12345678", K1);
    t.throws(() => open(tamper(sealed), { current: K1 }), { instanceOf: SecretOpenError });
  });
}

const KEYS: [string, { current: Buffer; previous?: Buffer }, boolean][] = [
  ["the current key", { current: K1 }, true],
  ["the previous key (rotation)", { current: K2, previous: K1 }, true],
  ["another key", { current: K2 }, false],
  ["two other keys", { current: K2, previous: K3 }, false],
];

for (const [name, keys, opens] of KEYS) {
  test(`sealed with K1, opened with ${name}: ${opens ? "opens" : "refused"}`, (t) => {
    const sealed = seal("whsec_rotation", K1);
    if (opens) t.is(open(sealed, keys), "whsec_rotation");
    else t.throws(() => open(sealed, keys), { instanceOf: SecretOpenError, message: new RegExp(keyId(K1)) });
  });
}

test("a rotation re-seals what the previous key sealed, and only that", (t) => {
  const old = seal("sk_live_x", K1);
  const keys = { current: K2, previous: K1 };
  t.true(needsReseal(old, keys));
  const resealed = seal(open(old, keys), keys.current);
  t.false(needsReseal(resealed, keys));
  t.is(open(resealed, { current: K2 }), "sk_live_x");
});

const KEY_TEXTS: [string, string, boolean][] = [
  ["64 hex digits", K1.toString("hex"), true],
  ["base64", K1.toString("base64"), true],
  ["base64url", K1.toString("base64url"), true],
  ["31 bytes of base64", randomBytes(31).toString("base64"), false],
  ["63 hex digits", K1.toString("hex").slice(1), false],
  ["a passphrase", "correct horse battery staple", false],
];

for (const [name, text, ok] of KEY_TEXTS) {
  test(`SECRETS_ENCRYPTION_KEY as ${name}: ${ok ? "read" : "refused, named, not shown"}`, (t) => {
    if (ok) {
      t.deepEqual(parseSecretsKey(text), K1);
      t.deepEqual(loadConfig({ SECRETS_ENCRYPTION_KEY: text }).secrets?.current, K1);
    } else {
      t.is(parseSecretsKey(text), undefined);
      const err = t.throws(() => loadConfig({ SECRETS_ENCRYPTION_KEY_PREVIOUS: K2.toString("hex"), SECRETS_ENCRYPTION_KEY: text }), { instanceOf: ConfigError });
      t.regex(err?.message ?? "", /SECRETS_ENCRYPTION_KEY must be 32 bytes/);
      t.false(err?.message.includes(text));
    }
  });
}

test("no SECRETS_ENCRYPTION_KEY: no secrets; a PREVIOUS without it is a problem", (t) => {
  t.is(loadConfig({}).secrets, undefined);
  const err = t.throws(() => loadConfig({ SECRETS_ENCRYPTION_KEY_PREVIOUS: K1.toString("hex") }), { instanceOf: ConfigError });
  t.regex(err?.message ?? "", /SECRETS_ENCRYPTION_KEY_PREVIOUS is set but SECRETS_ENCRYPTION_KEY is not/);
  const both = loadConfig({ SECRETS_ENCRYPTION_KEY: K2.toString("hex"), SECRETS_ENCRYPTION_KEY_PREVIOUS: K1.toString("base64") }).secrets;
  t.deepEqual([both?.current, both?.previous], [K2, K1]);
});

test("the logger masks anything shaped like a secret, whatever field carries it; display prefixes stay", (t) => {
  const lines: string[] = [];
  const log = createLogger("debug", (l) => lines.push(l));
  log.error("stripe refused", { err: new Error(`Invalid API Key provided: sk_live_${"a1".repeat(12)}`), body: { stripe_webhook_secret: "whsec_abcdefgh12345678", k: "rk_test_ABCDEFGH1234" } });
  log.info("signed in", { key: "sk_test_AbCd" });
  t.false(/sk_live_a1|whsec_abcdefgh|rk_test_ABCDEFGH/.test(lines.join("")), lines.join(""));
  t.regex(lines[0] ?? "", /sk_live_…/);
  t.regex(lines[1] ?? "", /"sk_test_AbCd"/);
  t.is(redactSecrets("whsec_0123456789 and sk_test_51HxYz0123456789"), "whsec_… and sk_test_…");
});
