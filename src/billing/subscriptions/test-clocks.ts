/**
 * Test clocks: frozen time for test environments; advancing one runs everything due on it up to its
 * new time (the scheduler). A clock is `advancing` from the move of its time until that run ended,
 * then `ready`; an advance cut short (the server died), or one that waited 15 s for a subscription
 * another transaction held (Scheduler.runClockDue), is finished by the scheduler's tick
 * (Scheduler.finishAdvances) or by advancing the clock again to the same time.
 */
import { AbortedError, FailedPreconditionError, NotFoundError, Violations, invalid } from "../errors.js";
import { newId } from "../ids.js";
import { type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { checkInstant } from "../time.js";
import type { Lookups } from "./lookups.js";
import type { StoredTestClock } from "./ports.js";
import type { Scheduler } from "./scheduler.js";

export class TestClocks {
  constructor(
    private readonly lookups: Lookups,
    private readonly scheduler: Scheduler,
    /** Aborted when the server stops: an advance in flight then ends between two steps (Scheduler.runDue). */
    private readonly stop?: AbortSignal,
  ) {}

  private get stores() {
    return this.lookups.stores;
  }

  async createClock(caller: Caller, input: { name: string; frozenTime?: Date }): Promise<StoredTestClock> {
    if (caller.mode !== "test") throw new FailedPreconditionError("TEST_CLOCKS_TEST_ONLY", "test clocks exist only in test environments");
    const v = new Violations();
    if (input.name.length > 255) v.add("name", "must have at most 255 characters");
    if (!input.frozenTime) v.add("frozen_time", "is required");
    const frozenTime = checkInstant(input.frozenTime, v, "frozen_time");
    v.throwIfAny();
    const clock = { id: newId("clk"), environmentId: caller.environmentId, name: input.name, frozenTime: frozenTime as Date, createdAt: this.lookups.engine.now() };
    await this.stores.clocks.insert(clock);
    return { ...clock, status: "ready", advanceStartedAt: null };
  }

  async clock(caller: Caller, id: string): Promise<StoredTestClock> {
    const c = id === "" ? undefined : await this.stores.clocks.get(caller.environmentId, id);
    if (!c) throw new NotFoundError("TEST_CLOCK_NOT_FOUND", `test clock ${JSON.stringify(id)} not found`, { test_clock_id: id });
    return c;
  }

  /** The environment's test clocks, newest first. */
  async listClocks(caller: Caller, limit?: number, offset?: number): Promise<PageResult<StoredTestClock>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.stores.clocks.list(caller.environmentId, page);
  }

  /**
   * Moves the clock forward (and sets it `advancing`, in the same statement), runs everything due on
   * it up to the new time, then sets it `ready` (unless a later advance moved it meanwhile: that one
   * owns it) before returning. Cut short (the server stopping: UnavailableError; or dying), the
   * clock is at its new time, `advancing`, with part of the work done, each part whole; advancing it
   * again to the same time runs the rest, as does the scheduler once the advance's lease ran out.
   */
  async advanceClock(caller: Caller, id: string, to: Date | undefined): Promise<StoredTestClock> {
    const clock = await this.clock(caller, id);
    const v = new Violations();
    if (!to) v.add("frozen_time", "is required");
    checkInstant(to, v, "frozen_time");
    v.throwIfAny();
    if (!to) invalid("frozen_time", "is required");
    if (to.getTime() < clock.frozenTime.getTime()) {
      invalid("frozen_time", `must not be before the clock's time ${clock.frozenTime.toISOString()}: clocks only move forward`);
    }
    // An advance to a time is the same call however often it runs: run again, it finds the clock
    // there and runs what is left (each part once). So it does not mark its Idempotency-Key: an
    // advance cut short (`unavailable`, a database node lost) is run again by a retry with its key
    // rather than answered IDEMPOTENCY_OUTCOME_LOST (DESIGN §12).
    return this.stores.asScheduler(async () => {
      if (to.getTime() > clock.frozenTime.getTime() && !(await this.stores.clocks.advance(caller.environmentId, id, to, this.lookups.engine.now()))) {
        throw new AbortedError("TEST_CLOCK_MOVED", "the clock was moved past this time meanwhile");
      }
      // Left `advancing` when cycles are still held by another transaction after the wait (runClockDue).
      if (await this.scheduler.runClockDue(to, id, this.stop)) await this.stores.clocks.finish(caller.environmentId, id, to);
      return this.clock(caller, id);
    });
  }
}
