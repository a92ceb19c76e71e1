/**
 * Credit alerts (DESIGN §14): per subject and currency, `credit.balance_low` when available credit
 * (available.ts) falls below the subject's `low_balance_threshold`, `credit.depleted` when it
 * reaches ≤ 0, and the auto top-up (top-up.ts) when it falls below the top-up's threshold, each
 * once per crossing.
 *
 * Each (subject, currency, kind) has a state row (credit_alert_state): `below` true once the crossing was acted on
 * (the event written, the top-up bought), set back to false (re-armed, nothing written) when
 * available credit is back at or above the line (e.g. after a grant). The row is written (not
 * below) before its first move, outside any transaction; then it changes by a conditional update
 * in the same transaction as the event (the outbox), so among several servers evaluating the same
 * subject at once exactly one changes it and fires, and the others wait for that row's lock
 * rather than deadlock (the store says why).
 *
 * An auto top-up buys at most once per crossing: the move below counts the crossing on the row
 * (`crossings`, in the statement that moves it), and the purchase's key is derived from that
 * number alone, so a purchase repeated for it finds the first one (its grant's ID is derived from
 * the key, a primary key). A purchase that fails re-arms the row (a later evaluation tries again,
 * as a new crossing) only when the crossing's grant does not exist: one written before the failure
 * (a commit whose answer was lost) has bought, and a second crossing would buy again.
 * A crossing whose move below committed but whose purchase did not (the process died between
 * them, or the purchase failed and so did the re-arm; or no payment method was on file then) is
 * bought by a later evaluation (a minute or more after the move, UNBOUGHT_AFTER_MS) that finds the
 * row below, available credit still below the line and the crossing's grant absent, when a payment
 * method is on file, with the crossing's own key.
 *
 * When it is evaluated (see `evaluate`): after an invoice's finalization spent credit, after a
 * grant, a void or an expiry, and by the scheduler on every run for the subjects with settings on
 * that clock or on real time (usage lowers available credit between invoices).
 */
import type { Decimal } from "../money.js";
import { ZERO, dec, formatDecimal } from "../money.js";
import { AbortedError } from "../errors.js";
import type { CreditAlertPayload, NewEvent } from "../events/types.js";
import type { Subscription } from "../subscriptions/types.js";
import { type UsagePricing, currencyOf, takenOffBalance } from "./available.js";
import type { AlertKind, AlertState, CreditStore } from "./ports.js";
import { purchaseIds } from "./purchase-keys.js";
import type { CreditSettings } from "./types.js";

/** What alerts read and write of credits (the credit store). */
export type AlertStore = Pick<CreditStore, "get" | "balances" | "spendableOfAll" | "getSettings" | "getAlertState" | "ensureAlertState" | "transaction">;

/** The purchase key of an auto top-up: the subject, currency and number of its crossing (never the wall clock). */
export const topUpKey = (s: Pick<AlertState, "subjectId" | "currency">, crossing: number): string => `credit_top_up:${s.subjectId}:${s.currency}:${crossing}`;

/** Buys the auto top-up of one crossing (top-up.ts); the number of grants bought (0 or 1). */
export interface TopUpBuyer {
  topUp(environmentId: string, settings: CreditSettings, crossingKey: string, at: Date): Promise<number>;
  /** Whether a top-up of the subject would be bought (a payment method on file); reads, tells nothing. */
  canBuy(environmentId: string, subjectId: string): Promise<boolean>;
}

/** What an evaluation reads of billing: the engine's pricing and the subject's subscriptions. */
export interface AlertBilling extends UsagePricing {
  stores: UsagePricing["stores"] & { subscriptions: { running(environmentId: string, subjectId: string): Promise<Subscription[]> } };
}

/** A currency's figures at one evaluation, its settings, and which of its alerts are below. */
interface Standing {
  balance: Decimal;
  available: Decimal;
  settings: CreditSettings | undefined;
  below: Set<AlertKind>;
  /** The top_up state row as read (its crossing's number), when there is one. */
  topUp: AlertState | undefined;
}

const KINDS: readonly AlertKind[] = ["top_up", "balance_low", "depleted"];

/**
 * How long after its move below (by the subject's clock) a crossing with no grant is taken as
 * never bought: before that its mover may still be buying it, and another evaluation buying too
 * (idempotent, it finds the first) would answer early with the top-up counted and re-arm alerts
 * that slower concurrent evaluations, on figures read before the purchase, then fire again.
 */
export const UNBOUGHT_AFTER_MS = 60_000;

export class CreditAlerts {
  constructor(
    private readonly store: AlertStore,
    private readonly billing: AlertBilling,
    private readonly topUps?: TopUpBuyer,
  ) {}

  /**
   * Per currency the subject has had credit in or has settings for (among its subscriptions'
   * currencies): the balance, available credit, settings and the alerts that are below.
   */
  private async standings(environmentId: string, subjectId: string): Promise<Map<string, Standing>> {
    const balances = new Map((await this.store.balances(environmentId, subjectId)).map((b) => [b.currency, b.balance]));
    const running = (await this.billing.stores.subscriptions.running(environmentId, subjectId)).filter((s) => s.status === "active");
    const currencies = new Set(balances.keys());
    for (const s of running) currencies.add(currencyOf(await this.billing.reads.card(s.environmentId, s.rateCardId)));
    const settings = new Map<string, CreditSettings | undefined>();
    for (const c of currencies) {
      const found = await this.store.getSettings(environmentId, subjectId, c);
      if (found || balances.has(c)) settings.set(c, found);
    }
    // Neither credit nor settings: nothing to evaluate, and no usage to price.
    if (settings.size === 0) return new Map();
    // As billing state counts it (available.ts): the credit the closes can draw on less the usage so far.
    const taken = await takenOffBalance(this.billing, this.store, { environmentId, subjectId }, running, balances);
    const out = new Map<string, Standing>();
    for (const [currency, found] of settings) {
      const below = new Set<AlertKind>();
      let topUp: AlertState | undefined;
      for (const kind of KINDS) {
        const row = await this.store.getAlertState(environmentId, subjectId, currency, kind);
        if (row?.below) below.add(kind);
        if (kind === "top_up") topUp = row;
      }
      const balance = dec(balances.get(currency) ?? "0");
      out.set(currency, { balance, available: balance.minus(taken.get(currency) ?? ZERO), settings: found, below, topUp });
    }
    return out;
  }

  /**
   * Evaluates the subject's alerts at `at` (its clock's time or real time): top-ups first (what
   * they buy counts before the alerts are decided), then balance_low and depleted. Returns how
   * many events and top-ups it wrote. A subject without settings and without credit: nothing.
   */
  async evaluate(environmentId: string, subjectId: string, at: Date): Promise<number> {
    let now = await this.standings(environmentId, subjectId);
    let n = 0;
    if (this.topUps) {
      let bought = 0;
      for (const [currency, st] of now) {
        const top = st.settings?.autoTopUp;
        if (!top) continue;
        const below = st.available.lt(dec(top.threshold));
        const moved = await this.cross({ environmentId, subjectId, currency, kind: "top_up", below, changedAt: at }, st);
        if (moved) bought += await this.buy(moved, st.settings as CreditSettings);
        else if (below && st.topUp?.below && at.getTime() - st.topUp.changedAt.getTime() >= UNBOUGHT_AFTER_MS) bought += await this.unbought(st.topUp, st.settings as CreditSettings);
      }
      if (bought > 0) {
        n += bought;
        now = await this.standings(environmentId, subjectId);
      }
    }
    for (const [currency, st] of now) {
      const threshold = st.settings?.lowBalanceThreshold ?? null;
      const alert: CreditAlertPayload = { subjectId, currency, balance: formatDecimal(st.balance), available: formatDecimal(st.available), threshold };
      const lines: [AlertKind, boolean][] = [["depleted", !st.available.gt(0)]];
      if (threshold !== null) lines.push(["balance_low", st.available.lt(dec(threshold))]);
      for (const [kind, below] of lines) {
        const type = kind === "depleted" ? "credit.depleted" : "credit.balance_low";
        if (await this.cross({ environmentId, subjectId, currency, kind, below, changedAt: at }, st, alertEvent(environmentId, type, alert))) n++;
      }
    }
    return n;
  }

  /**
   * Moves the state row to `s.below` when it is not there yet, with `event` in the same
   * transaction when it moves below. The row as that move left it (its crossing counted) when
   * this call moved it below (the one to act on the crossing); re-arming (back above) writes the
   * row alone and returns undefined, as does a row another evaluation moved.
   */
  private async cross(s: AlertState, st: Standing, event?: NewEvent): Promise<AlertState | undefined> {
    if (s.below === st.below.has(s.kind)) return undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        // The row exists before the transaction that moves it (its first write, a statement of its
        // own): concurrent evaluators then wait their turn on that row rather than deadlock. Inside
        // the retry: a conflict on that statement is retried like one on the transaction.
        if (s.below) await this.store.ensureAlertState(s);
        return await this.store.transaction(async (tx) => {
          if (!(await tx.setAlertState(s)) || !s.below) return undefined;
          if (event) await tx.emit([event]);
          return (await tx.getAlertState(s.environmentId, s.subjectId, s.currency, s.kind)) ?? s;
        });
      } catch (err) {
        // A conflict the database reports (a lock wait timeout on a busy server): read what the
        // other writer left, and try again only when the row has still not moved.
        if (!(err instanceof AbortedError) || attempt >= 5) throw err;
        const now = await this.store.getAlertState(s.environmentId, s.subjectId, s.currency, s.kind);
        if ((now?.below ?? false) === s.below) return undefined;
      }
    }
  }

  /**
   * The top-up of a crossing found below (`row`, as read, moved at least UNBOUGHT_AFTER_MS ago;
   * available credit still below the line) whose purchase never committed: the move below
   * committed, then the process died (or the purchase's transaction failed and so did the
   * re-arm), or there was no payment method on file then and there is now. Bought with the crossing's own key (a repeat finds the first purchase).
   * One primary-key read (the crossing's grant) when it was bought; when it was not, the payment
   * method's check (nothing bought nor told without one) and the row read again (still below at
   * that crossing: a stale read of an older crossing buys nothing).
   */
  private async unbought(row: AlertState, settings: CreditSettings): Promise<number> {
    const key = topUpKey(row, row.crossings ?? 0);
    if (await this.store.get(row.environmentId, purchaseIds(row.environmentId, key).grantId)) return 0;
    if (!(await (this.topUps as TopUpBuyer).canBuy(row.environmentId, row.subjectId))) return 0;
    const now = await this.store.getAlertState(row.environmentId, row.subjectId, row.currency, "top_up");
    if (!now?.below || (now.crossings ?? 0) !== (row.crossings ?? 0)) return 0;
    return this.buy(now, settings);
  }

  /**
   * Buys the top-up of the crossing `s` (the row as its move below left it), keyed by its number:
   * a repeat for the same crossing finds the first purchase. When that fails, the row is re-armed
   * (only at that crossing) so a later evaluation tries again, unless the crossing's grant exists:
   * written before the failure, it was bought (its charge, if not made, is planned for dunning).
   */
  private async buy(s: AlertState, settings: CreditSettings): Promise<number> {
    const crossing = s.crossings ?? 0;
    const key = topUpKey(s, crossing);
    try {
      return await (this.topUps as TopUpBuyer).topUp(s.environmentId, settings, key, s.changedAt);
    } catch (err) {
      if (await this.store.get(s.environmentId, purchaseIds(s.environmentId, key).grantId)) return 1;
      await this.store.transaction((tx) => tx.setAlertState({ ...s, below: false }, crossing));
      throw err;
    }
  }
}

function alertEvent(environmentId: string, type: "credit.balance_low" | "credit.depleted", alert: CreditAlertPayload): NewEvent {
  return { type, environmentId, resource: { kind: "credit_alert", alert } };
}
