/**
 * Property, through the real server on MariaDB and SQLite: any instant the service accepts,
 * written in any RFC 3339 form it accepts, is stored and read back as exactly that millisecond —
 * as a test clock's frozen_time, and as a usage event's timestamp (a summary over exactly that
 * millisecond counts it; one over the next millisecond does not).
 */
import test from "ava";
import fc from "fast-check";
import { END_INSTANT } from "../../src/billing/time.js";
import { ok } from "../helpers/clients.js";
import { STORES } from "../helpers/db.js";
import { format, inRangeMs, style } from "../helpers/instants.js";
import { useServer } from "../helpers/server.js";

const RUNS = 60;

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: a test clock's frozen_time reads back as the millisecond written, in any accepted form`, async (t) => {
    const key = await server.freshKey("test");
    await fc.assert(
      fc.asyncProperty(inRangeMs, style, async (ms, s) => {
        const text = format(ms, s);
        const made = await ok(server, key, "POST", "/test-clocks", { name: "p", frozen_time: text });
        const read = await ok(server, key, "GET", `/test-clocks/${made.id}`);
        if (Date.parse(made.frozen_time) !== ms || Date.parse(read.frozen_time) !== ms) {
          throw new Error(`${text} (${new Date(ms).toISOString()}) came back as ${made.frozen_time} / ${read.frozen_time}`);
        }
      }),
      { numRuns: RUNS },
    );
    t.pass();
  });

  test(`${store}: a usage event's timestamp is stored as the millisecond written, in any accepted form`, async (t) => {
    const key = await server.freshKey("test");
    const metric = await ok(server, key, "POST", "/pricing-metrics", { event_name: "tick", name: "Ticks", unit: "tick", aggregation: { aggregation_type: "count" } });
    const at = (ms: number) => new Date(ms).toISOString();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(inRangeMs, style, async (ms, s) => {
        const text = format(ms, s);
        const subject = await ok(server, key, "POST", "/subjects", {});
        const r = await ok(server, key, "POST", "/usage-events", { idempotency_key: `e${n++}`, subject_id: subject.id, event_name: "tick", data: {}, timestamp: text });
        if (r.status !== "accepted") throw new Error(`${text}: ${JSON.stringify(r)}`);
        const count = async (from: number) =>
          (
            await ok(server, key, "POST", `/pricing-metrics/${metric.id}/summary`, { subject_id: subject.id, period: { start: at(from), end: at(from), inclusive_start: true, inclusive_end: true } })
          )[0].value;
        const exactly = await count(ms);
        const after = ms + 1 < END_INSTANT ? await count(ms + 1) : null;
        if (exactly !== "1" || after !== null) throw new Error(`${text} (${at(ms)}): counted ${exactly} at it and ${after} 1 ms later`);
      }),
      { numRuns: RUNS },
    );
    t.pass();
  });
}
