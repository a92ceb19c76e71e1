/** A real HTTP receiver of webhooks on a port: records every request and answers as told. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  at: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  // biome-ignore lint: webhook JSON is loosely typed in tests
  json: any;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** How to answer the next request (by default 200 "ok"); "hang" never answers. */
  answer: (r: Received, n: number) => number | "hang";
  /** Resolves once `pred` holds over what was received (checked on every request and every 50 ms). */
  until(pred: (list: Received[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const hanging = new Set<import("node:http").ServerResponse>();
  const r: Receiver = {
    url: "",
    received,
    answer: () => 200,
    async until(pred, timeoutMs = 30_000) {
      const end = Date.now() + timeoutMs;
      while (!pred(received)) {
        if (Date.now() > end) throw new Error(`receiver: condition not met within ${timeoutMs} ms (${received.length} requests received)`);
        await new Promise((res) => setTimeout(res, 50));
      }
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((res) => server.close(res));
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const rec: Received = { at: Date.now(), headers: req.headers, body, json };
      received.push(rec);
      const a = r.answer(rec, received.length);
      if (a === "hang") {
        hanging.add(res);
        return;
      }
      res.writeHead(a, { "content-type": "text/plain" });
      res.end(a >= 200 && a < 300 ? "ok" : `failing with ${a}`);
    });
  });
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return r;
}
