/**
 * Open checkouts past their expiry, ended by the scheduler on real time: each is marked expired
 * under its row lock, and a credit purchase's ends with it as a declined one does (its invoice
 * void, its grant failed: HostedCheckout.endPurchase), so a purchase whose customer never came
 * back is not an open invoice for good. A page read ends an expired credit checkout it finds too
 * (hosted-checkout.ts); a test clock's checkouts expire on its time, when read.
 */
import type { BillingStores, BillingTx, CheckoutStore } from "./ports.js";
import type { CheckoutSession } from "./types.js";

/** How many expired checkouts one sweep ends at most. */
const SWEEP_LIMIT = 100;

export class CheckoutExpiry {
  constructor(
    private readonly stores: Pick<BillingStores, "transaction">,
    private readonly checkouts: Pick<CheckoutStore, "expiredOpen">,
    /** In the transaction that marks `session` expired, under its lock: what it was for ends. */
    private readonly end: (tx: BillingTx, session: CheckoutSession, at: Date) => Promise<void>,
  ) {}

  /** Ends the open checkouts expired by `now`; how many it ended. */
  async runDue(now: Date): Promise<number> {
    let ended = 0;
    for (const c of await this.checkouts.expiredOpen(now, SWEEP_LIMIT)) {
      const done = await this.stores.transaction(async (tx) => {
        const locked = await tx.lockCheckout(c.token);
        // Completed, cancelled or ended meanwhile: nothing to do.
        if (locked?.status !== "open" || locked.expiresAt.getTime() > now.getTime()) return false;
        await tx.updateCheckoutStatus(locked.id, "expired", locked.environmentId);
        await this.end(tx, locked, now);
        return true;
      });
      if (done) ended++;
    }
    return ended;
  }
}
