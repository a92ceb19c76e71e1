/**
 * A billing scenario driven only through the public API, on a test clock: a fresh environment,
 * a clock, a subject, metrics, cards, subscriptions, events, clock advances, and the invoices.
 */
import { parse as parseLossless } from "lossless-json";
import { ok, rest } from "./clients.js";
import type { TestServer } from "./server.js";
import type { Json } from "./subjects-api.js";

export const CARD_OK = "4242 4242 4242 4242";
export const CARD_DECLINED = "4000 0000 0000 0002";
export const CARD_FAILS_LATER = "4000 0000 0000 0341";

export class Scenario {
  key = "";
  clockId = "";
  subjectId = "";
  private seq = 0;
  constructor(readonly server: TestServer) {}

  call(method: string, path: string, body?: unknown, key = this.key): Promise<Json> {
    return ok(this.server, key, method, path, body);
  }

  async raw(method: string, path: string, body?: unknown) {
    return rest(this.server.url, method, path, this.key, body);
  }

  /** A scenario in a fresh test environment whose invoices are final at once, or drafts for `invoiceGraceSeconds`. */
  static async start(server: TestServer, at: string, opts: { invoiceGraceSeconds?: number } = {}): Promise<Scenario> {
    const s = new Scenario(server);
    s.key = await server.freshKey("test", opts);
    s.clockId = (await s.call("POST", "/test-clocks", { name: "scenario", frozen_time: at })).id;
    s.subjectId = (await s.call("POST", "/subjects", { name: "Customer", test_clock_id: s.clockId })).id;
    return s;
  }

  async metric(aggregation: Json = { aggregation_type: "sum", value_field: "n" }, dimensions: string[] = [], eventName = "usage"): Promise<string> {
    return (await this.call("POST", "/pricing-metrics", { event_name: eventName, name: eventName, unit: "unit", dimensions, aggregation })).id;
  }

  async card(body: Json): Promise<string> {
    return (await this.call("POST", "/rate-cards", { billing_interval: "monthly", name: "Plan", ...body })).id;
  }

  /** Subscribes; when a checkout is required, pays it with `card` (or leaves it when card is null). */
  async subscribe(body: Json, card: string | null = CARD_OK): Promise<Json> {
    const r = await this.call("POST", "/subscriptions", {
      subject_id: this.subjectId,
      checkout_callback_urls: { success_url: "https://app.example/ok", cancelled_url: "https://app.example/cancelled" },
      ...body,
    });
    if (r.result.result_type === "success" || card === null) return r.result;
    const paid = await this.payCheckout(r.result.action.checkout_url, card);
    if (paid.status !== 303) return { result_type: "declined", status: paid.status, page: paid.text };
    return { result_type: "success_after_checkout", subscription: (await this.subscriptions()).at(-1) };
  }

  async payCheckout(url: string, card: string): Promise<{ status: number; text: string; location: string | null }> {
    const path = new URL(url).pathname;
    const res = await fetch(`${this.server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ card_number: card }).toString(),
      redirect: "manual",
    });
    return { status: res.status, text: await res.text(), location: res.headers.get("location") };
  }

  /** Saves `card` as the current subject's card through the customer portal (a 303 back to it when saved). */
  async saveCardInPortal(card: string): Promise<void> {
    const r = await this.raw("POST", "/customer-portal/sessions", { subject_id: this.subjectId, return_url: "https://app.example/account" });
    const saved = await this.payCheckout(`${r.body.url}/card`, card);
    if (saved.status !== 303) throw new Error(`saving the card in the portal: ${saved.status}`);
  }

  async subscriptions(): Promise<Json[]> {
    return (await this.call("GET", `/subscriptions?subject_id=${this.subjectId}&limit=100`)).subscriptions;
  }

  async events(list: [string, string, Json?][], eventName = "usage"): Promise<void> {
    const events = list.map(([timestamp, n, data]) => ({ idempotency_key: `e${this.seq++}`, subject_id: this.subjectId, event_name: eventName, timestamp, data: { n, ...data } }));
    const r = await this.call("POST", "/usage-events/batch", { events });
    if (r.rejected > 0) throw new Error(`events rejected: ${JSON.stringify(r.results.filter((x: Json) => x.status === "rejected"))}`);
  }

  async advance(to: string): Promise<void> {
    await this.call("POST", `/test-clocks/${this.clockId}/advance`, { frozen_time: to });
  }

  /**
   * The subject's invoices, every JSON number read as its exact text: a line's `quantity` is a
   * JSON number on REST (written with the decimal's digits), compared here digit for digit.
   */
  async invoices(): Promise<Json[]> {
    const path = `/invoices?subject_id=${this.subjectId}&limit=100`;
    const res = await fetch(`${this.server.url}${path}`, { headers: { "x-api-key": this.key } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${text}`);
    return (parseLossless(text, null, (digits) => digits) as Json).invoices;
  }

  /** Invoices as [status, total, [description, quantity, unit, amount][]], oldest first (quantity: its digits). */
  async bills(): Promise<[string, string, [string, string, string, string][]][]> {
    return (await this.invoices()).map((i) => [
      i.status,
      i.total_amount.value,
      i.line_items.map((l: Json) => [l.description, l.quantity, l.price_in_unit_amount.value, l.amount.value] as [string, string, string, string]),
    ]);
  }
}
