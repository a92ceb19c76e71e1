/**
 * The load the scenarios run under, all at once: batch ingest with idempotency keys;
 * subscriptions on test clocks (checkout paid with a card, usage, two advances, so three
 * invoices each, charged to the card); webhook deliveries to a receiver in this process; and a
 * probe that asks every server for a cheap read, to time how long the service does not answer.
 * Every loop records what the service acknowledged, for checks.ts.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ApiError, type Client, KeyHeld, OutcomeLost } from "./client.js";
import { sleep } from "./cluster.js";

/** Usage events per subscription (all in its first month, n = 1 at 1 cent each). */
export const FLOW_EVENTS = 20;
/** Each subscription's fixed rate: one seat at 1000 cents a month. */
export const SEAT_CENTS = 1000;
/** Invoices a finished subscription flow has: at subscribe, then at each of two advances. */
export const FLOW_INVOICES = 3;
/** How long a flow waits for its clock to be ready after its last advance (the lease is 24 s at SCHEDULER_INTERVAL_MS 2000). */
const READY_WAIT_MS = 90_000;

export interface Acknowledged {
  /** Idempotency keys of usage events the service answered as accepted or duplicate. */
  eventKeys: Set<string>;
  /** Per batch (its keys' prefix): which server answered it, when, and its outcomes. */
  batchAnswers: Map<string, string>;
  /** Subscriptions whose whole flow was answered: subscription id → subject id. */
  finishedFlows: Map<string, string>;
}

export class WebhookReceiver {
  /** Event id → times it arrived. */
  readonly arrivals = new Map<string, number>();
  private server: http.Server | undefined;
  url = "";

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        try {
          const id = String((JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id?: unknown }).id);
          this.arrivals.set(id, (this.arrivals.get(id) ?? 0) + 1);
          res.writeHead(200).end("ok");
        } catch {
          res.writeHead(400).end();
        }
      });
    });
    await new Promise<void>((r) => this.server?.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
  }

  close(): void {
    this.server?.close();
    this.server?.closeAllConnections();
  }
}

export interface Catalog {
  cardId: string;
  endpointId: string;
  ingestSubjects: string[];
}

/** The catalog the load uses: a metric, a card (a seat and usage), a webhook endpoint for every event type, ingest subjects. */
export async function setUpCatalog(client: Client, hookUrl: string): Promise<Catalog> {
  const metric = await client.json("POST", "/pricing-metrics", { event_name: "api", name: "API", unit: "call", aggregation: { aggregation_type: "sum", value_field: "n" } }, "setup-metric");
  const card = await client.json(
    "POST",
    "/rate-cards",
    {
      billing_interval: "monthly",
      name: "HA plan",
      fixed_rates: [{ code: "seats", name: "Seats", price: { amount: { currency_code: "USD", value: String(SEAT_CENTS) } } }],
      usage_based_rates: [
        { usage_based_rate_type: "simple", code: "api", name: "API calls", pricing_metric_id: metric.id, included_units: 0, price: { amount: { currency_code: "USD", value: "1" } } },
      ],
    },
    "setup-card",
  );
  const endpoint = await client.json("POST", "/webhook-endpoints", { url: hookUrl, event_types: [] }, "setup-endpoint");
  const ingestSubjects: string[] = [];
  for (let i = 0; i < 20; i++) ingestSubjects.push((await client.json("POST", "/subjects", { external_id: `ingest-${i}` }, `setup-subject-${i}`)).id);
  return { cardId: card.id, endpointId: endpoint.id, ingestSubjects };
}

/** Loops that run until stop() resolves them. */
export class Load {
  private running = false;
  private loops: Promise<void>[] = [];
  private batchSeq = 0;
  private flowSeq = 0;
  errors: string[] = [];
  /** Batches and flows answered while running. */
  batches = 0;
  flows = 0;
  /** Flows given up because a create's outcome was lost (IDEMPOTENCY_OUTCOME_LOST) or its key stayed in use (KeyHeld): a new one starts. */
  flowsAbandoned = 0;

  constructor(
    readonly client: Client,
    readonly catalog: Catalog,
    readonly ack: Acknowledged,
    readonly run: string,
  ) {}

  start(ingestLoops = 2, flowLoops = 2): void {
    this.running = true;
    const guard = (p: Promise<void>) =>
      p.catch((err: unknown) => {
        this.errors.push(err instanceof Error ? err.message : String(err));
        process.stderr.write(`[ha] load: ${err instanceof Error ? err.message : String(err)}\n`);
      });
    for (let i = 0; i < ingestLoops; i++) this.loops.push(guard(this.ingestLoop()));
    for (let i = 0; i < flowLoops; i++) this.loops.push(guard(this.flowLoop()));
  }

  /** Stops taking up new work; resolves when every loop's work in hand is answered. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }

  private async ingestLoop(): Promise<void> {
    while (this.running) {
      const b = this.batchSeq++;
      const now = new Date().toISOString();
      const events = Array.from({ length: 100 }, (_, i) => ({
        idempotency_key: `${this.run}-b${b}-e${i}`,
        subject_id: this.catalog.ingestSubjects[(b + i) % this.catalog.ingestSubjects.length],
        event_name: "api",
        timestamp: now,
        data: { n: "1" },
      }));
      const answer = await this.client.call("POST", "/usage-events/batch", { events });
      const r = JSON.parse(answer.body) as { results: { status: string }[] };
      r.results.forEach((x, i) => {
        if (x.status === "accepted" || x.status === "duplicate") this.ack.eventKeys.add(events[i]?.idempotency_key as string);
      });
      const counts = new Map<string, number>();
      for (const x of r.results) counts.set(x.status, (counts.get(x.status) ?? 0) + 1);
      this.ack.batchAnswers.set(`${this.run}-b${b}`, `port ${answer.port} at ${new Date().toISOString()}: ${[...counts].map(([k, v]) => `${v} ${k}`).join(", ")}`);
      this.batches++;
    }
  }

  private async flowLoop(): Promise<void> {
    while (this.running) {
      try {
        await this.flow(this.flowSeq++);
        this.flows++;
      } catch (err) {
        if (!(err instanceof OutcomeLost)) throw err;
        this.flowsAbandoned++;
      }
    }
  }

  /** One subscription's life: clock, subject, subscription paid at checkout, usage, two advances. */
  private async flow(f: number): Promise<void> {
    const c = this.client;
    const k = `${this.run}-f${f}`;
    const clock = await c.json("POST", "/test-clocks", { name: k, frozen_time: "2026-01-01T00:00:00Z" }, `${k}-clock`);
    const subject = await c.json("POST", "/subjects", { name: k, test_clock_id: clock.id }, `${k}-subject`);
    const sub = await c.json(
      "POST",
      "/subscriptions",
      {
        subject_id: subject.id,
        rate_card_id: this.catalog.cardId,
        fixed_rate_quantities: { seats: 1 },
        checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
      },
      `${k}-subscription`,
    );
    const result = sub.result as { result_type: string; action?: { checkout_url: string } };
    if (result.result_type !== "success" && result.action) await this.payCheckout(new URL(result.action.checkout_url).pathname);
    const subs = (await c.json("GET", `/subscriptions?subject_id=${subject.id}&limit=10`)).subscriptions as { id: string }[];
    if (subs.length !== 1) throw new Error(`${k}: ${subs.length} subscriptions after checkout`);
    const events = Array.from({ length: FLOW_EVENTS }, (_, i) => ({
      idempotency_key: `${k}-u${i}`,
      subject_id: subject.id,
      event_name: "api",
      timestamp: `2026-01-${String(2 + i).padStart(2, "0")}T12:00:00Z`,
      data: { n: "1" },
    }));
    const r = JSON.parse((await c.call("POST", "/usage-events/batch", { events })).body) as { results: { status: string }[] };
    r.results.forEach((x, i) => {
      if (x.status === "accepted" || x.status === "duplicate") this.ack.eventKeys.add(events[i]?.idempotency_key as string);
    });
    // The third advance, two minutes on the clock: a first charge cut short (its connection broke
    // under it) has its retry planned a minute after the invoice's time, so dunning makes it by then.
    for (const to of ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-03-01T00:02:00Z"]) {
      try {
        await c.call("POST", `/test-clocks/${clock.id}/advance`, { frozen_time: to }, `${k}-advance-${to.slice(0, 16)}`);
      } catch (err) {
        // An advance whose answer was lost: the clock says whether it got there.
        if (!(err instanceof OutcomeLost) || err instanceof KeyHeld) throw err;
        const now = (await c.json("GET", `/test-clocks/${clock.id}`)).frozen_time;
        process.stderr.write(`[ha] ${k}: advance to ${to} answered IDEMPOTENCY_OUTCOME_LOST; the clock is at ${String(now)}\n`);
        if (now !== to) throw new Error(`${k}: advance to ${to} lost, and the clock is at ${String(now)}`);
      }
    }
    await this.untilReady(clock.id as string, k);
    this.ack.finishedFlows.set((subs[0] as { id: string }).id, subject.id);
  }

  /**
   * Waits for the clock's advances to have run everything due: an advance cut short (its answer
   * lost) is finished by a server's scheduler once its lease ends (12 scheduler intervals).
   */
  private async untilReady(clockId: string, k: string): Promise<void> {
    for (const end = Date.now() + READY_WAIT_MS; Date.now() < end; await new Promise((r) => setTimeout(r, 500))) {
      if ((await this.client.json("GET", `/test-clocks/${clockId}`)).status === "ready") return;
    }
    throw new Error(`${k}: the test clock is still advancing ${READY_WAIT_MS / 1000} s after its last advance`);
  }

  /** Pays a checkout with the test card that succeeds; a page answered twice (a retry after a lost answer) is fine. */
  private async payCheckout(path: string): Promise<void> {
    try {
      await this.client.call("POST", path, new URLSearchParams({ card_number: "4242 4242 4242 4242" }).toString());
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      // An already paid checkout answers 4xx on a retry: the subscription read that follows decides.
    }
  }
}

/** Asks every server for a cheap read every 250 ms; remembers when one last went unanswered. */
export class Probe {
  lastFailure = 0;
  private running = true;
  private loop: Promise<void>;

  constructor(client: Client, ports: () => number[]) {
    this.loop = (async () => {
      while (this.running) {
        await Promise.all(
          ports().map(async (port) => {
            try {
              const a = await client.once(port, "GET", "/subjects?limit=1", undefined, undefined, 5000);
              if (a.status !== 200) this.lastFailure = Date.now();
            } catch {
              this.lastFailure = Date.now();
            }
          }),
        );
        await sleep(250);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
