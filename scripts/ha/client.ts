/**
 * The harness's REST client: requests spread over the servers in turn; a refused request (503,
 * 409, 502, or no answer: a connection refused, reset, or timed out) is counted and sent again,
 * with the same Idempotency-Key, to the next server, as a client of the service would.
 */
import http from "node:http";
import { sleep } from "./cluster.js";

export interface Answer {
  status: number;
  body: string;
  /** The server that answered. */
  port: number;
}

/** Refused requests, by kind, since the counters were last taken. */
export interface Refusals {
  s503: number;
  s409: number;
  other: number;
  network: number;
}

export class ApiError extends Error {}

/**
 * 400 IDEMPOTENCY_OUTCOME_LOST: the first request under this key made its change but its server
 * stopped (or lost the database) before storing the answer; the client must look for itself.
 */
export class OutcomeLost extends ApiError {}

/**
 * 409 IDEMPOTENCY_KEY_IN_USE for longer than KEY_HELD_MS: the first request under the key lost
 * its server or database mid-way and could not release its claim, which then holds until its
 * lease ends (IDEMPOTENCY_LEASE_MS, 5 minutes). The harness gives such a flow up.
 */
export class KeyHeld extends OutcomeLost {}
export const KEY_HELD_MS = 30_000;

export const emptyRefusals = (): Refusals => ({ s503: 0, s409: 0, other: 0, network: 0 });

export class Client {
  refusals = emptyRefusals();
  /** When a request last failed (ms since the epoch), and when one last succeeded. */
  lastFailure = 0;
  lastSuccess = 0;
  /** The longest a request waited from its first refusal to its answer, since last reset. */
  maxRetryWaitMs = 0;
  private next = 0;
  private readonly agents: http.Agent[];

  constructor(
    readonly ports: () => number[],
    readonly key: string,
  ) {
    this.agents = Array.from({ length: 8 }, () => new http.Agent({ keepAlive: true, maxSockets: 32 }));
  }

  /** One request to the server on `port`. */
  once(port: number, method: string, path: string, body?: unknown, idempotencyKey?: string, timeoutMs = 30_000): Promise<Answer> {
    const text = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    const headers: http.OutgoingHttpHeaders = { accept: "application/json", "x-api-key": this.key };
    if (text !== undefined) {
      headers["content-type"] = typeof body === "string" ? "application/x-www-form-urlencoded" : "application/json";
      headers["content-length"] = Buffer.byteLength(text);
    }
    if (idempotencyKey) headers["idempotency-key"] = idempotencyKey;
    const agent = this.agents[port % this.agents.length];
    return new Promise((resolve, reject) => {
      const req = http.request({ agent, host: "127.0.0.1", port, method, path, headers, timeout: timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8"), port }));
        res.on("error", reject);
      });
      req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on("error", reject);
      req.end(text);
    });
  }

  /**
   * The request, sent to the servers in turn until one answers it (2xx or 3xx): refusals are
   * counted and retried (after 200 ms); any other answer is an ApiError.
   */
  async call(method: string, path: string, body?: unknown, idempotencyKey?: string, giveUpMs = 300_000): Promise<Answer> {
    const t0 = Date.now();
    let firstRefusal = 0;
    let warned = false;
    for (;;) {
      const ports = this.ports();
      const port = ports[this.next++ % ports.length] as number;
      let answer: Answer | undefined;
      try {
        answer = await this.once(port, method, path, body, idempotencyKey);
      } catch {
        this.refusals.network++;
      }
      if (answer && answer.status < 400) {
        this.lastSuccess = Date.now();
        if (firstRefusal > 0) this.maxRetryWaitMs = Math.max(this.maxRetryWaitMs, this.lastSuccess - firstRefusal);
        return answer;
      }
      if (answer) {
        if (answer.status === 503) this.refusals.s503++;
        else if (answer.status === 409) this.refusals.s409++;
        else if (answer.status === 502 || answer.status === 504 || answer.status === 500) this.refusals.other++;
        else if (answer.body.includes("IDEMPOTENCY_OUTCOME_LOST")) throw new OutcomeLost(`${method} ${path}: ${answer.status} ${answer.body.slice(0, 400)}`);
        else throw new ApiError(`${method} ${path}: ${answer.status} ${answer.body.slice(0, 400)}`);
      }
      this.lastFailure = Date.now();
      firstRefusal ||= this.lastFailure;
      if (answer?.status === 409 && this.lastFailure - firstRefusal > KEY_HELD_MS) throw new KeyHeld(`${method} ${path}: 409 for ${KEY_HELD_MS / 1000} s: ${answer.body.slice(0, 200)}`);
      if (this.lastFailure - firstRefusal > 20_000 && !warned) {
        warned = true;
        process.stderr.write(`[ha] ${method} ${path} refused for 20 s: ${answer ? `${answer.status} ${answer.body.slice(0, 300)}` : "no answer"}\n`);
      }
      if (Date.now() - t0 > giveUpMs) throw new ApiError(`${method} ${path}: still refused after ${giveUpMs} ms`);
      await sleep(200);
    }
  }

  /** call(), its body as JSON. */
  async json(method: string, path: string, body?: unknown, idempotencyKey?: string): Promise<Record<string, unknown> & { id: string }> {
    return JSON.parse((await this.call(method, path, body, idempotencyKey)).body);
  }

  takeRefusals(): Refusals {
    const r = this.refusals;
    this.refusals = emptyRefusals();
    return r;
  }

  close(): void {
    for (const a of this.agents) a.destroy();
  }
}
