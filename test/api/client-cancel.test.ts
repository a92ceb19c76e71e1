/**
 * A client stream the client gives up on (StreamUsageEvents from @grpc/grpc-js, the client nobody
 * here wrote): cancelled midway (RST_STREAM CANCEL) it is counted in the request metrics, and
 * written in the access line, as `canceled`; one whose deadline passes as `deadline_exceeded`,
 * never `ok` (README, Operations).
 */
import * as grpc from "@grpc/grpc-js";
import test from "ava";
import { ok } from "../helpers/clients.js";
import { grpcPackage } from "../helpers/grpc-package.js";
import { sample, scrape } from "../helpers/ops.js";
import { useServer } from "../helpers/server.js";

const billing = grpcPackage(["billing/v1/usage_event_service.proto"], { defaults: true, oneofs: true }).billing.v1;
// Counting does not depend on the store.
const server = useServer("sqlite");
const PROCEDURE = "billing.v1.UsageEventService/StreamUsageEvents";

const count = (text: string, code: string) => sample(text, "billing_requests_total", { protocol: "grpc", procedure: PROCEDURE, code });

/** Resolves once the server has a request in flight (this file's calls run one at a time), or after 15 s. */
async function heldByServer(): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if (sample(await scrape(server.url), "billing_requests_in_flight") > 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A usage stream that writes `n` events, then waits; `giveUp` ends it from the client's side. Resolves with the call's error. */
async function abandoned(giveUp: "cancel" | "deadline"): Promise<grpc.ServiceError | undefined> {
  const key = await server.freshKey();
  const subject = await ok(server, key, "POST", "/subjects", { external_id: `s-${giveUp}` });
  const usage = new billing.UsageEventService(`127.0.0.1:${server.app.port}`, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set("x-api-key", key);
  try {
    return await new Promise<grpc.ServiceError | undefined>((resolve) => {
      const options = giveUp === "deadline" ? { deadline: Date.now() + 1_000 } : {};
      const call = usage.StreamUsageEvents(md, options, (err: grpc.ServiceError | null) => resolve(err ?? undefined));
      for (let i = 0; i < 3; i++) call.write({ idempotency_key: `e${i}`, subject_id: subject.id, event_name: "api", data: {}, timestamp: { seconds: "1772000000", nanos: 0 } });
      // Once the server holds the call (an admission slot in use), and a moment more for its key
      // check: a reset that reaches a loaded server before it has taken the call in is not this test's.
      if (giveUp === "cancel") void heldByServer().then(() => setTimeout(() => call.cancel(), 500));
    });
  } finally {
    usage.close();
  }
}

/** The metrics once the server has counted `code` once more than in `before` (the stream's close is seen a moment after the client's). */
async function countedOnce(before: string, code: string): Promise<string> {
  for (let i = 0; i < 50; i++) {
    const text = await scrape(server.url);
    if (count(text, code) > count(before, code)) return text;
    await new Promise((r) => setTimeout(r, 100));
  }
  return scrape(server.url);
}

test.serial("a client stream cancelled midway is counted as canceled, not ok", async (t) => {
  const before = await scrape(server.url);
  const err = await abandoned("cancel");
  t.is(err?.code, grpc.status.CANCELLED);
  const after = await countedOnce(before, "canceled");
  t.is(count(after, "canceled") - count(before, "canceled"), 1);
  t.is(count(after, "ok") - count(before, "ok"), 0);
});

test.serial("a client stream whose deadline passes is counted as deadline_exceeded, not ok", async (t) => {
  const before = await scrape(server.url);
  const err = await abandoned("deadline");
  t.is(err?.code, grpc.status.DEADLINE_EXCEEDED);
  const after = await countedOnce(before, "deadline_exceeded");
  t.is(count(after, "deadline_exceeded") - count(before, "deadline_exceeded"), 1);
  t.is(count(after, "ok") - count(before, "ok"), 0);
  t.is(count(after, "canceled") - count(before, "canceled"), 0);
});
