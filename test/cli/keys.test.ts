/**
 * The keys commands (`billing keys …`, also run as src/cli/keys.ts) against a real database, and
 * the keys they make against the real server; --json on each, exit codes 0 done / 1 refused /
 * 2 usage.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import test from "ava";
import { run as runCli } from "../../src/cli/billing.js";
import { rest } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { startAppOn } from "../helpers/server.js";

const run = promisify(execFile);

/** `billing <args>` in this process (the same `run` the command calls): its exit code and what it wrote. */
async function cli(databaseUrl: string, ...args: string[]) {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) }, { DATABASE_URL: databaseUrl });
  return { code, stdout, stderr };
}

for (const store of STORES) {
  test(`${store}: create an environment and keys, use them, list them, revoke one`, async (t) => {
    const tdb = await createTestDatabase(store);
    const cli = (...args: string[]) => run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", ...args], { env: { ...process.env, DATABASE_URL: tdb.url } });
    const app = await startAppOn(tdb.url);
    try {
      const env = await cli("env", "create", "acme", "--mode", "live");
      t.regex(env.stdout, /^env_\w+\tacme\tlive\n$/);
      const dup = await t.throwsAsync(cli("env", "create", "acme"));
      t.regex(String((dup as { stderr?: string }).stderr), /already exists/);

      const made = await cli("create", "--env", "acme");
      const [idLine, key] = made.stdout.trim().split("\n");
      const keyId = (idLine ?? "").split("\t")[0] as string;
      t.regex(key ?? "", /^sk_live_[0-9A-Za-z]{32}$/);
      const pub = (await cli("create", "--env", "acme", "--publishable")).stdout.trim().split("\n")[1] ?? "";
      t.regex(pub, /^pk_live_/);

      t.is((await rest(app.url, "POST", "/subjects", key, { name: "cli" })).status, 200);
      t.is((await rest(app.url, "GET", "/subjects", pub)).status, 403);

      const listed = (await cli("list", "--env", "acme")).stdout;
      t.true(listed.includes(keyId));
      t.false(listed.includes(key as string), "listing never shows the key itself");
      t.regex(listed, /active/);

      t.regex((await cli("revoke", keyId)).stdout, /revoked/);
      // The server trusts a verified key for API_KEY_CACHE_MS (2 s by default): the revoked key
      // must be refused once that window has passed.
      let status = 0;
      const deadline = Date.now() + 5_000;
      while (Date.now() < deadline && (status = (await rest(app.url, "GET", "/subjects", key)).status) !== 401) {
        await new Promise((r) => setTimeout(r, 100));
      }
      t.is(status, 401);
      t.regex((await cli("list")).stdout, /revoked \d{4}-/);
      await t.throwsAsync(cli("revoke", keyId), undefined, "revoking twice fails");
    } finally {
      await app.stop();
      await tdb.drop();
    }
  });

  test(`${store}: BILLING_BOOTSTRAP_API_KEY is ensured at start, once, across restarts`, async (t) => {
    const tdb = await createTestDatabase(store);
    const key = "sk_test_bootstrapbootstrap000001";
    try {
      for (let i = 0; i < 2; i++) {
        const app = await startAppOn(tdb.url, { BILLING_BOOTSTRAP_API_KEY: key });
        t.is((await rest(app.url, "GET", "/subjects", key)).status, 200);
        await app.stop();
      }
      const listed = (await run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", "list"], { env: { ...process.env, DATABASE_URL: tdb.url } })).stdout.trim().split("\n");
      t.is(listed.length, 1);
      t.regex(listed[0] ?? "", /secret\tdefault\tsk_test_boot…\tactive/);
    } finally {
      await tdb.drop();
    }
  });
}

for (const store of STORES) {
  test(`${store}: every keys command with --json, flags in either form, and its exit codes`, async (t) => {
    const tdb = await createTestDatabase(store);
    const url = tdb.url;
    const json = async (...args: string[]) => {
      const r = await cli(url, ...args, "--json");
      t.is(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
      return JSON.parse(r.stdout);
    };
    try {
      t.is((await cli(url, "migrate", "up")).code, 0);
      const env = await json("keys", "env", "create", "acme", "--mode=live");
      t.like(env, { name: "acme", mode: "live" });
      t.regex(env.id, /^env_\w+$/);
      t.is((await cli(url, "keys", "env", "create", "acme")).code, 1, "already exists: refused");
      t.is((await cli(url, "keys", "env", "create", "beta", "--mode", "prod")).code, 2, "a bad --mode: usage");
      const listed = await json("keys", "env", "list");
      t.deepEqual(
        listed.environments.map((e: { name: string }) => e.name),
        ["acme"],
      );
      t.like(listed.environments[0], { id: env.id, mode: "live", ingest_rps: null, api_rps: null });
      t.deepEqual(await json("keys", "env", "set-limits", "acme", "--api-rps", "50", "--ingest-rps=0"), { id: env.id, name: "acme", ingest_rps: 0, api_rps: 50 });
      t.deepEqual(await json("keys", "env", "set-invoice-grace", "acme", "7200"), { id: env.id, name: "acme", invoice_grace_seconds: 7200 });
      t.deepEqual(await json("keys", "env", "set-invoice-prefix", "acme", "ACME-2026"), { id: env.id, name: "acme", invoice_prefix: "ACME-2026" });
      t.is((await cli(url, "keys", "env", "set-invoice-prefix", "acme", "acme")).code, 2, "a lower-case prefix: usage");
      t.is((await cli(url, "keys", "env", "set-invoice-prefix", "nope", "X")).code, 1, "no such environment: refused");
      t.is((await cli(url, "keys", "env", "set-limits", "nope", "--api-rps", "1")).code, 1, "no such environment: refused");
      t.is((await cli(url, "keys", "env", "set-limits", "acme")).code, 2, "neither rate: usage");

      const made = await json("keys", "create", "--publishable", "--env", "acme");
      t.like(made, { kind: "publishable", environment: "acme" });
      t.regex(made.key, /^pk_live_/);
      const text = await cli(url, "keys", "create", "--env=acme");
      t.is(text.code, 0, text.stderr);
      t.regex(text.stdout, /^key_\w+\tsecret\tacme\nsk_live_\w+\n$/);
      t.regex(text.stderr, /This key is shown once/);
      t.is((await cli(url, "keys", "create", "--env", "nope")).code, 1);
      t.is((await cli(url, "keys", "create")).code, 2, "no --env: usage");

      const keys = (await json("keys", "list", "--env=acme")).keys;
      t.is(keys.length, 2);
      t.like(
        keys.find((k: { id: string }) => k.id === made.id),
        { kind: "publishable", environment: "acme", prefix: made.key.slice(0, 12), revoked_at: null },
      );
      t.false(JSON.stringify(keys).includes(made.key), "a listing never shows the key itself");
      const revoked = await json("keys", "revoke", made.id);
      t.is(revoked.id, made.id);
      t.regex(revoked.revoked_at, /^\d{4}-\d\d-\d\dT/);
      t.is((await cli(url, "keys", "revoke", made.id)).code, 1, "revoking twice: refused");
      t.regex((await cli(url, "keys", "list")).stdout, /\tpublishable\tacme\tpk_live_\w+…\trevoked \d{4}-/);
    } finally {
      await tdb.drop();
    }
  });
}
