import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Outcome, UsageEventInput } from "../../billing/metering/events.js";
import type { IngestService } from "../../billing/metering/usage.js";
import type { UsageEventInput as UsageEventInputPb } from "../../gen/billing/v1/usage_event_pb.js";
import type { RejectedUsageEvent, UsageEventService } from "../../gen/billing/v1/usage_event_service_pb.js";
import { callerOf, deferredProblem } from "../context.js";
import { usageEventError, usageEventInput } from "../convert/usage.js";

/**
 * A stream's events are committed in chunks of this many (or of about STREAM_CHUNK_BYTES, if
 * fewer make that), or sooner once the first waited this long; at most STREAM_IN_FLIGHT chunks are
 * held at once, so that a stream of any length holds a bounded number of events.
 */
const STREAM_CHUNK = 1000;
const STREAM_CHUNK_BYTES = 2 * 1024 * 1024;
const STREAM_WAIT_MS = 50;
const STREAM_IN_FLIGHT = 4;
/** A stream's response lists at most this many rejected events (the first, by position); its counts cover all. */
export const STREAM_REJECTIONS_LISTED = 1000;
/** The most events one stream carries: its counts and positions are int32, as a batch's. */
export const STREAM_MAX_EVENTS = 2_147_483_647;

/** About the bytes an event holds (its strings' lengths): enough to bound a chunk. */
function sizeOf(e: UsageEventInputPb): number {
  let n = e.idempotencyKey.length + e.subjectId.length + e.eventName.length + 12;
  for (const k in e.data) n += k.length + (e.data[k]?.length ?? 0);
  return n;
}

/** The outcomes counted by status, into `totals` when given. */
function counts(outcomes: Outcome[], totals = { accepted: 0, duplicate: 0, rejected: 0 }) {
  for (const o of outcomes) totals[o.status]++;
  return totals;
}

export function usageEventService(ingest: IngestService): ServiceImpl<typeof UsageEventService> {
  return {
    async createUsageEvent(req, ctx) {
      const [outcome] = await ingest.ingest(callerOf(ctx), [usageEventInput(req, deferredProblem(ctx, 0, "timestamp"))], () => "");
      if (!outcome) throw new Error("no outcome");
      if (outcome.status === "rejected") throw outcome.error;
      return { id: outcome.id, status: outcome.status };
    },

    async createUsageEventBatch(req, ctx) {
      ingest.checkBatch(req.events.length);
      const outcomes = await ingest.ingest(
        callerOf(ctx),
        req.events.map((e, i) => usageEventInput(e, deferredProblem(ctx, 0, `events[${i}].timestamp`))),
        (i) => `events[${i}].`,
      );
      return {
        results: outcomes.map((o) => (o.status === "rejected" ? { status: "rejected", error: usageEventError(o.error) } : { id: o.id, status: o.status })),
        ...counts(outcomes),
      };
    },

    async streamUsageEvents(requests, ctx) {
      const caller = callerOf(ctx);
      let received = 0;
      const totals = counts([]);
      const rejections: RejectedUsageEvent[] = [];
      // Chunks finish out of order: the first STREAM_REJECTIONS_LISTED by position are kept, at most twice that held.
      const keepFirst = () => {
        rejections.sort((a, b) => (a.index < b.index ? -1 : 1));
        rejections.length = Math.min(rejections.length, STREAM_REJECTIONS_LISTED);
      };
      const inFlight: Promise<void>[] = [];
      // A failed chunk must not become an unhandled rejection while the stream is still read;
      // it is remembered and the call fails with it once reading stops.
      let failure: unknown;
      let chunk: UsageEventInput[] = [];
      let chunkBytes = 0;
      let chunkStart = 0;
      let firstAt = 0;

      const submit = async () => {
        if (chunk.length === 0) return;
        const events = chunk;
        const base = chunkStart;
        chunk = [];
        chunkBytes = 0;
        const done = ingest
          .ingest(caller, events, (i) => `events[${base + i}].`)
          .then(
            (outcomes) => {
              counts(outcomes, totals);
              outcomes.forEach((o, i) => {
                if (o.status === "rejected") rejections.push({ $typeName: "billing.v1.RejectedUsageEvent", index: base + i, error: usageEventError(o.error) });
              });
              if (rejections.length > 2 * STREAM_REJECTIONS_LISTED) keepFirst();
            },
            (err) => {
              failure ??= err;
            },
          );
        inFlight.push(done);
        // Back-pressure: read no further while too many chunks are being committed.
        if (inFlight.length >= STREAM_IN_FLIGHT) await inFlight.shift();
      };

      for await (const event of requests) {
        if (failure !== undefined) break;
        if (received === STREAM_MAX_EVENTS) {
          failure = new ConnectError(
            `a stream carries at most ${STREAM_MAX_EVENTS} events (its counts are int32); the first ${STREAM_MAX_EVENTS} were handled: send the rest on a new stream`,
            Code.ResourceExhausted,
          );
          break;
        }
        if (chunk.length === 0) {
          chunkStart = received;
          firstAt = Date.now();
        }
        chunk.push(usageEventInput(event, deferredProblem(ctx, received, "timestamp")));
        chunkBytes += sizeOf(event);
        received++;
        if (chunk.length >= STREAM_CHUNK || chunkBytes >= STREAM_CHUNK_BYTES || Date.now() - firstAt >= STREAM_WAIT_MS) await submit();
      }
      if (failure === undefined) await submit();
      await Promise.all(inFlight);
      if (failure !== undefined) throw failure;
      keepFirst();
      return {
        received,
        ...totals,
        rejections,
      };
    },
  };
}
