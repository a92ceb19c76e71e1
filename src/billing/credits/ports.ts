/**
 * Storage ports of credits (DESIGN §14). Reads outside a transaction (CreditStore), and the writes
 * a transaction makes (CreditWrites): the credit use cases open their own transaction
 * (CreditStore.transaction); an invoice's finalization spends credit inside the billing
 * transaction it already has (BillingTx.credits). src/db implements both on SQL.
 *
 * The balance of a subject in a currency is the sum of its ledger entries, which always equals
 * the sum of `remaining` of its grants that count (active and depleted ones; a grant pending
 * payment or failed has no ledger entry). Spending is one conditional statement: a grant never
 * gives more than it has, whatever runs at the same time.
 */
import type { EventWrites } from "../events/types.js";
import type { Page, PageResult } from "../pagination.js";
import type { CreditGrant, CreditSettings, GrantStatus, LedgerEntry } from "./types.js";

export type AlertKind = "balance_low" | "depleted" | "top_up";

/** Whether a subject's available credit in a currency is below one of its thresholds, and since when. */
export interface AlertState {
  environmentId: string;
  subjectId: string;
  currency: string;
  kind: AlertKind;
  below: boolean;
  changedAt: Date;
  /**
   * As read: how many times the row moved below, so the number of its latest crossing (a move
   * below counts it in the same statement). Not written from here.
   */
  crossings?: number;
}

export interface GrantFilter {
  subjectId?: string;
  status?: GrantStatus;
}

/** Credit writes inside a transaction. */
export interface CreditWrites {
  /**
   * Inserts a grant and, unless it is pending payment (or failed), its positive ledger entry
   * ("grant", "proration" for a proration credit, "credit_note" for a credit note's, "invoice_credit"
   * for a negative invoice's) of its whole amount.
   */
  insertGrant(
    g: CreditGrant,
    entry?: { type: "grant" | "proration" | "credit_note" | "invoice_credit"; invoiceId: string | null; description: string; creditNoteId?: string },
  ): Promise<LedgerEntry | undefined>;
  /** The grant, locked until the transaction ends (on SQLite the transaction holds the file). */
  lockGrant(environmentId: string, id: string): Promise<CreditGrant | undefined>;
  /**
   * The grants of a subject spendable at `at` in one currency, in the order of §14: priority
   * ascending, then the soonest expires_at (none last), then the oldest. Spendable: active,
   * remaining > 0, effective_at ≤ at, and expires_at absent or not before `at` (a grant expiring
   * at `at` pays an invoice final then: expiry runs after the closes of that instant).
   */
  spendable(environmentId: string, subjectId: string, currency: string, at: Date): Promise<CreditGrant[]>;
  /**
   * Takes `amount` (> 0) from the grant, if it still has that much: one conditional UPDATE
   * (`remaining >= amount`), then an "application" ledger entry of −amount on `invoiceId` (at
   * most once per grant and invoice: a second one throws AlreadyExistsError). A grant left at 0
   * becomes depleted. False (and nothing written) when the grant no longer has that much.
   * `environmentId`: the grant's environment, which every statement then names (the sharding
   * key); the billing code always gives it.
   */
  spend(grantId: string, amount: string, invoiceId: string, description: string, at: Date, environmentId: string): Promise<boolean>;
  /**
   * A pending paid grant becomes active with its "grant" ledger entry; undefined (nothing
   * written) when it was not pending payment.
   */
  activate(environmentId: string, grantId: string, at: Date): Promise<CreditGrant | undefined>;
  /** A pending paid grant becomes failed (nothing was granted); undefined when it was not pending. */
  fail(environmentId: string, grantId: string): Promise<CreditGrant | undefined>;
  /**
   * What is left of an active or depleted grant leaves the balance: remaining → 0 with a "void"
   * (or "expiry") ledger entry of −remaining (none when nothing was left), status voided (or
   * expired) and its time. Undefined when the grant was in neither status. `entry`: the entry's
   * invoice and description (the voided invoice whose total below 0 granted it); absent: none, "Voided" or "Expired".
   */
  close(environmentId: string, grantId: string, how: "void" | "expiry", at: Date, entry?: { invoiceId: string; description: string }): Promise<CreditGrant | undefined>;
  /**
   * A refund takes back `amount` (> 0) of an active grant's remaining (a credit note refunding the
   * purchase that bought it, DESIGN §15): one conditional UPDATE (`remaining >= amount`), then a
   * "void" ledger entry of −amount on the refunded purchase's invoice (`entry.invoiceId`), kept
   * apart by the credit note's ID (`entry.creditNoteId`: several partial refunds of one purchase
   * each have their entry). Left at 0, the grant becomes voided at `at`. Undefined (nothing
   * written) when the grant is not active or no longer has that much.
   */
  takeBack(environmentId: string, grantId: string, amount: string, entry: { invoiceId: string; creditNoteId: string; description: string }, at: Date): Promise<CreditGrant | undefined>;
  getSettings(environmentId: string, subjectId: string, currency: string): Promise<CreditSettings | undefined>;
  putSettings(environmentId: string, s: CreditSettings, at: Date): Promise<void>;
  getAlertState(environmentId: string, subjectId: string, currency: string, kind: AlertKind): Promise<AlertState | undefined>;
  /**
   * Records the state if it changes `below`; true when it did: one conditional statement on the
   * row, so of two concurrent calls one wins and its caller fires the event (each crossing fires
   * once, even with N servers). An absent row counts as not below and is left absent: a move below
   * needs the row written first (CreditStore.ensureAlertState). A move below counts a crossing
   * (`crossings` + 1). `crossing`: a move back above (a re-arm) only of the row still at that
   * crossing (a later crossing is left as it is).
   */
  setAlertState(s: AlertState, crossing?: number): Promise<boolean>;
}

/** Everything a credit use case writes in one transaction, and its events. */
export type CreditTx = CreditWrites & EventWrites;

export interface CreditStore {
  get(environmentId: string, id: string): Promise<CreditGrant | undefined>;
  /** Grants in creation order (seq), of one subject and/or status. */
  list(environmentId: string, filter: GrantFilter, page: Page): Promise<PageResult<CreditGrant>>;
  /** A subject's ledger, oldest first, of one currency or every one. */
  ledger(environmentId: string, subjectId: string, currency: string | undefined, page: Page, newestFirst?: boolean): Promise<PageResult<LedgerEntry>>;
  /**
   * A subject's balance per currency (the sum of its ledger: the remaining of its active and
   * depleted grants), for every currency it has had credit in, in code order.
   */
  balances(environmentId: string, subjectId: string): Promise<{ currency: string; balance: string }[]>;
  /** As CreditWrites.spendable, outside a transaction (what a draft or billing state would apply). */
  spendable(environmentId: string, subjectId: string, currency: string, at: Date): Promise<CreditGrant[]>;
  /**
   * `spendable` of each query (subjects of environment `environmentId`), in their order, from one
   * read filtered per query (what billing state counts at each current close's finalization).
   */
  spendableOfAll(environmentId: string, queries: readonly { subjectId: string; currency: string; at: Date }[]): Promise<CreditGrant[][]>;
  /** A paid grant by the invoice that buys it. */
  byInvoice(environmentId: string, invoiceId: string): Promise<CreditGrant | undefined>;
  getSettings(environmentId: string, subjectId: string, currency: string): Promise<CreditSettings | undefined>;
  getAlertState(environmentId: string, subjectId: string, currency: string, kind: AlertKind): Promise<AlertState | undefined>;
  /**
   * Writes the row of `s`'s subject, currency and kind, not below, when it has none (nothing when
   * it is there, whatever it holds): one statement outside any transaction, whose key settles a
   * race. A move below (CreditWrites.setAlertState) then changes a row that exists, which
   * concurrent evaluators take in turn rather than deadlock over (a first write inside their
   * transactions did on MariaDB: gap locks).
   */
  ensureAlertState(s: AlertState): Promise<void>;
  /**
   * Active or depleted grants with remaining > 0 whose expires_at ≤ `now`, on real time (clockId
   * null) or one test clock (every environment when environmentId is null), earliest first.
   */
  dueExpiries(now: Date, clockId: string | null, limit: number, environmentId?: string | null): Promise<CreditGrant[]>;
  /** `fn` in one transaction; a deadlock or lock wait timeout is an AbortedError (retryable). */
  transaction<T>(fn: (tx: CreditTx) => Promise<T>): Promise<T>;
}
