/**
 * Sharding readiness (issue 37, DESIGN §1): `environment_id` is a valid sharding key. With the
 * SQL audit on (src/db/sql-audit.ts), a representative workload runs through the real server on a
 * port on MariaDB, in five environments at once: subjects, metrics, rate cards, subscriptions
 * through a paid checkout, usage (batch and single), billing state, clock advances and the
 * invoices they make, credit notes, coupons, credit grants, webhooks delivered to a receiver, the
 * customer portal and hosted invoice pages (workload); taxes, catalogs, pause and resume, a
 * rate-card change, timelines, summaries, settings, voids, archives (moreWorkload); and in two
 * more, real-time cycles closed by one scheduler run (realTimeCloses). Then every distinct statement on a tenant table (one
 * with an `environment_id` column, read from information_schema) must filter by
 * `environment_id` in its WHERE/ON (or write it, for an INSERT), once per tenant table it names,
 * and must have bound an environment ID on every run; and no transaction may have bound two
 * environments. The few scans that by design cover every environment are in ALLOWED below, each
 * with its reason.
 */
import mysql from "mysql2/promise";
import test from "ava";
import { SqlAudit, normalizeSql, startSqlAudit, stopSqlAudit } from "../../src/db/sql-audit.js";
import { seats, simple, usd } from "../helpers/catalog-bodies.js";
import { mysqlOnly } from "../helpers/mysql-only.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";
import { CARD_OK, Scenario } from "../helpers/scenario.js";
import { type TestServer, startTestServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

const FAST = { WEBHOOK_ALLOW_PRIVATE_HOSTS: "true", WEBHOOK_DELIVERY_INTERVAL_MS: "50", WEBHOOK_RETRY_BASE_MS: "100", WEBHOOK_RETRY_WINDOW_SECONDS: "2", WEBHOOK_TIMEOUT_MS: "2000" };

/**
 * Statements that by design read or write across environments, matched by a fragment of their
 * normalized text, each with why that is right under a sharded placement. Under a
 * cluster-per-environment placement each cluster runs its own servers and so its own scans; on
 * Vitess each is a scatter query over the shards (or, for a lookup by a secret token, a lookup
 * vindex from the token to `environment_id`).
 */
const ALLOWED: readonly { match: RegExp; reason: string }[] = [
  {
    match:
      /^SELECT id, environment_id, event_name, dimensions, aggregation_type, value_field FROM pricing_metrics( WHERE aggregation_type = \?)?$|^UPDATE invoices SET amount_due = total$|^INSERT INTO invoice_sequences \(environment_id, kind, last_number\) SELECT id, \? FROM environments|^UPDATE credit_ledger l JOIN credit_notes n ON n\.environment_id = l\.environment_id AND n\.(id = l\.invoice_id|credit_grant_id = l\.grant_id) SET |^UPDATE credit_notes SET refund_status = \? WHERE outcome = \?$|^UPDATE invoices SET (voided_at|marked_uncollectible_at) = updated_at WHERE status = \?$/,
    reason: "migrations (data backfills): run once per database at start, so once per cluster, or per shard by Vitess's schema tooling",
  },
  {
    match: /FROM api_keys k JOIN environments e ON e\.id = k\.environment_id WHERE k\.key_hash = \?$/,
    reason: "the API key is what names the environment: on Vitess a lookup vindex key_hash → environment_id; per-cluster placement routes by a directory of keys",
  },
  {
    match:
      /FROM (checkout_sessions Checkout WHERE \(\(Checkout\.token|customer_portal_sessions PortalSession WHERE \(\(PortalSession\.token|invoices Invoice WHERE \(\(Invoice\.hosted_token) = \?\)\)/,
    reason:
      "hosted pages are found by their secret token alone (the URL names no environment): a lookup vindex token → environment_id on Vitess; the rest of the page's work binds the environment the session names",
  },
  {
    match:
      /^SELECT .* FROM (subscriptions s WHERE s\.status = \? AND (s\.period_end <=? \?|s\.resumes_at <= \?|s\.id > \?|s\.test_clock_id (= \?|IS NULL) AND \(s\.usage_checked_at|s\.test_clock_id = \? ORDER BY s\.usage_checked_at)|subscription_timelines t WHERE t\.status IN \(\?\) AND t\.next_transition_at IS NOT NULL|credit_grants CreditGrant WHERE \(\(CreditGrant\.status IN \(\?\)\) AND \(CreditGrant\.expires_at <= \?\)|invoices i WHERE i\.status = \? AND i\.finalizes_at <= \?|invoices WHERE status (= \?|IN \(\?\)) AND next_payment_attempt IS NOT NULL AND next_payment_attempt <= \?)|^SELECT DISTINCT x\.environment_id, x\.subject_id FROM \( SELECT environment_id, subject_id FROM credit_settings UNION|^SELECT i\.id, i\.environment_id, i\.subject_id FROM invoices i JOIN subjects s ON s\.environment_id = i\.environment_id AND s\.id = i\.subject_id WHERE i\.status = \? AND i\.next_payment_attempt IS NULL AND i\.attempt_count = \?/,
    reason:
      "the scheduler's due-work scans (cycle closes, resumes, usage and threshold checks, timeline transitions, grant expiry, draft finalization, payment retries and first charges never planned, cancels of an ended invoice's waiting payment, credit alerts): plain reads that return each row's environment; each item is then claimed and written in a transaction of its own environment. Per cluster placement each cluster runs its own scheduler; on Vitess each is a scatter query over the shards",
  },
  {
    match: /^SELECT .* FROM checkout_sessions c WHERE c\.status = ('open'|\?) AND c\.expires_at <= \?/,
    reason:
      "the scheduler's due-work scans (open checkouts past their expiry): a plain read that returns each checkout's environment; each is then locked, marked expired and its purchase ended in a transaction of its own environment. Per cluster placement each cluster runs its own scheduler; on Vitess a scatter query over the shards",
  },
  {
    match: /^SELECT id, environment_id, name, frozen_time, created_at, status, advance_started_at FROM test_clocks WHERE status = \? AND advance_started_at <= \?/,
    reason:
      "the scheduler's due-work scans (test clock advances cut short, past their lease): a plain read that returns each clock's environment; each is then taken over and run with statements of its own environment. Per cluster placement each cluster runs its own scheduler; on Vitess a scatter query over the shards",
  },
  {
    match:
      /^SELECT environment_id FROM events WHERE fanout = \? ORDER BY seq LIMIT \?$|^SELECT d\.seq, d\.environment_id FROM webhook_deliveries d JOIN webhook_endpoints w ON w\.environment_id = d\.environment_id AND w\.id = d\.endpoint_id WHERE d\.status = \? AND d\.next_attempt_at <= \?/,
    reason:
      "the webhook queue's discovery reads (events not yet fanned out, deliveries due): plain reads; each environment's events and deliveries are then claimed in a transaction of their own. A scatter query on Vitess; per cluster, each cluster's own servers",
  },
  {
    match: /^SELECT seq, created_at FROM events WHERE seq > \?( AND seq < \? ORDER BY seq DESC| ORDER BY seq) LIMIT \?$/,
    reason:
      "the event feed's horizon (and a page's check below its last event) over the one events sequence (gaps are uncommitted transactions): per cluster placement each cluster has its own sequence; on Vitess it needs a Vitess sequence for seq and stays a scatter read (docs/operations/scaling.md)",
  },
];

/** The tables that have an `environment_id` column. */
async function tenantTables(url: string): Promise<Set<string>> {
  const conn = await mysql.createConnection(url);
  try {
    const [rows] = await conn.query("SELECT TABLE_NAME AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_NAME = 'environment_id'");
    return new Set((rows as { t: string }[]).map((r) => r.t));
  } finally {
    await conn.end();
  }
}

/** Each table a statement names, once per time it names it (FROM, JOIN, UPDATE, INTO). */
function tablesNamed(text: string): string[] {
  return [...text.matchAll(/\b(?:FROM|JOIN|UPDATE|INTO)\s+([A-Za-z_][A-Za-z0-9_]*)/gi)].map((m) => m[1]);
}

/** Occurrences of `environment_id` outside select lists and SET clauses: the ones that filter (or, in an INSERT, write). */
function environmentFilters(text: string): number {
  const filtering = text.replace(/\bSELECT\b.*?\bFROM\b/gis, "SELECT FROM").replace(/\bSET\b.*?(\bWHERE\b|$)/gis, "SET $1");
  return filtering.match(/\benvironment_id\b/g)?.length ?? 0;
}

/** Why a statement fails the rule, or undefined when it keeps it. */
function offence(s: { text: string; withoutEnvironment: number }, tenant: Set<string>): string | undefined {
  const named = tablesNamed(s.text).filter((t) => tenant.has(t));
  if (named.length === 0) return undefined;
  if (environmentFilters(s.text) < named.length) return `names ${named.join(", ")} but filters by environment_id ${environmentFilters(s.text)} time(s)`;
  if (s.withoutEnvironment > 0) return `ran ${s.withoutEnvironment} time(s) without binding an environment ID`;
  return undefined;
}

async function workload(server: TestServer, receiver: Receiver, n: number): Promise<void> {
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  await s.call("POST", "/webhook-endpoints", { url: receiver.url, description: `env ${n}` });
  await s.call("PUT", `/subjects/${s.subjectId}`, { name: "Customer L." });
  await s.call("POST", "/subjects", { name: "Other", external_id: `cust_${n}`, test_clock_id: s.clockId });
  const metric = await s.metric();
  const card = await s.card({ fixed_rates: [seats(1000)], usage_based_rates: [simple(metric, usd(2))] });
  const coupon = await s.call("POST", "/coupons", { name: "Promo", duration: "once", percent_off: "10" });
  await s.call("POST", "/credit-grants", { subject_id: s.subjectId, amount: { currency_code: "USD", value: "300" }, category: "promotional" });
  const sub = await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, CARD_OK);
  const subscriptionId = sub.subscription.id as string;
  await s.call("POST", `/subscriptions/${subscriptionId}/discounts`, { coupon_id: coupon.id });
  await s.events([
    ["2026-01-16T00:00:00Z", "5"],
    ["2026-01-17T00:00:00Z", "7", { region: "eu" }],
  ]);
  await s.call("POST", "/usage-events", { idempotency_key: "single", subject_id: `cust_${n}`, event_name: "usage", timestamp: "2026-01-18T00:00:00Z", data: { n: "1" } });
  await s.call("GET", `/customer-access/${s.subjectId}/billing-state`);
  await s.call("GET", `/subjects?limit=10`);
  await s.call("GET", `/subjects/${s.subjectId}/credit-ledger`);
  await s.advance("2026-02-16T00:00:00Z");
  await s.advance("2026-03-16T00:00:00Z");
  const invoices = await s.invoices();
  const paid = invoices.find((i: Json) => i.status === "paid") ?? invoices[0];
  await s.call("GET", `/invoices/${paid.id}`);
  await s.call("POST", "/credit-notes", { invoice_id: paid.id, reason: "duplicate", outcome: "credit_balance", amount: "100" });
  await s.call("GET", `/credit-notes?invoice_id=${paid.id}`);
  const page = await fetch(String(paid.hosted_url).replace(/^http:\/\/localhost:\d+/, server.url));
  if (page.status !== 200) throw new Error(`hosted invoice page: ${page.status}`);
  await page.text();
  const portal = await s.call("POST", "/customer-portal/sessions", { subject_id: s.subjectId, return_url: "https://app.example/back" });
  const portalPage = await fetch(portal.url.replace(/^http:\/\/localhost:\d+/, server.url));
  if (portalPage.status !== 200) throw new Error(`portal page: ${portalPage.status}`);
  await portalPage.text();
  await s.call("GET", "/events?limit=100");
  await s.call("POST", `/subscriptions/${subscriptionId}/cancel`, {});
  await s.call("GET", `/subscriptions?subject_id=${s.subjectId}`);
}

/**
 * More of the API, each call answered without a server error (a refusal still runs its reads):
 * taxes, catalogs, pause and resume, a rate-card change, timelines, summaries, settings, voids,
 * archives, lists, deliveries, and a deleted subject.
 */
async function moreWorkload(server: TestServer, n: number): Promise<void> {
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z");
  const call = async (method: string, path: string, body?: unknown): Promise<Json> => {
    const r = await s.raw(method, path, body);
    if (r.status >= 500) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body ?? {};
  };
  const tax = await call("POST", "/tax-rates", { display_name: "VAT", percentage: "20", inclusive: false, country: "FR" });
  const metric = await s.metric();
  const card = await s.card({ fixed_rates: [seats(1000)], usage_based_rates: [simple(metric, usd(2))] });
  const other = await s.card({ fixed_rates: [seats(2000)] });
  await call("POST", `/rate-cards/${card}/default_tax_rates`, { tax_rate_ids: [tax.id] });
  const catalog = await call("POST", "/rate-catalogs", { name: "Add-ons", description: "" });
  await call("POST", `/rate-catalogs/${catalog.id}/add_rates`, { billing_interval: "monthly", fixed_rates: [seats(300, "addon", "Add-on")] });
  await call("GET", `/rate-catalogs/${catalog.id}`);
  const sub = (await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 2 } }, CARD_OK)).subscription.id as string;
  await s.events([["2026-01-16T00:00:00Z", "3"]]);
  await call("POST", `/pricing-metrics/${metric}/summary`, { subject_id: s.subjectId, period: { start: "2026-01-15T00:00:00Z", end: "2026-02-15T00:00:00Z" } });
  await call("PATCH", `/subscriptions/${sub}`, { fixed_rate_quantities: { seats: 3 } });
  await call("POST", `/subscriptions/${sub}/change-rate-card`, { rate_card_id: other, upgrade_behavior: "prorate" });
  await call("POST", `/subscriptions/${sub}/pause`, {});
  await call("POST", `/subscriptions/${sub}/resume`, { proration_behavior: "none" });
  const timeline = await call("POST", "/subscription-timelines", { subject_id: s.subjectId, rate_card_id: card });
  await call("POST", `/subscription-timelines/${timeline.id}/items`, {
    items: [{ period: { start: "2026-03-15T00:00:00Z", end: null }, subscription_input: { rate_card_id: card, fixed_rate_quantities: { seats: 1 } } }],
  });
  await call("POST", `/subscription-timelines/${timeline.id}/start`, { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled", effective_at: "2026-03-15T00:00:00Z" });
  await call("GET", `/subscription-timelines/${timeline.id}/items`);
  await call("GET", "/invoice-settings");
  await call("PATCH", "/invoice-settings", { invoice_prefix: `P${n}X` });
  const grant = await call("POST", "/credit-grants", { subject_id: s.subjectId, amount: { currency_code: "USD", value: "50" }, category: "promotional" });
  await call("POST", `/credit-grants/${grant.credit_grant?.id}/void`, {});
  await s.advance("2026-02-16T00:00:00Z");
  await s.advance("2026-04-16T00:00:00Z");
  const open = (await s.invoices()).find((i: Json) => i.status === "open");
  if (open) await call("POST", `/invoices/${open.id}/void`, {});
  await call("GET", "/invoices?limit=5");
  await call("GET", `/subscriptions?rate_card_id=${card}`);
  await call("GET", "/tax-rates?limit=5");
  await call("GET", "/coupons");
  await call("GET", `/discounts?subject_id=${s.subjectId}`);
  const ep = await call("POST", "/webhook-endpoints", { url: "https://hooks.example/never", description: "held" });
  await call("GET", `/webhook-endpoints/${ep.id}/deliveries?limit=10`);
  await call("POST", `/pricing-metrics/${metric}/archive`, {});
  await call("POST", `/rate-cards/${other}/archive`, {});
  const gone = await call("POST", "/subjects", { name: "Gone" });
  await call("DELETE", `/subjects/${gone.id}`);
}

/**
 * Real-time billing in two environments at once: a subscription in each (no test clock), whose
 * period is then made to end (straight in the database, outside the audit); the scheduler's
 * real-time run closes both, each in a transaction of its own environment. Resolves once both
 * environments have their second invoice.
 */
async function realTimeCloses(server: TestServer, url: string): Promise<void> {
  const scenarios: Scenario[] = [];
  for (const n of [5, 6]) {
    const s = new Scenario(server);
    s.key = await server.freshKey("test");
    s.subjectId = (await s.call("POST", "/subjects", { name: `Real time ${n}` })).id;
    await s.subscribe({ rate_card_id: await s.card({ fixed_rates: [seats(1000)] }), fixed_rate_quantities: { seats: 1 } }, CARD_OK);
    scenarios.push(s);
  }
  const conn = await mysql.createConnection(url);
  try {
    const subjects = scenarios.map((s) => s.subjectId);
    await conn.query("UPDATE subscriptions SET period_end = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND WHERE subject_id IN (?, ?)", subjects);
  } finally {
    await conn.end();
  }
  for (const s of scenarios) while ((await s.invoices()).length < 2) await new Promise((r) => setTimeout(r, 200));
}

mysqlOnly("every statement on a tenant table filters by environment_id, and no transaction binds two environments", async (t) => {
  t.timeout(600_000);
  const audit = startSqlAudit();
  const receiver = await startReceiver();
  let server: TestServer | undefined;
  let tenant: Set<string>;
  try {
    server = await startTestServer("mysql", { ...FAST, SCHEDULER_INTERVAL_MS: "200" });
    const before = receiver.received.length;
    await Promise.all([...[0, 1, 2].map((n) => workload(server as TestServer, receiver, n)), ...[3, 4].map((n) => moreWorkload(server as TestServer, n)), realTimeCloses(server, server.db.url)]);
    await receiver.until((list) => list.length > before + 3);
    tenant = await tenantTables(server.db.url);
  } finally {
    await server?.stop();
    await receiver.close();
    stopSqlAudit();
  }
  if (process.env.SQL_AUDIT_FILE) audit.write(process.env.SQL_AUDIT_FILE);

  const offenders: string[] = [];
  const allowed = new Map<RegExp, number>();
  let onTenant = 0;
  for (const s of audit.statements.values()) {
    if (tablesNamed(s.text).some((x) => tenant.has(x))) onTenant++;
    const why = offence(s, tenant);
    if (why === undefined) continue;
    const entry = ALLOWED.find((a) => a.match.test(s.text));
    if (entry) allowed.set(entry.match, (allowed.get(entry.match) ?? 0) + 1);
    else offenders.push(`${why}:\n    ${s.text.slice(0, 400)}`);
  }
  t.log(`${audit.statements.size} distinct statements (${onTenant} on tenant tables) in ${audit.transactions} transactions; ${allowed.size} allowlist entries used`);
  t.deepEqual(offenders, [], `statements on tenant tables without an environment filter:\n  ${offenders.join("\n  ")}`);
  // The fixtures name each environment they make with a fresh environment-shaped ID (test/helpers/server.ts): its INSERT binds two.
  const fixtureNames = (c: { statements: string[] }) => c.statements.every((x) => x.startsWith("INSERT INTO environments"));
  t.deepEqual(
    audit.crossEnvironment.filter((c) => !fixtureNames(c)).map((c) => c.statements),
    [],
    "a transaction or statement bound two environments",
  );
  t.deepEqual(
    ALLOWED.filter((a) => !allowed.has(a.match)).map((a) => a.match.source),
    [],
    "every allowlist entry is still needed",
  );
  t.true(onTenant > 100, "the workload reached the tenant tables");
});

test("the audit folds what varies, finds environment IDs in parameters and inline, and reports a transaction that binds two", (t) => {
  const a = "env_AAAAAAAAAAAAAAAAAAAAAA";
  const b = "env_BBBBBBBBBBBBBBBBBBBBBB";
  t.is(normalizeSql("SELECT `x` FROM t WHERE id IN (?, ?, ?) AND n = 12 AND s = 'it''s'"), "SELECT x FROM t WHERE id IN (?) AND n = ? AND s = ?");
  t.is(normalizeSql("INSERT INTO t (a, b) VALUES (?, ?), (?, ?), (?, ?)"), "INSERT INTO t (a, b) VALUES (?)");
  const audit = new SqlAudit();
  const tx = {};
  audit.record(tx, "START TRANSACTION", []);
  audit.record(tx, "UPDATE t SET n = 1 WHERE environment_id = ? AND id = ?", [a, "x_1"]);
  audit.record(tx, `INSERT INTO t (environment_id, id) VALUES ('${b}', 'x_2')`, undefined);
  audit.record(tx, "COMMIT", []);
  audit.record(undefined, "SELECT id FROM t WHERE id = ?", ["x_1"]);
  t.is(audit.transactions, 1);
  t.deepEqual(
    audit.crossEnvironment.map((c) => c.environments.sort()),
    [[a, b]],
  );
  const lookup = audit.statements.get("SELECT id FROM t WHERE id = ?");
  t.like(lookup, { count: 1, inTransaction: 0, withoutEnvironment: 1 });
});
