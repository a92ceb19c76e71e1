/**
 * SIGTERM to a server process (`src/main.ts`, started as a child) while a long test-clock advance
 * runs (README, Operations: SHUTDOWN_TIMEOUT_MS). With room enough, the advance finishes with 200
 * after the stop began, and the process exits 0. With none (SHUTDOWN_TIMEOUT_MS=0), the advance
 * stops between two steps and answers 503 `unavailable` SERVER_STOPPING, the process logs the
 * documented line and exits 0; started again on the same database, the same advance finishes the
 * work: every cycle closed once (one invoice per period), nothing half applied. On both stores.
 */
import { type ChildProcess, spawn } from "node:child_process";
import test from "ava";
import { reasonOf, rest } from "../helpers/clients.js";
import { STORES, createTestDatabase } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { type TestServer, seedKeys, freePort } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

/** Subjects with a subscription on the scenario's clock. */
const SUBJECTS = 40;
const STOPPED_LINE = "stopping: requests still in flight after SHUTDOWN_TIMEOUT_MS were told to stop; those not answered 1 s later were cut";

interface LogLine {
  msg: string;
  [k: string]: unknown;
}

/** `npm start`'s process on `databaseUrl`, its JSON log lines, and its exit. */
class Child {
  readonly lines: LogLine[] = [];
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;
  private seen?: () => void;
  constructor(
    readonly port: number,
    databaseUrl: string,
    env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      env: { ...process.env, PORT: String(port), DATABASE_URL: databaseUrl, LOG_LEVEL: "info", SCHEDULER_INTERVAL_MS: "0", WEBHOOK_DELIVERY_INTERVAL_MS: "0", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let rest = "";
    this.child.stderr?.on("data", (chunk: Buffer) => {
      const parts = (rest + chunk.toString()).split("\n");
      rest = parts.pop() ?? "";
      for (const text of parts) {
        try {
          this.lines.push(JSON.parse(text));
        } catch {
          this.lines.push({ msg: text });
        }
        this.seen?.();
      }
    });
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async until(msg: string): Promise<void> {
    while (!this.lines.some((l) => l.msg === msg)) {
      await new Promise<void>((r) => {
        this.seen = r;
        setTimeout(r, 200);
      });
    }
  }

  has(msg: string): boolean {
    return this.lines.some((l) => l.msg === msg);
  }

  term(): void {
    this.child.kill("SIGTERM");
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

/** Every invoice of the scenario's subject (pages of 100). */
async function allInvoices(url: string, s: Scenario): Promise<Json[]> {
  const out: Json[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = (await rest(url, "GET", `/invoices?subject_id=${s.subjectId}&limit=100&offset=${offset}`, s.key)).body as Json;
    out.push(...page.invoices);
    if (!page.has_more) return out;
  }
}

/** A scenario on a clock at 2000-01-01 with one monthly subscription (no charge), on the child's server. */
async function scenario(target: { url: string }, freshKey: TestServer["freshKey"]): Promise<Scenario> {
  const server = {
    get url() {
      return target.url;
    },
    freshKey,
  } as unknown as TestServer;
  const s = await Scenario.start(server, "2000-01-01T00:00:00Z");
  const card = await s.card({ fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: 0 } } }] });
  await s.subscribe({ rate_card_id: card, fixed_rate_quantities: { seats: 1 } }, null);
  // More subjects on the clock, so that the advance has enough to do to be caught mid-way.
  for (let i = 0; i < SUBJECTS - 1; i++) {
    const subject = (await s.call("POST", "/subjects", { name: `Other ${i}`, test_clock_id: s.clockId })).id;
    await s.call("POST", "/subscriptions", { subject_id: subject, rate_card_id: card, fixed_rate_quantities: { seats: 1 } });
  }
  return s;
}

/**
 * Starts the advance to `until` on `child` and resolves once it is under way: the server has
 * logged its progress (a long run logs it every few seconds). Its reads wait behind the advance
 * on the embedded store, so the log is watched rather than the API.
 */
async function advancing(child: Child, s: Scenario, until: string, order: string[]) {
  const answer = rest(child.url, "POST", `/test-clocks/${s.clockId}/advance`, s.key, { frozen_time: until }).then((r) => {
    order.push("answered");
    return r;
  });
  await child.until("scheduler run in progress");
  return { answer };
}

for (const store of STORES) {
  // The advance must outlast its first progress line (5 s): decades of monthly cycles of SUBJECTS subscriptions.
  const years = store === "sqlite" ? 30 : 10;
  const until = `${2000 + years}-01-01T00:00:00Z`;

  test(`${store}: SIGTERM during a long clock advance: it finishes with 200 within SHUTDOWN_TIMEOUT_MS, then the process exits 0`, async (t) => {
    const db = await createTestDatabase(store);
    const seeded = await seedKeys(db.url);
    const child = new Child(await freePort(), db.url, { SHUTDOWN_TIMEOUT_MS: "600000" });
    try {
      await child.until("listening");
      const s = await scenario(child, seeded.freshKey);
      const order: string[] = [];
      const { answer } = await advancing(child, s, until, order);
      child.term();
      await child.until("stopping: finishing requests in flight");
      order.push("stopping");
      const r = await answer;
      t.is(r.status, 200, JSON.stringify(r.body));
      t.deepEqual(order, ["stopping", "answered"], "the advance was still running when the stop began");
      t.is(await child.exited, 0);
      t.true(child.has("stopped"));
      t.false(child.has(STOPPED_LINE), "nothing was cut");
    } finally {
      child.kill();
      await seeded.close();
      await db.drop();
    }
  });

  test(`${store}: with SHUTDOWN_TIMEOUT_MS=0 the advance stops cleanly (503 SERVER_STOPPING), the process exits with its log line, and the same advance later finishes the work`, async (t) => {
    const db = await createTestDatabase(store);
    const seeded = await seedKeys(db.url);
    const first = new Child(await freePort(), db.url, { SHUTDOWN_TIMEOUT_MS: "0" });
    let second: Child | undefined;
    try {
      await first.until("listening");
      const target = { url: first.url };
      const s = await scenario(target, seeded.freshKey);
      const { answer } = await advancing(first, s, until, []);
      first.term();
      const r = await answer;
      t.is(r.status, 503, JSON.stringify(r.body));
      const body = r.body as Json;
      t.is(body.code, "unavailable");
      t.is(reasonOf(body), "SERVER_STOPPING", JSON.stringify(body));
      t.is(await first.exited, 0);
      const line = first.lines.find((l) => l.msg === STOPPED_LINE);
      t.truthy(line, "the documented line is logged");
      t.is(line?.level, "warn");
      t.is(line?.shutdown_timeout_ms, 0);

      // Part of the work was done, each cycle whole; the same advance on a new process does the rest.
      second = new Child(await freePort(), db.url, {});
      await second.until("listening");
      target.url = second.url;
      const partial = await allInvoices(second.url, s);
      const [before] = await s.subscriptions();
      t.true(before.current_period.start < until, "the first process stopped before the end");
      t.true(partial.length > 0);
      const again = await rest(second.url, "POST", `/test-clocks/${s.clockId}/advance`, s.key, { frozen_time: until });
      t.is(again.status, 200, JSON.stringify(again.body));
      const [sub] = await s.subscriptions();
      t.is(sub.current_period.start, until, "every cycle up to the new time was closed");
      const invoices = await allInvoices(second.url, s);
      const periods = invoices.map((i) => `${i.period_start}/${i.period_end}`);
      t.is(new Set(periods).size, periods.length, "each period invoiced once");
      t.is(invoices.length, 1 + years * 12, "the first period's at subscribing, then one per closed month");
      second.term();
      t.is(await second.exited, 0);
    } finally {
      first.kill();
      second?.kill();
      await seeded.close();
      await db.drop();
    }
  });
}
