/**
 * Settlement: invoices just written are charged to a saved payment method through their
 * environment's provider and marked paid (`invoice.paid`), or stay open after a declined charge
 * (`invoice.payment_failed`). Settling never fails its caller: the change that wrote the
 * invoices has committed.
 */
import { purchasesMoved } from "../credits/purchase-states.js";
import { invoiceEvent } from "../events/types.js";
import { dec } from "../money.js";
import type { EngineContext } from "./engine-context.js";
import { checkTransition, transitionEvents } from "./invoice-states.js";
import { retryingRaces } from "./races.js";
import type { BillingReads } from "./reads.js";
import type { Dunning } from "../payments/attempts.js";
import type { Invoice, PaymentMethod } from "./types.js";
import { amountDueOf, chargeKey } from "./types.js";

export class Settlement {
  /**
   * Dunning (payments/attempts.ts), once wired: each charge is an attempt of its own, recorded with
   * its count, next retry and event under the invoice's row lock. Absent: one charge, paid or failed.
   */
  attempts?: Pick<Dunning, "attemptFirsts">;

  constructor(
    private readonly ctx: EngineContext,
    private readonly reads: BillingReads,
  ) {}

  /**
   * Settles one invoice just written, charging `paymentMethodId` (the subject's, or the one its
   * checkout saved); see settleWith.
   */
  async settle(invoice: Invoice, paymentMethodId: string | null): Promise<void> {
    if ((invoice.lines.length === 0 && !invoice.window) || invoice.status !== "open") return;
    // As written: credit applied when it was written changes what is due (credit-application.ts).
    const written = invoice.amountDue === undefined ? ((await this.ctx.stores.invoices.get(invoice.environmentId, invoice.id).catch(() => undefined)) ?? invoice) : invoice;
    await this.settleWith([written], async () => {
      const pm = paymentMethodId ? await this.ctx.stores.paymentMethods.get(paymentMethodId, invoice.environmentId) : undefined;
      return () => pm;
    });
  }

  /**
   * Open invoices become paid, each with its `invoice.paid` event in the same transaction (only
   * those still open: another runner or a void got there first otherwise). A transaction that
   * loses a deadlock to a cycle close is run again (retryingRaces): the card was charged, and
   * the invoice must say so.
   */
  private async markPaid(list: Invoice[], at: Date): Promise<void> {
    const pay = checkTransition("open", "paid");
    // One transaction per environment: none spans two (environment_id is the sharding key).
    for (const environmentId of new Set(list.map((i) => i.environmentId))) {
      const mine = list.filter((i) => i.environmentId === environmentId);
      await retryingRaces(() =>
        this.ctx.stores.transaction(async (tx) => {
          const moved = new Set(
            await tx.moveInvoices(
              mine.map((i) => i.id),
              pay.from,
              pay.to,
              at,
              environmentId,
            ),
          );
          const paid = mine.filter((i) => moved.has(i.id));
          // A credit purchase's grant follows its invoice (credits/purchase-states.ts).
          await tx.emit([...transitionEvents(pay, paid), ...(await purchasesMoved(tx, paid, pay.to, at))]);
        }),
      );
    }
  }

  /** A declined charge: the invoice stays open; `invoice.payment_failed` says so (written again if its transaction loses a deadlock). */
  private async paymentFailed(list: Invoice[]): Promise<void> {
    if (list.length === 0) return;
    await retryingRaces(() => this.ctx.stores.transaction((tx) => tx.emit(list.map((i) => invoiceEvent("invoice.payment_failed", i)))));
  }

  /** Settles invoices just written (a cycle close's, a finalized draft...), each charged to its subject's saved method; see settleWith. */
  async settleMany(list: Invoice[]): Promise<void> {
    if (list.length === 0) return;
    await this.settleWith(list, async (due) => {
      // Per environment (subject IDs are unique across environments, so one map holds them all).
      const methods = new Map<string, PaymentMethod>();
      for (const environmentId of new Set(due.map((i) => i.environmentId))) {
        const subjects = [...new Set(due.filter((i) => i.environmentId === environmentId).map((i) => i.subjectId))];
        for (const [k, v] of await this.ctx.stores.paymentMethods.ofSubjects(subjects, environmentId)) methods.set(k, v);
      }
      return (i) => methods.get(i.subjectId);
    });
  }

  /**
   * Settles invoices: zero totals paid at once, the rest charged to the method `methodsOf` finds
   * for each (none: it stays open until paid another way) through its environment's provider (a
   * live environment has none: never the test provider). Settling comes after the change that
   * wrote the invoices committed, so it never fails its caller: a read, a charge or a write that
   * fails leaves its invoices open (settleFailed says why), the change stands and its call succeeds.
   */
  private async settleWith(list: Invoice[], methodsOf: (due: Invoice[]) => Promise<(i: Invoice) => PaymentMethod | undefined>): Promise<void> {
    const at = this.ctx.now();
    // What credit left due is charged; nothing is charged at 0 (paid at once, like a 0 total).
    const due = list.filter((i) => dec(amountDueOf(i)).gt(0));
    const paid = list.filter((i) => dec(amountDueOf(i)).lte(0));
    const declined: Invoice[] = [];
    let methodOf: (i: Invoice) => PaymentMethod | undefined = () => undefined;
    if (due.length > 0) {
      try {
        methodOf = await methodsOf(due);
      } catch (err) {
        for (const i of due) this.ctx.events.settleFailed?.(i.id, err);
      }
    }
    // With dunning, first charges are made as attempts, a batch at a time (Dunning.attemptFirsts).
    const firsts: { invoice: Invoice; pm: PaymentMethod }[] = [];
    for (const i of due) {
      const pm = methodOf(i);
      if (!pm) continue;
      if (this.attempts) {
        firsts.push({ invoice: i, pm });
        continue;
      }
      try {
        const provider = await this.reads.providerFor(i.environmentId);
        if (!provider) continue;
        if ((await provider.charge(pm, amountDueOf(i), i.currency, chargeKey(i.id, 1))).ok) paid.push(i);
        else declined.push(i);
      } catch (err) {
        // The invoice is written: it stays open, and the other invoices are settled.
        this.ctx.events.settleFailed?.(i.id, err);
      }
    }
    if (this.attempts && firsts.length > 0) {
      try {
        // The first attempt, on the invoice's clock when it became open.
        await this.attempts.attemptFirsts(firsts, (x) => x.finalizesAt ?? x.createdAt);
      } catch (err) {
        // Each stays open with its first charge planned (or made and recorded): dunning goes on from there.
        for (const f of firsts) this.ctx.events.settleFailed?.(f.invoice.id, err);
      }
    }
    try {
      await this.markPaid(paid, at);
    } catch (err) {
      for (const i of paid) this.ctx.events.settleFailed?.(i.id, err);
    }
    try {
      await this.paymentFailed(declined);
    } catch (err) {
      for (const i of declined) this.ctx.events.settleFailed?.(i.id, err);
    }
  }
}
