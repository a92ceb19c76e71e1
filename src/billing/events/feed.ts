/**
 * Reading events (DESIGN §10): one, a page after a cursor, or a stream that follows new ones as
 * they commit (WatchEvents). The cursor is an event id; reads stop at the store's horizon, so
 * an event whose transaction commits after a later-numbered one is never skipped (see
 * WebhookStore.horizon), and a reader that resumes from the last id it got misses nothing.
 */
import { NotFoundError, Violations } from "../errors.js";
import { checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { EVENT_TYPES, type EventType, type StoredEvent, isEventType } from "./types.js";
import type { WebhookStore } from "./webhooks.js";

/** How long a missing event number holds readers back before it is taken for a rolled-back write. */
export const GAP_WAIT_MS = 10_000;

export interface FeedOptions {
  /** How often an open stream looks for new events. */
  pollMs: number;
  gapWaitMs: number;
}

export class EventFeed {
  constructor(
    private readonly store: WebhookStore,
    private readonly now: () => Date,
    private readonly options: FeedOptions = { pollMs: 250, gapWaitMs: GAP_WAIT_MS },
  ) {}

  private checkTypes(types: string[], v: Violations): EventType[] {
    types.forEach((t, i) => {
      if (!isEventType(t)) v.add(`types[${i}]`, `unknown event type ${JSON.stringify(t)}; one of ${EVENT_TYPES.join(", ")}`);
    });
    return types as EventType[];
  }

  async get(caller: Caller, id: string): Promise<StoredEvent> {
    const e = id === "" ? undefined : await this.store.event(caller.environmentId, id);
    if (!e) throw new NotFoundError("EVENT_NOT_FOUND", `event ${JSON.stringify(id)} not found`, { event_id: id });
    return e;
  }

  /** The cursor's position: after that event, or (empty) before the first. */
  private async position(caller: Caller, after: string, field: string): Promise<number> {
    if (after === "") return 0;
    const e = await this.store.event(caller.environmentId, after);
    if (!e) throw new NotFoundError("EVENT_NOT_FOUND", `${field}: event ${JSON.stringify(after)} not found`, { event_id: after });
    return e.seq;
  }

  async list(caller: Caller, after: string, types: string[], limit?: number): Promise<{ events: StoredEvent[]; hasMore: boolean }> {
    const v = new Violations();
    const page = checkPage(limit, 0, v);
    const wanted = this.checkTypes(types, v);
    v.throwIfAny();
    const from = await this.position(caller, after, "after");
    const now = this.now();
    // The environment's next events (of the types asked for) by its own index, whatever the other
    // environments wrote meanwhile; then how many of them can be given without skipping one not
    // yet committed.
    const next = await this.store.eventsBetween(caller.environmentId, from, Number.MAX_SAFE_INTEGER, wanted, page.limit + 1);
    if (next.length === 0) return { events: [], hasMore: false };
    const last = (next[next.length - 1] as StoredEvent).seq;
    const h = await this.store.readableUpTo(from, last, this.options.gapWaitMs, now);
    // An event older than the gap wait is readable whatever lies below it (WebhookStore.horizon).
    const settled = now.getTime() - this.options.gapWaitMs;
    const readable = next.reduce((upto, e) => (e.createdAt.getTime() <= settled ? Math.max(upto, e.seq) : upto), h.upto);
    const rows = next.filter((e) => e.seq <= readable);
    // Cut at the bound of the walk (not at a gap): the rest is there, and a next call reaches it.
    if (h.limited && rows.length < next.length) return { events: rows.slice(0, page.limit), hasMore: true };
    return { events: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }

  /** Events after `after` (empty: from now on), then each new one, until `signal` aborts. */
  async *watch(caller: Caller, after: string, types: string[], signal: AbortSignal): AsyncGenerator<StoredEvent> {
    const v = new Violations();
    const wanted = this.checkTypes(types, v);
    v.throwIfAny();
    let cursor = after === "" ? await this.store.lastSeq() : await this.position(caller, after, "after");
    while (!signal.aborted) {
      const { upto } = await this.store.horizon(cursor, this.options.gapWaitMs, this.now());
      if (upto > cursor) {
        let from = cursor;
        for (;;) {
          const rows = await this.store.eventsBetween(caller.environmentId, from, upto, wanted, 500);
          for (const e of rows) {
            if (signal.aborted) return;
            yield e;
          }
          if (rows.length < 500) break;
          from = (rows[rows.length - 1] as StoredEvent).seq;
        }
        cursor = upto;
        continue;
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, this.options.pollMs);
        function done() {
          clearTimeout(t);
          signal.removeEventListener("abort", done);
          resolve();
        }
        signal.addEventListener("abort", done);
      });
    }
  }
}
