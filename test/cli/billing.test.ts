/**
 * The operator CLI (src/cli/billing.ts) as a process against a real database, on MariaDB and on
 * SQLite: migrations (status, up), the service's status, set-aside subscriptions retried now,
 * open invoices voided and marked uncollectible through the domain (and refused when not open),
 * with --json for scripts; and its command line refused with exit code 2 before anything opens.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { parseArgs, run as runCli } from "../../src/cli/billing.js";
import { dbTime } from "../../src/db/raw.js";
import { ok } from "../helpers/clients.js";
import { STORES, createTestDatabase, withDatabase } from "../helpers/db.js";
import { CARD_FAILS_LATER, Scenario } from "../helpers/scenario.js";
import { type TestServer, seedKeys, startAppOn } from "../helpers/server.js";

const run = promisify(execFile);

async function billing(databaseUrl: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, ["--import", "tsx", "src/cli/billing.ts", ...args], { env: { ...process.env, DATABASE_URL: databaseUrl } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
  }
}

/**
 * The same command run in this process (the same `run` the process calls; starting a process
 * costs seconds on a loaded machine): its exit code and what it wrote.
 */
async function cli(databaseUrl: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) }, { DATABASE_URL: databaseUrl });
  return { code, stdout, stderr };
}

/** The JSON a --json command printed, after checking it succeeded. */
async function json(databaseUrl: string, ...args: string[]) {
  const r = await cli(databaseUrl, ...args, "--json");
  if (r.code !== 0) throw new Error(`billing ${args.join(" ")}: exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const refused: [string[], string][] = [
  [[], "no command given"],
  [["frobnicate"], "unknown command: billing frobnicate"],
  [["migrate"], "unknown command: billing migrate"],
  [["migrate", "down"], "unknown command: billing migrate down"],
  [["invoices", "finalise", "inv_1"], "unknown command: billing invoices finalise"],
  [["invoices", "finalize"], "billing invoices finalize needs <invoice_id>"],
  [["invoices", "void"], "billing invoices void needs <invoice_id>"],
  [["invoices", "void", "inv_1", "inv_2"], 'unexpected argument "inv_2" for billing invoices void'],
  [["status", "--jsn"], "unknown flag --jsn for billing status (it takes --json)"],
  [["status", "--json=yes"], "--json takes no value"],
  [["subscriptions", "retry-failed", "--env"], "--env needs a value"],
  [["migrate", "up", "--force"], "unknown flag --force for billing migrate up (it takes --json)"],
];

for (const [args, message] of refused) {
  test(`billing ${args.join(" ") || "(nothing)"}: refused`, (t) => {
    const parsed = parseArgs(args);
    t.true("error" in parsed && parsed.error.startsWith(message), JSON.stringify(parsed));
  });
}

test("a command line it does not understand: the message, the usage, exit 2, and no database opened; --help exits 0", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "billing-cli-"));
  try {
    const file = join(dir, "billing.db");
    for (const [args, shown] of [
      [["invoices", "frob"], /\nusage: billing \[--env-file PATH\] invoices <command> \[--json\]\n {2}invoices finalize/],
      [["status", "--verbose"], /\nusage: billing \[--env-file PATH\] status \[--json\]\n/],
    ] as const) {
      const r = await billing(`sqlite:${file}`, ...args);
      t.is(r.code, 2, r.stderr);
      t.regex(r.stderr, /^unknown (command|flag)/);
      t.regex(r.stderr, shown);
      t.is(r.stdout, "");
    }
    t.false(existsSync(file), "the database was not opened");
    const help = await billing(`sqlite:${file}`, "--help");
    t.is(help.code, 0);
    t.regex(help.stdout, /^usage: billing \[--env-file PATH\] <command>/);
    t.regex(help.stdout, /invoices mark-uncollectible <invoice_id>/);
    const keysHelp = await billing(`sqlite:${file}`, "keys", "--help");
    t.is(keysHelp.code, 0);
    t.regex(keysHelp.stdout, /^usage: billing \[--env-file PATH\] keys <command> \[--json\]\n {2}keys env create/, "the keys commands are reachable through billing keys");
    const alias = await run(process.execPath, ["--import", "tsx", "src/cli/keys.ts", "--help"]);
    t.is(alias.stdout, keysHelp.stdout, "src/cli/keys.ts is billing keys");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("status says when the database cannot be reached (exit 1)", async (t) => {
  // A directory that cannot be made: /dev/null is a file.
  const r = await cli("sqlite:/dev/null/billing.db", "status", "--json");
  t.is(r.code, 1, r.stderr);
  const doc = JSON.parse(r.stdout);
  t.deepEqual(doc.database, { kind: "sqlite", reachable: false });
  t.regex(doc.error, /cannot be reached/);
});

for (const store of STORES) {
  test(`${store}: migrate, status, retry set-aside subscriptions, void and mark invoices uncollectible`, async (t) => {
    const tdb = await createTestDatabase(store);
    const url = tdb.url;
    let app: Awaited<ReturnType<typeof startAppOn>> | undefined;
    let seeded: Awaited<ReturnType<typeof seedKeys>> | undefined;
    try {
      // Given a new database: every migration pending, then applied, then nothing left.
      const before = await json(url, "migrate", "status");
      t.deepEqual(before.applied, []);
      t.true(before.pending.length > 5);
      const status0 = await json(url, "status");
      t.deepEqual(status0.migrations, { applied: 0, pending: before.pending.length });
      t.is(status0.billing, undefined, "no billing counts before the schema exists");
      const invoiceBeforeMigrate = await cli(url, "invoices", "void", "inv_1");
      t.is(invoiceBeforeMigrate.code, 1);
      t.regex(invoiceBeforeMigrate.stderr, /pending migration\(s\).*billing migrate up first/);
      // No command but migrate up applies a migration: each refuses and says how to migrate.
      for (const args of [
        ["keys", "env", "list"],
        ["keys", "list", "--json"],
        ["keys", "env", "create", "acme"],
        ["keys", "create", "--env", "acme"],
        ["subscriptions", "retry-failed"],
      ]) {
        const r = await cli(url, ...args);
        t.is(r.code, 1, args.join(" "));
        t.regex(r.stderr, /the database has \d+ pending migration\(s\) \(.*\), and this command applies none: run billing migrate up first \(npm run billing -- migrate up\)\n$/);
        t.is(r.stdout, "");
      }
      t.deepEqual((await json(url, "migrate", "status")).applied, [], "nothing was migrated");
      t.deepEqual((await json(url, "migrate", "up")).applied, before.pending);
      t.deepEqual(await json(url, "migrate", "status"), { applied: before.pending, pending: [] });
      t.regex((await cli(url, "migrate", "up")).stdout, /nothing to apply/);
      t.deepEqual(await json(url, "status"), {
        version: "0.1.0",
        database: { kind: store, reachable: true },
        migrations: { applied: before.pending.length, pending: 0 },
        billing: { due_cycles: 0, set_aside_subscriptions: 0 },
        webhooks: { pending_deliveries: 0, failing_endpoints: 0 },
      });

      // Open invoices: a card whose charges fail.
      seeded = await seedKeys(url);
      app = await startAppOn(url, { SCHEDULER_INTERVAL_MS: "0" });
      const server = { url: app.url, freshKey: seeded.freshKey } as unknown as TestServer;
      const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
      const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 1000 } } }] });
      await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_FAILS_LATER);
      await s.advance("2026-02-15T00:00:00Z");
      const [a, b] = await s.invoices();
      t.deepEqual([a.status, b.status], ["open", "open"]);

      // The invoice's environment is found from the invoice, or named.
      const voided = await json(url, "invoices", "void", a.id);
      t.like(voided, { id: a.id, status: "void", total: "1000", currency: "USD" });
      t.is((await ok(server, s.key, "GET", `/invoices/${a.id}`)).status, "void");
      const envId = voided.environment_id;
      // As a process, as an operator runs it.
      const marked = await billing(url, "invoices", "mark-uncollectible", b.id, "--env", envId);
      t.is(marked.code, 0, marked.stderr);
      t.regex(marked.stdout, new RegExp(`^${b.id}\\t\\S+\\tuncollectible\\n$`));
      t.is((await ok(server, s.key, "GET", `/invoices/${b.id}`)).status, "uncollectible");
      const again = await cli(url, "invoices", "void", a.id);
      t.is(again.code, 1);
      t.regex(again.stderr, /is void; only an open invoice can become void/);
      const notDraft = await cli(url, "invoices", "finalize", a.id);
      t.is(notDraft.code, 1);
      t.regex(notDraft.stderr, /only a draft can be finalized/);
      const missing = await cli(url, "invoices", "void", "inv_doesnotexist");
      t.is(missing.code, 1);
      t.regex(missing.stderr, /invoice "inv_doesnotexist" not found/);
      const wrongEnv = await cli(url, "invoices", "void", a.id, "--env", "no-such-env");
      t.is(wrongEnv.code, 1);
      t.regex(wrongEnv.stderr, /no environment named or with ID no-such-env/);

      // A draft: the usage invoice of a cycle that closed less than the grace period (1 h) ago.
      const metered = await ok(server, s.key, "POST", "/subjects", { name: "Metered", test_clock_id: s.clockId });
      const metric = await s.metric();
      const usageCard = await s.card({
        usage_based_rates: [{ usage_based_rate_type: "simple", code: "api", name: "API", pricing_metric_id: metric, included_units: 0, price: { amount: { currency_code: "USD", value: 2 } } }],
      });
      await ok(server, s.key, "POST", "/subscriptions", { subject_id: metered.id, rate_card_id: usageCard });
      await ok(server, s.key, "POST", "/usage-events", { idempotency_key: "m1", subject_id: metered.id, event_name: "usage", data: { n: 5 } });
      await s.advance("2026-03-15T00:30:00Z");
      const [draft] = (await ok(server, s.key, "GET", `/invoices?subject_id=${metered.id}`)).invoices;
      t.is(draft?.status, "draft");
      const finalized = await json(url, "invoices", "finalize", draft.id);
      t.like(finalized, { id: draft.id, status: "open", total: "10" }, "finalized now; no card on file, so it stays open");

      // A subscription on real time, set aside (its close failed) with its retry an hour away,
      // and its cycle over: not due until the backoff ends — or the operator ends it.
      const key = await seeded.freshKey("test");
      const subject = await ok(server, key, "POST", "/subjects", { name: "Real time" });
      const free = await ok(server, key, "POST", "/rate-cards", {
        name: "Free",
        billing_interval: "monthly",
        fixed_rates: [{ code: "base", name: "Base", price: { amount: { currency_code: "USD", value: 0 } } }],
      });
      const sub = (await ok(server, key, "POST", "/subscriptions", { subject_id: subject.id, rate_card_id: free.id, fixed_rate_quantities: { base: 1 } })).result.subscription;
      await app.stop();
      app = undefined;
      const now = Date.now();
      await withDatabase(url, (db) =>
        db.dataSource.query("UPDATE subscriptions SET period_end = ?, billing_error = ?, billing_attempts = ?, billing_failed_at = ?, billing_retry_at = ? WHERE id = ?", [
          dbTime(new Date(now - 60_000)),
          "the close failed",
          3,
          dbTime(new Date(now - 30_000)),
          dbTime(new Date(now + 3_600_000)),
          sub.id,
        ]),
      );
      t.deepEqual((await json(url, "status")).billing, { due_cycles: 0, set_aside_subscriptions: 1 });
      t.deepEqual((await json(url, "subscriptions", "retry-failed", "--env", "env-a")).count, 0, "another environment's are left alone");
      const unknown = await cli(url, "subscriptions", "retry-failed", "--subscription", "sub_other");
      t.is(unknown.code, 1);
      t.regex(unknown.stderr, /sub_other is not set aside/);
      const retried = await json(url, "subscriptions", "retry-failed");
      t.deepEqual(retried, { retried: [{ id: sub.id, environment_id: retried.retried[0]?.environment_id, attempts: 3, error: "the close failed" }], count: 1 });
      t.deepEqual((await json(url, "status")).billing, { due_cycles: 1, set_aside_subscriptions: 1 }, "due now; the failure stays visible until a close succeeds");

      // The scheduler closes it on its next run, which clears the failure.
      app = await startAppOn(url, { SCHEDULER_INTERVAL_MS: "200" });
      const deadline = Date.now() + 20_000;
      let closed: { billing_failure?: unknown; current_period?: { start: string } } = {};
      while (Date.now() < deadline) {
        closed = await ok({ url: app.url }, key, "GET", `/subscriptions/${sub.id}`);
        if (!closed.billing_failure) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      t.falsy(closed.billing_failure, JSON.stringify(closed));
      await app.stop();
      app = undefined;
      t.deepEqual((await json(url, "status")).billing, { due_cycles: 0, set_aside_subscriptions: 0 });
    } finally {
      await app?.stop();
      await seeded?.close();
      await tdb.drop();
    }
  });
}
