/**
 * GET /invoices across subjects (DESIGN §15), on MariaDB and SQLite: every filter (subject by ID
 * or external ID, status, created range, number) alone and combined, checked against the whole
 * list filtered here; pagination; bad input (400 naming the field) and unknown subjects (404);
 * the same answers on gRPC, Connect and gRPC-Web; and the finance CSV export run through the real
 * CLI against the server's database, whose per-invoice totals are GET /invoices' totals.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import test from "ava";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { run as runCli } from "../../src/cli/billing.js";
import { InvoiceService } from "../../src/gen/billing/v1/invoice_service_pb.js";
import { simple, usd } from "../helpers/catalog-bodies.js";
import { PROTOCOLS, rpcClient, violatedFields } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

interface World {
  s: Scenario;
  /** The three subjects: [id, external id]. */
  subjects: [string, string][];
  /** Every invoice of the environment, oldest first, as GET /invoices gives them. */
  all: Json[];
  /** Real time before and after it was built: finalized_at is the real time of finalization, not the test clock's. */
  began: Date;
  ended: Date;
}

/**
 * Three subjects on one usage card (no card on file: what is finalized stays open), two months of
 * usage: drafts, open, void, uncollectible and paid (the empty ones kept internal) invoices,
 * created on 2026-01-15, 2026-02-15 and 2026-03-15.
 */
async function world(server: TestServer): Promise<World> {
  const began = new Date();
  const s = await Scenario.start(server, "2026-01-15T00:00:00Z", { invoiceGraceSeconds: 3600 });
  const m = await s.metric();
  // A rate name the CSV must quote: a comma, a double quote.
  const card = await s.card({ usage_based_rates: [simple(m, usd(100), 0, "api", 'API "calls", metered')] });
  const subjects: [string, string][] = [];
  for (let i = 0; i < 3; i++) {
    const ext = `ext-list-${i}-${s.clockId.slice(-8)}`;
    // The first one's name is one a spreadsheet would run as a formula: the export neutralizes it.
    const id = (await s.call("POST", "/subjects", { name: i === 0 ? "=SUM(A1) Ltd" : `Customer ${i}`, external_id: ext, test_clock_id: s.clockId })).id;
    subjects.push([id, ext]);
    s.subjectId = id;
    await s.subscribe({ rate_card_id: card });
    await s.events([["2026-01-20T00:00:00Z", String(i + 1)]]);
  }
  const mine = async () => (await s.call("GET", "/invoices?limit=100")).invoices as Json[];
  await s.advance("2026-02-15T00:00:00Z");
  const drafts = (await mine()).filter((i) => i.status === "draft");
  // The first subject's is finalized (open, no card), the second's finalized and voided; the third's waits.
  await s.call("POST", `/invoices/${drafts[0].id}/finalize`, {});
  await s.call("POST", `/invoices/${drafts[1].id}/finalize`, {});
  await s.call("POST", `/invoices/${drafts[1].id}/void`, {});
  for (const [i, [id]] of subjects.entries()) {
    s.subjectId = id;
    await s.events([["2026-02-20T00:00:00Z", String(10 * (i + 1))]]);
  }
  // The third's draft finalizes as its grace period passes; then the March drafts.
  await s.advance("2026-03-15T00:00:00Z");
  const march = (await mine()).filter((i) => i.status === "draft");
  await s.call("POST", `/invoices/${march[0].id}/finalize`, {});
  await s.call("POST", `/invoices/${march[0].id}/mark_uncollectible`, {});
  return { s, subjects, all: await mine(), began, ended: new Date(Date.now() + 1000) };
}

const execFileAsync = promisify(execFile);

const ids = (list: Json[]) => list.map((i) => i.id as string);

for (const store of STORES) {
  const server = useServer(store);
  let built: Promise<World> | undefined;
  const w = () => {
    built ??= world(server);
    return built;
  };

  test(`${store}: the world has every status, numbers on the finalized, none on drafts and empty invoices`, async (t) => {
    const { all } = await w();
    const statuses = new Set(all.map((i) => i.status));
    for (const st of ["draft", "open", "void", "uncollectible"]) t.true(statuses.has(st), `a ${st} invoice`);
    for (const i of all) {
      if (i.status === "draft" || i.line_items.length === 0) t.falsy(i.number, `${i.status} ${i.id} has no number`);
      else t.regex(i.number, /^INV-\d{6}$/);
    }
    t.deepEqual(ids(all), ids([...all].sort((a, b) => a.created_at.localeCompare(b.created_at))), "oldest first");
  });

  test(`${store}: every filter and their combinations equal the whole list filtered`, async (t) => {
    const { s, subjects, all } = await w();
    const numbered = all.find((i) => i.number);
    const subjectsOf: [string, string | undefined][] = [
      ["", undefined],
      [subjects[0]?.[0] as string, subjects[0]?.[0]],
      [subjects[1]?.[1] as string, subjects[1]?.[0]],
    ];
    const ranges: [string, string | undefined, string | undefined][] = [
      ["", undefined, undefined],
      ["Feb", "2026-02-15T00:00:00Z", "2026-03-15T00:00:00Z"],
      ["from Mar", "2026-03-01T00:00:00Z", undefined],
      ["to Feb 16", undefined, "2026-02-16T00:00:00Z"],
    ];
    for (const [subjectKey, subjectId] of subjectsOf) {
      for (const status of ["", "draft", "open", "paid", "void", "uncollectible"]) {
        for (const [, from, to] of ranges) {
          for (const number of ["", numbered?.number as string, "INV-999999"]) {
            const q = new URLSearchParams({ limit: "100" });
            if (subjectKey) q.set("subject_id", subjectKey);
            if (status) q.set("status", status);
            if (from) q.set("created_from", from);
            if (to) q.set("created_to", to);
            if (number) q.set("number", number);
            const want = all.filter(
              (i) =>
                (!subjectId || i.subject_id === subjectId) && (!status || i.status === status) && (!from || i.created_at >= from) && (!to || i.created_at < to) && (!number || i.number === number),
            );
            const got = await s.call("GET", `/invoices?${q}`);
            t.deepEqual(ids(got.invoices), ids(want), q.toString());
            t.false(got.has_more);
          }
        }
      }
    }
  });

  test(`${store}: a draft in the list is as its own page shows it (as it would finalize now)`, async (t) => {
    const { s, all } = await w();
    for (const d of all.filter((i) => i.status === "draft")) t.deepEqual(d, await s.call("GET", `/invoices/${d.id}`));
  });

  test(`${store}: pages of two follow each other, has_more until the last`, async (t) => {
    const { s, all } = await w();
    const seen: Json[] = [];
    for (let offset = 0; ; offset += 2) {
      const page = await s.call("GET", `/invoices?limit=2&offset=${offset}`);
      seen.push(...page.invoices);
      t.is(page.has_more, seen.length < all.length);
      if (!page.has_more) break;
    }
    t.deepEqual(ids(seen), ids(all));
    const draftsPaged = await s.call("GET", "/invoices?status=draft&limit=1&offset=1");
    t.deepEqual(ids(draftsPaged.invoices), ids(all.filter((i) => i.status === "draft")).slice(1, 2));
  });

  test(`${store}: bad filters are 400 naming the field; an unknown subject is 404`, async (t) => {
    const { s } = await w();
    for (const [query, fields] of [
      ["status=closed", ["status"]],
      ["created_from=2026-03-01T00:00:00Z&created_to=2026-02-01T00:00:00Z", ["created_to"]],
      ["limit=0", ["limit"]],
      ["limit=101&offset=-1", ["limit", "offset"]],
      ["status=nope&limit=500", ["status", "limit"]],
    ] as const) {
      const r = await s.raw("GET", `/invoices?${query}`);
      t.is(r.status, 400, query);
      t.is(r.body.code, "invalid_argument");
      t.deepEqual(violatedFields(r.body).sort(), [...fields].sort(), query);
    }
    const missing = await s.raw("GET", "/invoices?subject_id=subj_nobody");
    t.is(missing.status, 404);
    // Another environment's subject is no subject here.
    const other = await Scenario.start(server, "2026-01-15T00:00:00Z");
    t.is((await other.raw("GET", `/invoices?subject_id=${s.subjectId}`)).status, 404);
    t.deepEqual((await other.call("GET", "/invoices")).invoices, [], "another environment sees none of them");
  });

  test(`${store}: gRPC, Connect and gRPC-Web give the same invoices for the same filters`, async (t) => {
    const { s, subjects, all } = await w();
    for (const protocol of PROTOCOLS) {
      const client = rpcClient(InvoiceService, server.url, protocol, s.key);
      const every = await client.listInvoices({ limit: 100 });
      t.deepEqual(
        every.invoices.map((i) => [i.id, i.status, i.totalAmount?.value, i.number]),
        all.map((i) => [i.id, i.status, i.total_amount.value, i.number ?? ""]),
        protocol,
      );
      const filtered = await client.listInvoices({ subjectId: subjects[0]?.[1], status: "open", createdFrom: timestampFromDate(new Date("2026-02-01T00:00:00Z")), limit: 100 });
      t.deepEqual(ids(filtered.invoices), ids(all.filter((i) => i.subject_id === subjects[0]?.[0] && i.status === "open" && i.created_at >= "2026-02-01")), protocol);
      const err = await client.listInvoices({ status: "bogus" }).catch((e: unknown) => e as { code: number; rawMessage: string });
      t.is((err as { code: number }).code, 3, `${protocol}: invalid argument`);
    }
  });

  test(`${store}: the CSV export through the CLI: one row per line, totals equal GET /invoices'`, async (t) => {
    const { all, began, ended } = await w();
    const [from, to] = [began.toISOString(), ended.toISOString()];
    const csv = await exportCsv(t, server.db.url, "--from", from, "--to", to);
    const rows = parseCsv(csv);
    const header = rows[0] as string[];
    for (const column of REQUIRED_COLUMNS) t.true(header.includes(column), column);
    const records = rows.slice(1).map((r) => Object.fromEntries(header.map((h, i) => [h, r[i] ?? ""])));
    const mine = new Map(all.map((i) => [i.id as string, i]));
    const exported = records.filter((r) => mine.has(r.invoice_id as string));
    // Finalized invoices with lines, each with all its lines; no draft, no empty internal invoice.
    const want = all.filter((i) => i.status !== "draft" && i.line_items.length > 0);
    t.true(want.length >= 4);
    t.deepEqual([...new Set(exported.map((r) => r.invoice_id))].sort(), ids(want).sort());
    for (const inv of want) {
      const lines = exported.filter((r) => r.invoice_id === inv.id);
      t.is(lines.length, inv.line_items.length);
      t.deepEqual(
        lines.map((r) => r.line_index),
        inv.line_items.map((_: Json, i: number) => String(i)),
      );
      for (const r of lines) {
        t.is(r.invoice_total, inv.total_amount.value);
        t.is(r.amount_due, inv.amount_due.value);
        t.is(r.status, inv.status);
        t.is(r.number, inv.number);
        t.is(r.customer_name, inv.customer_name?.startsWith("=") ? `'${inv.customer_name}` : (inv.customer_name ?? ""));
        t.is(r.currency, "USD");
        t.is(r.invoice_total_major, (Number(inv.total_amount.value) / 100).toFixed(2));
      }
      t.deepEqual(
        lines.map((r) => [r.line_description, r.quantity, r.unit_amount, r.line_amount]),
        inv.line_items.map((l: Json) => [l.description, String(l.quantity), l.price_in_unit_amount.value, l.amount.value]),
      );
      t.true(lines.every((r) => r.line_description?.includes('API "calls", metered')));
    }
    // --status and --env narrow it; a range that ends before they were finalized (real time) has none of them.
    const env = exported[0]?.environment as string;
    const open = parseCsv(await exportCsv(t, server.db.url, "--from", from, "--to", to, "--env", env, "--status", "open"));
    const openIds = new Set(open.slice(1).map((r) => r[header.indexOf("invoice_id")]));
    t.deepEqual([...openIds].sort(), ids(want.filter((i) => i.status === "open")).sort());
    // The program itself (its stdout, written as the pipe takes it) writes the same bytes.
    const inProcess = await exportCsv(t, server.db.url, "--from", from, "--to", to, "--env", env);
    const spawned = await execFileAsync(process.execPath, ["--import", "tsx", "src/cli/billing.ts", "invoices", "export", "--from", from, "--to", to, "--env", env], {
      env: { ...process.env, DATABASE_URL: server.db.url },
      maxBuffer: 64 * 1024 * 1024,
    });
    t.is(spawned.stdout, inProcess);
    t.true(spawned.stdout.startsWith("environment,environment_id,invoice_id,"));
    t.true(spawned.stdout.endsWith("\r\n"));
    t.true(spawned.stdout.includes('"API ""calls"", metered'), "a field with a comma and quotes is quoted, its quotes doubled");
    t.true(spawned.stdout.includes(",'=SUM(A1) Ltd,"), "a name a spreadsheet would run as a formula starts with a quote mark");
    const early = parseCsv(await exportCsv(t, server.db.url, "--from", "2026-01-01T00:00:00Z", "--to", from, "--env", env));
    t.deepEqual(early.slice(1), []);
  });

  test(`${store}: the export refuses a bad command line (exit 2)`, async (t) => {
    for (const args of [
      ["--from", "2026-01-01T00:00:00Z"],
      ["--from", "yesterday", "--to", "2026-02-01T00:00:00Z"],
      ["--from", "2026-02-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z"],
      ["--from", "2026-01-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z", "--status", "draft"],
    ]) {
      const r = await cli(server.db.url, "invoices", "export", ...args);
      t.is(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      t.is(r.stdout, "");
    }
    const r = await cli(server.db.url, "invoices", "export", "--from", "2026-01-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z", "--env", "no-such-env");
    t.is(r.code, 1);
  });
}

const REQUIRED_COLUMNS =
  "environment,invoice_id,number,status,subject_id,customer_name,customer_country,customer_tax_id,currency,created_at,finalized_at,period_start,period_end,line_index,line_description,line_kind,quantity,unit_amount,line_amount,line_discount,line_tax,line_tax_rates,invoice_subtotal,invoice_total_discount,invoice_total_tax,invoice_total,invoice_total_major,credits_applied,amount_credited,amount_due".split(
    ",",
  );

/** The CLI run in this process (the same `run` the process calls), against the server's database. */
async function cli(databaseUrl: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, { out: (l) => (stdout += `${l}\n`), err: (l) => (stderr += `${l}\n`) }, { DATABASE_URL: databaseUrl });
  return { code, stdout, stderr };
}

async function exportCsv(t: { is: (a: unknown, b: unknown, m?: string) => void }, url: string, ...args: string[]): Promise<string> {
  const r = await cli(url, "invoices", "export", ...args);
  t.is(r.code, 0, r.stderr);
  return r.stdout;
}

/** RFC 4180: records end in CRLF; a field in double quotes may hold commas, quotes (doubled) and line breaks. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      row.push(field);
      field = "";
    } else if (c === "\r" && text[i + 1] === "\n") {
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
      i++;
    } else field += c;
  }
  if (field !== "" || row.length > 0) rows.push([...row, field]);
  return rows;
}
