/**
 * Reading invoices (by ID, a subject's, a hosted page's token; a draft as it would finalize now),
 * finalizing a draft early, and marking an open one void or uncollectible.
 */
import { voidNotesWithInvoice } from "../credit-notes/invoice-void.js";
import { purchasesMoved } from "../credits/purchase-states.js";
import { reinstateCredits, takeBackNegativeTotal } from "./credit-application.js";
import { recordCancels } from "../payments/cancels.js";
import { releaseCarried } from "../payments/carries.js";
import { FailedPreconditionError, NotFoundError, Violations } from "../errors.js";
import { type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import { checkInstant } from "../time.js";
import { canTransition, checkTransition, transitionEvents } from "./invoice-states.js";
import type { Lookups } from "./lookups.js";
import type { Invoice, InvoiceStatus } from "./types.js";

/** GET /invoices' filters as they arrive (ListInvoicesRequest); absent: no filter. */
export interface ListInvoicesInput {
  subjectId?: string;
  status?: string;
  createdFrom?: Date;
  createdTo?: Date;
  number?: string;
  limit?: number;
  offset?: number;
}

export const INVOICE_STATUSES: readonly InvoiceStatus[] = ["draft", "open", "paid", "void", "uncollectible"];

export class Invoices {
  constructor(
    private readonly lookups: Lookups,
    private readonly publicBaseUrl: () => string,
  ) {}

  private get stores() {
    return this.lookups.stores;
  }

  /** A subject's invoices, oldest first (the dashboard's subject page): listInvoices with that one filter. */
  async listInvoices(caller: Caller, subjectKey: string, limit?: number, offset?: number): Promise<PageResult<Invoice>> {
    return this.list(caller, { subjectId: subjectKey, limit, offset });
  }

  /**
   * GET /invoices (DESIGN §15): the environment's invoices, oldest first, of one subject (by ID or
   * external ID; "" or absent: every subject), status, created range [from, to) and number. A
   * draft is shown as it would finalize now, as on its own page.
   */
  async list(caller: Caller, input: ListInvoicesInput): Promise<PageResult<Invoice>> {
    const v = new Violations();
    const status = input.status || undefined;
    if (status !== undefined && !INVOICE_STATUSES.includes(status as InvoiceStatus)) v.add("status", `must be one of ${INVOICE_STATUSES.join(", ")}`);
    const from = checkInstant(input.createdFrom, v, "created_from");
    const to = checkInstant(input.createdTo, v, "created_to");
    if (from && to && to.getTime() < from.getTime()) v.add("created_to", "must not be before created_from");
    const page = checkPage(input.limit, input.offset, v);
    v.throwIfAny();
    const subjectId = input.subjectId ? (await this.lookups.subject(caller, input.subjectId)).id : undefined;
    const filter = { subjectId, status: status as InvoiceStatus | undefined, createdFrom: from, createdTo: to, number: input.number || undefined };
    const result = await this.stores.invoices.list(caller.environmentId, filter, page);
    return { ...result, items: await Promise.all(result.items.map((i) => this.preview(i))) };
  }

  /**
   * The environment's invoices across subjects, newest first, of one status or any (the operator
   * dashboard's list), or of one subscription ("": any; one of another environment: none).
   * Drafts are shown as stored: a list does not price each one again.
   */
  async listAll(caller: Caller, status: string, limit?: number, offset?: number, subscriptionId = ""): Promise<PageResult<Invoice>> {
    const v = new Violations();
    if (status !== "" && !INVOICE_STATUSES.includes(status as InvoiceStatus)) v.add("status", `must be one of ${INVOICE_STATUSES.join(", ")}`);
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.stores.invoices.listAll(caller.environmentId, { status: (status || undefined) as InvoiceStatus | undefined, subscriptionId: subscriptionId || undefined }, page);
  }

  /**
   * What the environment invoiced per currency in a calendar month (UTC) of `at`, and in the
   * month before: invoices finalized in it that bill something (not void).
   */
  async revenueByMonth(caller: Caller, at: Date): Promise<{ month: string; totals: { currency: string; total: string; count: number }[] }[]> {
    const start = (y: number, m: number) => new Date(Date.UTC(y, m, 1));
    const y = at.getUTCFullYear();
    const m = at.getUTCMonth();
    const months = [
      [start(y, m), start(y, m + 1)],
      [start(y, m - 1), start(y, m)],
    ] as const;
    return Promise.all(months.map(async ([from, to]) => ({ month: from.toISOString().slice(0, 7), totals: await this.stores.invoices.revenue(caller.environmentId, from, to) })));
  }

  async invoice(caller: Caller, id: string): Promise<Invoice> {
    return this.preview(await this.stored(caller, id));
  }

  private async stored(caller: Caller, id: string): Promise<Invoice> {
    const inv = id === "" ? undefined : await this.stores.invoices.get(caller.environmentId, id);
    if (!inv) throw new NotFoundError("INVOICE_NOT_FOUND", `invoice ${JSON.stringify(id)} not found`, { invoice_id: id });
    return inv;
  }

  /** A draft is shown as it would finalize now (late usage of its period lands on it); anything else as stored. */
  private async preview(inv: Invoice): Promise<Invoice> {
    try {
      return await this.lookups.engine.drafts.preview(inv);
    } catch {
      // A preview that cannot be priced (an amount beyond the limits) shows the draft as written;
      // finalizing it reports the problem.
      return inv;
    }
  }

  /**
   * Finalizes a draft now, without waiting for its grace period: usage recomputed, then open and
   * charged. FAILED_PRECONDITION unless it is a draft.
   */
  async finalize(caller: Caller, id: string): Promise<Invoice> {
    const inv = await this.stored(caller, id);
    if (!canTransition(inv.status, "open") || !(await this.lookups.engine.drafts.finalizeDraft(inv))) {
      const now = await this.stored(caller, id);
      throw new FailedPreconditionError("INVOICE_NOT_DRAFT", `invoice ${id} is ${now.status}; only a draft can be finalized`);
    }
    return this.invoice(caller, id);
  }

  /** Cancels a payment left waiting for the customer on an invoice that ended (payments/cancels.ts), once wired. */
  cancels?: { settle(ref: Pick<Invoice, "environmentId" | "id">): Promise<boolean> };

  /**
   * Marks an open invoice void or uncollectible. A charge of it waiting for the customer is to be
   * cancelled at the provider: written in the same transaction (the move locks the row), made
   * after the commit (payments/cancels.ts; the sweep makes it if this process dies first). A void
   * gives back the credit the invoice spent (DESIGN §14, as Stripe returns an applied balance on
   * void; an uncollectible invoice keeps it) in the transaction of the move, which only one of
   * concurrent voids makes: the grants' remaining restored, at the time of the invoice's clock;
   * and its credit notes (reduce_amount_due) voided with it, so that the books do not reverse it
   * twice (credit-notes/invoice-void.ts); and the carried debits it took released, pending again
   * for the subject's next invoice (payments/carries.ts; uncollectible keeps them, written off);
   * and the credit its total below 0 granted taken back, refused when some of it was spent
   * (INVOICE_CREDIT_SPENT, credit-application.ts takeBackNegativeTotal; uncollectible keeps it).
   */
  async setInvoiceStatus(caller: Caller, id: string, to: "void" | "uncollectible"): Promise<Invoice> {
    const inv = await this.stored(caller, id);
    const move = checkTransition("open", to);
    const at = this.lookups.engine.now();
    const clockAt = to === "void" ? await this.lookups.nowFor({ environmentId: inv.environmentId, testClockId: inv.clockId }) : at;
    const moved = await this.stores.transaction(async (tx) => {
      const done = (await tx.moveInvoices([inv.id], move.from, move.to, at, inv.environmentId)).length > 0;
      if (done && to === "void") await reinstateCredits(tx, inv, clockAt);
      // What its total below 0 granted goes with it (refused if some was spent): credit-application.ts.
      if (done && to === "void") await takeBackNegativeTotal(tx, inv, clockAt);
      // The carried debits it took are owed again (payments/carries.ts); written off, it keeps them.
      if (done && to === "void") await releaseCarried(tx, inv);
      // Its reduce_amount_due notes go with it (refused if a note moved money): credit-notes/invoice-void.ts.
      if (done && to === "void" && tx.creditNotes) await voidNotesWithInvoice(tx.creditNotes, inv, at);
      // Announced: invoice.voided, invoice.marked_uncollectible.
      const events = done ? [...transitionEvents(move, [inv]), ...(await purchasesMoved(tx, [inv], move.to, at))] : [];
      if (events.length > 0) await tx.emit(events);
      const cancels = done && tx.dunning ? await recordCancels(tx.dunning, inv.environmentId, [inv.id], at) : [];
      return { done, cancel: cancels.length > 0 };
    });
    if (!moved.done) {
      throw new FailedPreconditionError("INVOICE_NOT_OPEN", `invoice ${id} is ${inv.status}; only an open invoice can become ${to}`);
    }
    if (moved.cancel) await this.cancels?.settle(inv);
    return this.invoice(caller, id);
  }

  hostedInvoiceUrl(inv: Invoice): string {
    return `${this.publicBaseUrl()}/hosted/invoices/${inv.hostedToken}`;
  }

  async invoiceByToken(token: string): Promise<Invoice | undefined> {
    const inv = await this.stores.invoices.byToken(token);
    return inv ? this.preview(inv) : undefined;
  }
}
