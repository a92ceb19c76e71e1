/** Reading invoices (by ID, a subject's, a hosted page's token) and marking an open one void or uncollectible. */
import { FailedPreconditionError, NotFoundError, Violations } from "../errors.js";
import { type PageResult, checkPage } from "../pagination.js";
import type { Caller } from "../tenancy.js";
import type { Lookups } from "./lookups.js";
import type { Invoice } from "./types.js";

export class Invoices {
  constructor(
    private readonly lookups: Lookups,
    private readonly publicBaseUrl: () => string,
  ) {}

  private get stores() {
    return this.lookups.stores;
  }

  async listInvoices(caller: Caller, subjectKey: string, limit?: number, offset?: number): Promise<PageResult<Invoice>> {
    const v = new Violations();
    if (subjectKey === "") v.add("subject_id", "is required");
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, subjectKey);
    return this.stores.invoices.list(caller.environmentId, subject.id, page);
  }

  async invoice(caller: Caller, id: string): Promise<Invoice> {
    const inv = id === "" ? undefined : await this.stores.invoices.get(caller.environmentId, id);
    if (!inv) throw new NotFoundError("INVOICE_NOT_FOUND", `invoice ${JSON.stringify(id)} not found`, { invoice_id: id });
    return inv;
  }

  async setInvoiceStatus(caller: Caller, id: string, to: "void" | "uncollectible"): Promise<Invoice> {
    const inv = await this.invoice(caller, id);
    if (!(await this.stores.invoices.setStatus(inv.id, "open", to, this.lookups.engine.now()))) {
      throw new FailedPreconditionError("INVOICE_NOT_OPEN", `invoice ${id} is ${inv.status}; only an open invoice can become ${to}`);
    }
    return this.invoice(caller, id);
  }

  hostedInvoiceUrl(inv: Invoice): string {
    return `${this.publicBaseUrl()}/hosted/invoices/${inv.hostedToken}`;
  }

  invoiceByToken(token: string): Promise<Invoice | undefined> {
    return this.stores.invoices.byToken(token);
  }
}
