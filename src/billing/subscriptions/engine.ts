/**
 * The billing engine (DESIGN §8): what a subscription owes at each cycle boundary, at a
 * cancellation and at a rate-card change, written once per (subscription, period) and charged to
 * the saved method. One object that wires its parts, each in its own module:
 *
 * - reads: rate cards, pricing metrics, an environment's mode, provider and grace period (cached);
 * - builder: priced lines and new invoices (invoice-building.ts);
 * - settlement: charging invoices just written, paid or payment failed (settlement.ts);
 * - drafts: previewing and finalizing drafts at the end of their grace period (drafts.ts);
 * - lateUsage: adjustments for usage that arrived after its window was billed (late-usage.ts);
 * - cycles: closing due cycles, setting aside those that fail (cycle-close.ts).
 *
 * How an invoice's status may change is invoice-states.ts.
 */
import type { Yielder } from "../yielding.js";
import { CycleClose } from "./cycle-close.js";
import { Drafts } from "./drafts.js";
import type { EngineContext, EngineEvents } from "./engine-context.js";
import { InvoiceBuilder, type UsageMeter } from "./invoice-building.js";
import { LateUsage } from "./late-usage.js";
import type { PaymentProviders } from "./payments.js";
import type { BillingStores } from "./ports.js";
import { BillingReads, type EngineCatalog } from "./reads.js";
import { Settlement } from "./settlement.js";

export class BillingEngine {
  readonly reads: BillingReads;
  readonly builder: InvoiceBuilder;
  readonly settlement: Settlement;
  readonly drafts: Drafts;
  readonly lateUsage: LateUsage;
  readonly cycles: CycleClose;

  constructor(
    readonly stores: BillingStores,
    catalog: EngineCatalog,
    usage: UsageMeter,
    /** The payment provider of each environment mode (payments.ts): none for live, so far. */
    readonly payments: PaymentProviders,
    readonly now: () => Date,
    /** Told what went wrong where no caller can be (to log it). */
    readonly events: EngineEvents = {},
  ) {
    const ctx: EngineContext = { stores, now, events };
    this.reads = new BillingReads(stores, catalog, payments);
    this.builder = new InvoiceBuilder(this.reads, usage, now);
    this.settlement = new Settlement(ctx, this.reads);
    this.drafts = new Drafts(ctx, this.builder, this.settlement);
    this.lateUsage = new LateUsage(ctx, this.reads, this.builder, usage, this.settlement);
    this.cycles = new CycleClose(ctx, this.reads, this.builder, this.lateUsage, this.settlement);
  }

  /** Closes every cycle due by `now` (on real time or one test clock); see CycleClose.closeDue. */
  closeDue(now: Date, clockId: string | null, concurrency?: number, strict?: boolean, breathe?: Yielder, onBatch?: (closed: number) => void): Promise<number> {
    return this.cycles.closeDue(now, clockId, concurrency, strict, breathe, onBatch);
  }

  /** Finalizes every draft whose grace period ended by `now`; see Drafts.finalizeDue. */
  finalizeDue(now: Date, clockId: string | null, breathe?: Yielder): Promise<number> {
    return this.drafts.finalizeDue(now, clockId, breathe);
  }

  /** Bills the late usage of ended subscriptions; see LateUsage.billEnded. */
  billEndedLateUsage(clockId: string | null, breathe?: Yielder): Promise<number> {
    return this.lateUsage.billEnded(clockId, breathe);
  }
}
