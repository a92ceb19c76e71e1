/**
 * What a hosted checkout charges when it completes, previewed with nothing written (DESIGN §15):
 * the invoice its completion would write (hosted-checkout.ts effectOf: a subscription's first
 * invoice, a change's invoice, a timeline's start), booked and credited as finalizeOpen would book
 * it now: line amounts → discounts → subtotal → tax → total → carried in → credits → amount due. The page shows
 * it, and a checkout's `amount` when it opens is the same as of then (checkout.ts).
 * - A subscribe checkout's coupon is not redeemed until the completion writes the subscription:
 *   the preview adds it first, as the subscription's own discount, before the subject's
 *   (redeemOnNewSubscription, leniently: one that can no longer be applied is left out). Nor is
 *   its subscription written, through which booking finds the card's default tax rates: the
 *   preview gives them (a timeline's start likewise).
 * - A change carries the subscription's proration credits onto its invoice, as writeSwitch does;
 *   a change whose subscription has a cycle due but not yet closed cannot be priced without
 *   closing it (a write): no preview then (undefined), the figure kept when it opened stands.
 * - An invoice written as a draft (a change's invoice of the old card's usage, in the environment's
 *   grace period) is charged when it finalizes, about the grace period after the completion: its
 *   amount due is what it would book now (`chargedAfterSeconds` says when), not 0, so the page
 *   and the checkout's `amount` show what completing it bills (usage reported meanwhile is added).
 * - Nothing is charged for an invoice without lines, nor for a timeline that starts later: 0.
 * - A credit purchase's invoice exists from the start: its amount due as it stands.
 */
import { refusal } from "../coupons/redeem.js";
import type { BookingDiscount } from "../coupons/types.js";
import { BillingError } from "../errors.js";
import { type Caller, systemCaller } from "../tenancy.js";
import { bookInvoice, carriedAndCredited, unbooked } from "./booking.js";
import type { SubscriptionChanges } from "./changes.js";
import type { Lookups } from "./lookups.js";
import type { BookingTx } from "./ports.js";
import { withCredits } from "./proration.js";
import type { CreateSubscriptionInput, Subscriptions } from "./subscribe.js";
import type { TimelineService } from "./timelines.js";
import { type CheckoutSession, type Commitment, type Invoice, amountDueOf } from "./types.js";

/** What completing a checkout now would charge. */
export interface CheckoutPreview {
  /** The invoice it would write and charge, booked and credited as of now; undefined: none now. */
  invoice: Invoice | undefined;
  /** What completing it bills (smallest units): the invoice's amount due as booked now, 0 when it bills nothing. */
  amountDue: string;
  /**
   * When that is charged: null at completion (an open invoice); n: about n seconds after it, when
   * the invoice, a draft for the environment's grace period, finalizes with its usage final.
   */
  chargedAfterSeconds: number | null;
}

/** Seconds from a draft's creation to its finalization (its grace period); null for an invoice final at once. */
function graceOf(inv: Invoice): number | null {
  if (inv.status !== "draft" || !inv.finalizesAt) return null;
  return Math.max(0, Math.round((inv.finalizesAt.getTime() - inv.createdAt.getTime()) / 1000));
}

/** The discount a coupon not yet redeemed would give a new subscription (its ID a placeholder: nothing is recorded). */
function couponDiscount(c: { id: string; name: string; percentOff: string | null; amountOff: { value: string } | null; appliesToRateCodes: readonly string[] }): BookingDiscount {
  return { discountId: `preview:${c.id}`, couponId: c.id, name: c.name, percentOff: c.percentOff, amountOff: c.amountOff?.value ?? null, appliesToRateCodes: c.appliesToRateCodes };
}

type Checkout = Pick<CheckoutSession, "environmentId" | "subjectId" | "kind" | "payload">;

/** The invoice a completion would write; of a new subscription, its coupon and its card's default tax rates (not yet findable through it). */
interface Planned {
  invoice: Invoice;
  couponId?: string;
  cardTaxRateIds?: string[];
}

export class CheckoutPreviews {
  constructor(
    private readonly lookups: Lookups,
    private readonly subscriptions: Subscriptions,
    private readonly changes: SubscriptionChanges,
    private readonly timelines: TimelineService,
  ) {}

  private get stores() {
    return this.lookups.stores;
  }

  /**
   * What completing `session` now would charge (see the file's comment); undefined when it cannot
   * be priced now (what it was for can no longer happen, or a change's cycle close is due).
   */
  async preview(session: Checkout): Promise<CheckoutPreview | undefined> {
    if (session.kind === "credit") {
      const id = (session.payload as { invoiceId?: string }).invoiceId;
      const inv = id === undefined ? undefined : await this.stores.invoices.get(session.environmentId, id);
      return inv && { invoice: inv, amountDue: amountDueOf(inv), chargedAfterSeconds: null };
    }
    let planned: Planned | null;
    try {
      planned = await this.planned(session);
    } catch (err) {
      if (err instanceof BillingError) return undefined;
      throw err;
    }
    if (!planned) return { invoice: undefined, amountDue: "0", chargedAfterSeconds: null };
    const invoice = await this.booked(planned);
    // A draft is booked as it would finalize now: what its finalization charges, usage so far.
    const charged = (invoice.status === "open" || invoice.status === "draft") && invoice.lines.length > 0;
    return { invoice, amountDue: charged ? amountDueOf(invoice) : "0", chargedAfterSeconds: charged ? graceOf(invoice) : null };
  }

  /** The invoice completing `session` would write, built as effectOf builds it (null: none now). */
  private async planned(session: Checkout): Promise<Planned | null> {
    const caller: Caller = systemCaller(session.environmentId, (await this.lookups.engine.reads.modeOf(session.environmentId)) ?? "test");
    const subject = await this.lookups.subject(caller, session.subjectId);
    if (session.kind === "subscribe") {
      const input = (session.payload as { request: CreateSubscriptionInput & { commitment?: Commitment | null } }).request;
      const card = await this.lookups.cardOf(caller, input.rateCardId);
      const terms = { quantities: input.fixedRateQuantities, multipliers: input.rateMultipliers, commitment: input.commitment ?? null };
      const now = await this.lookups.nowFor(subject);
      const start = await this.subscriptions.prepareNow(caller, subject, card, terms, input.metadata, input.timelineId || null, now, input.couponId);
      return { invoice: start.invoice, couponId: input.couponId, cardTaxRateIds: card.defaultTaxRateIds ?? [] };
    }
    if (session.kind === "change") {
      const p = session.payload as { subscriptionId: string; rateCardId: string; behavior: string };
      const change = await this.changes.prepareSwitch(caller, p.subscriptionId, { rateCardId: p.rateCardId, behavior: p.behavior }, true);
      return { invoice: (await this.stores.transaction((tx) => withCredits(tx, change.invoice, change.current.prorationCredits, change.invoice.createdAt))).invoice };
    }
    const p = session.payload as { timelineId: string; effectiveAt: string };
    const begin = await this.timelines.prepareBegin(caller, p.timelineId, new Date(p.effectiveAt), subject);
    return begin.start ? { invoice: begin.start.invoice, cardTaxRateIds: begin.start.card.defaultTaxRateIds ?? [] } : null;
  }

  /**
   * `inv` booked and credited as finalizeOpen would at its date, read as a draft's preview is
   * (previewBooking: no row locked, nothing recorded), with its coupon redeemed first and its
   * new subscription's card's tax rates.
   */
  private async booked({ invoice: inv, couponId, cardTaxRateIds }: Planned): Promise<Invoice> {
    const at = inv.createdAt;
    const draft: Invoice = { ...inv, status: "draft" };
    const booked = await this.stores.transaction(async (tx) => {
      const base = tx.booking;
      if (!base) return unbooked(draft);
      const coupon = couponId === undefined ? undefined : await tx.coupons?.getCoupon(inv.environmentId, couponId);
      const extra = coupon && !refusal(coupon, { currency: inv.currency }, at) ? [couponDiscount(coupon)] : [];
      const booking: BookingTx = Object.assign(Object.create(base) as BookingTx, {
        discountsFor: async (i: Invoice, when: Date) => [...extra, ...(await base.discountsFor(i, when))],
        parties: async (i: Invoice) => ({ ...(await base.parties(i)), ...(cardTaxRateIds ? { cardTaxRateIds } : {}) }),
      });
      return bookInvoice(booking, draft, at, false);
    });
    // What earlier invoices carried to the subject's next one (below the minimum charge), as finalizeOpen takes it: after booking, before credit.
    return { ...(await carriedAndCredited(this.stores, booked, at)), status: inv.status };
  }
}
