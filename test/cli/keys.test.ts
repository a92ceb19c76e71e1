/** The keys CLI against a real database, and the keys it makes against the real server. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import test from "ava";
import { rest } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { startAppOn } from "../helpers/server.js";

const run = promisify(execFile);

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
