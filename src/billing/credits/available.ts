/**
 * Available credit (DESIGN §14): per currency, what a subject's credit leaves once the usage of
 * its active subscriptions' current periods so far is paid, so an app can stop a customer at zero.
 *
 * The usage so far is priced exactly as the period's invoice will price it: the cycle close's
 * own call (InvoiceBuilder.usageLinesOf over [usage since, period end), the subscription's card
 * and terms), on the usage committed so far. So it includes each usage rate's minimum and
 * maximum lines (a period's minimum is owed whatever the usage: it is counted from the first
 * day, in full) and leaves out fixed charges (billed in advance when the period opened, when
 * credit was applied to them already). Those lines are then booked as the close would book them
 * at the period's end (booking.ts: the subscription's discounts, the card's and buyer's taxes),
 * since credit pays an invoice's total after discounts and tax: with 20% tax, 5,000 of usage
 * takes 6,000 of credit. An amount-off discount is counted as if the usage were the invoice's
 * only lines (the close's invoice shares it with the next period's fixed charges).
 *
 * The closes are then played as they will spend credit (credit-application.ts applyCredits), per
 * currency, in the order they finalize: at the period's end, or, when the card bills usage and
 * the environment has a grace period, at the end of that grace (the draft spends credit then:
 * drafts.ts). Each close takes, of the grants spendable at that instant (in effect by then, not
 * expired before it, not voided: the credit store's `spendableOfAll`, one read for every instant)
 * with what the closes before left of them, what allocateCredits gives it of its booked lines in
 * the spend order (a grant limited to rate codes only on lines of those codes). applied = Σ
 * allocated, cost = Σ totals, uncovered = cost − applied. When uncovered > 0 the closes leave
 * that much due: available credit = −uncovered. Otherwise it is what is left of the grants a
 * close can still draw on: unrestricted ones spendable at one of those instants, and ones limited
 * to a rate code that one of those periods' cards bills (a usage or a fixed rate: a close also
 * bills the next period's fixed charges) or a draft's lines bill. A card billing `api` at 10, 200 units (2,000), a
 * grant of 5,000 limited to `api`: 3,000; limited to `api` while the 200 units are of `calls`, or
 * limited to `other`: −2,000 (the close charges 2,000). A seats-only card, a grant of 5,000
 * limited to `seats`: 5,000. Grants in effect only after every close, or expired by then (one
 * expiring at the period's end is gone at a finalization an hour of grace later), stay in the
 * balance and count nothing. A currency no active subscription or draft bills in has no close:
 * its available credit is its balance.
 *
 * A previous period's invoice still a draft in its grace period (the credit it will take is still
 * in the balance) is a close too, and comes first: each of the subject's drafts in the currency
 * (one read of them, only when the subject has credit) is priced as its finalization will price
 * it (Drafts.booked: its usage recomputed from the usage committed so far, its other lines as
 * written, booked, no credit read) in the order they finalize, through the same spent "once"
 * discounts as the current periods (drafts of every currency: a "once" coupon goes to the first
 * invoice), and takes, at its finalizesAt, what allocateCredits gives it, before the current
 * periods' closes. The drafts are read whenever the subject has credit (one indexed read: a draft
 * of a cancelled or paused subscription, or one whose finalization is retried, may be there
 * whatever the active subscriptions' windows), and read again after the grants: one finalized meanwhile is dropped (spendableAfterDrafts). One hour of grace, a grant of 2,000, 250 units at 10 (2,500) on Jan 20: inside the
 * grace on Feb 15 the draft will apply 2,000 and leave 500 due, so available is −500 (not the
 * balance of 2,000), as on Jan 20.
 *
 * Not counted (documented in the credits guide): a commitment true-up (known only at the period's
 * end), and the fixed charges of the next period, which a current close's invoice also bills: the
 * figure counts the usage so far (DESIGN §14), not everything the closes will charge.
 */
import type { RateCard } from "../catalog/types.js";
import type { Decimal } from "../money.js";
import { ZERO, dec, formatDecimal } from "../money.js";
import { bookedPreview } from "../subscriptions/booking.js";
import { chargeLines } from "../subscriptions/credit-application.js";
import type { InvoiceBuilder } from "../subscriptions/invoice-building.js";
import type { BillingStores } from "../subscriptions/ports.js";
import type { Drafts } from "../subscriptions/drafts.js";
import type { BillingReads } from "../subscriptions/reads.js";
import type { Invoice, Subscription } from "../subscriptions/types.js";
import { allocateCredits } from "./apply.js";
import type { CreditStore } from "./ports.js";
import type { CreditGrant } from "./types.js";

/** An amount per currency, as the contract's `Amount`. */
export interface CurrencyAmount {
  currencyCode: string;
  value: string;
}

/** What pricing usage so far reads: the engine's reads, invoice builder and stores (booking a preview), and its drafts (previewing one). */
export interface UsagePricing {
  reads: Pick<BillingReads, "card" | "rates" | "graceSeconds">;
  builder: Pick<InvoiceBuilder, "usageLinesOf" | "newInvoice">;
  stores: Pick<BillingStores, "transaction"> & { invoices: Pick<BillingStores["invoices"], "list"> };
  drafts: Pick<Drafts, "booked">;
}

/** What available credit reads of credits: a subject's grants spendable at each of several instants, in spend order, from one read. */
export type CreditReads = Pick<CreditStore, "spendableOfAll">;

/** The currency a card bills in (the engine's default when it names none). */
export const currencyOf = (card: Pick<RateCard, "currency">): string => card.currency ?? "USD";

/** An active subscription's usage so far as its close would book it (absent: no usage line yet), in its card's currency. */
interface PricedPeriod extends Close {
  s: Subscription;
}

/** A close: a current period's (PricedPeriod) or a previous period's draft, priced and booked (absent: nothing to pay). */
interface Close {
  currency: string;
  invoice: Invoice | undefined;
  /** When it spends credit: a period's end, plus the grace period when its card bills usage; a draft's finalizesAt. */
  finalizesAt: Date;
  /** The codes of the rates it bills (a current period: its card's, usage and fixed, at its terms; a draft: its lines'). */
  codes: readonly string[];
  /** A draft's id (absent: a current period's close). */
  draftId?: string;
}

/** The most drafts a subject has read in one page (one per subscription's closed window, a few). */
const DRAFTS_PAGE = 100;

/** The subject's drafts, one read (a page more only past DRAFTS_PAGE). */
async function draftsOf(engine: UsagePricing, environmentId: string, subjectId: string): Promise<Invoice[]> {
  const drafts: Invoice[] = [];
  for (let offset = 0; ; offset += DRAFTS_PAGE) {
    const page = await engine.stores.invoices.list(environmentId, { subjectId, status: "draft" }, { limit: DRAFTS_PAGE, offset });
    drafts.push(...page.items);
    if (!page.hasMore) return drafts;
  }
}

/**
 * The subject's drafts (one read), each booked as its finalization will book it (Drafts.booked:
 * its usage recomputed, nothing recorded, no credit read: the closes are played here), in the
 * order they finalize, through `spentOnce`: a "once" discount goes to the first, whatever its
 * currency. Those in a currency of `credited` are returned as closes.
 */
async function pricedDrafts(engine: UsagePricing, environmentId: string, subjectId: string, credited: ReadonlySet<string>, spentOnce: Set<string>): Promise<Close[]> {
  const drafts = await draftsOf(engine, environmentId, subjectId);
  const at = (i: Invoice) => (i.finalizesAt ?? i.createdAt).getTime();
  drafts.sort((a, b) => at(a) - at(b) || a.createdAt.getTime() - b.createdAt.getTime());
  const out: Close[] = [];
  for (const draft of drafts) {
    const invoice = await engine.drafts.booked(draft, spentOnce);
    if (!credited.has(invoice.currency)) continue;
    const codes = chargeLines(invoice).flatMap((l) => (l.rateCode === null ? [] : [l.rateCode]));
    out.push({ currency: invoice.currency, invoice: dec(invoice.total).gt(0) ? invoice : undefined, finalizesAt: new Date(at(draft)), codes, draftId: draft.id });
  }
  return out;
}

/** The usage so far of each of `active`'s current periods, priced and booked, in the order their closes finalize. */
async function pricedPeriods(engine: UsagePricing, active: readonly Subscription[], spentOnce: Set<string>): Promise<PricedPeriod[]> {
  const running = active.filter((s) => s.status === "active");
  const first = running[0];
  const grace = first ? await engine.reads.graceSeconds(first.environmentId) : 0;
  const found = [];
  for (const s of running) {
    const card = await engine.reads.card(s.environmentId, s.rateCardId);
    const { usage, fixed } = await engine.reads.rates(card, s.fixedRateQuantities);
    // As InvoiceBuilder.windowTerms: a card billing usage closes into a draft that finalizes (and spends credit) after the grace period.
    const finalizesAt = new Date(s.periodEnd.getTime() + (usage.length > 0 ? grace * 1000 : 0));
    found.push({ s, card, usage, finalizesAt, codes: [...usage, ...fixed].map((r) => r.code) });
  }
  found.sort((a, b) => a.finalizesAt.getTime() - b.finalizesAt.getTime() || a.s.periodEnd.getTime() - b.s.periodEnd.getTime());
  const out: PricedPeriod[] = [];
  // The close that finalizes first first: a "once" discount goes to the earliest invoice, so it is counted once (spentOnce).
  for (const { s, card, usage, finalizesAt, codes } of found) {
    const lines = usage.length === 0 ? [] : await engine.builder.usageLinesOf(card, usage, s, s.usageSince, s.periodEnd);
    let invoice: Invoice | undefined;
    if (lines.length > 0) {
      // As the close books it: a draft of those lines dated at the period's end, booked, nothing recorded.
      const draft = engine.builder.newInvoice(s, card, "usage-so-far", lines, s.usageSince, s.periodEnd, s.periodEnd, { finalizesAt: s.periodEnd });
      invoice = await bookedPreview(engine.stores, draft, s.periodEnd, spentOnce);
    }
    out.push({ s, currency: currencyOf(card), invoice, finalizesAt, codes });
  }
  return out;
}

/** Whether a close of a card billing `codes` could spend what is left of `g`. */
const drawable = (g: Pick<CreditGrant, "appliesToRateCodes">, codes: readonly string[]): boolean => g.appliesToRateCodes.length === 0 || g.appliesToRateCodes.some((c) => codes.includes(c));

/**
 * What one currency's closes take of credit (see the file's comment), in the order they finalize,
 * each given `spendable` (the grants spendable at its finalization, in spend order) with what the
 * closes before left of them: uncovered (their totals less what they apply) and left (what
 * remains of the grants one of them can draw on: drawable).
 */
function closesOf(periods: readonly (Close & { spendable: readonly CreditGrant[] })[]): { uncovered: Decimal; left: Decimal } {
  const remaining = new Map<string, Decimal>();
  const drawn = new Set<string>();
  let uncovered = ZERO;
  for (const { invoice, codes, spendable } of periods) {
    const grants = spendable.map((g) => {
      if (!remaining.has(g.id)) remaining.set(g.id, dec(g.remaining));
      if (drawable(g, codes)) drawn.add(g.id);
      return { ...g, remaining: formatDecimal(remaining.get(g.id) ?? ZERO) };
    });
    if (!invoice) continue;
    uncovered = uncovered.plus(dec(invoice.total));
    // As applyCredits at finalization: the grants in spend order over the booked lines.
    for (const a of allocateCredits(chargeLines(invoice), invoice.total, grants)) {
      remaining.set(a.grantId, (remaining.get(a.grantId) ?? ZERO).minus(dec(a.amount)));
      uncovered = uncovered.minus(dec(a.amount));
    }
  }
  const left = [...drawn].reduce((sum, id) => sum.plus(remaining.get(id) ?? ZERO), ZERO);
  return { uncovered, left };
}

/**
 * The closes in a currency the subject has credit in, and the grants spendable at each one's
 * finalization (one read). A draft finalized while they were read is dropped: its credit is out of
 * the grants already. The drafts counted are read again after the grants (one read); when one is
 * no longer a draft it finalized before that read of the grants or after, so the grants are read
 * again without it until every draft counted was still one after the grants were read.
 */
async function spendableAfterDrafts(
  engine: UsagePricing,
  credits: CreditReads,
  subject: { environmentId: string; subjectId: string },
  balances: ReadonlyMap<string, string>,
  closes: readonly Close[],
): Promise<{ credited: Close[]; spendable: CreditGrant[][] }> {
  // Only where the subject has credit: elsewhere nothing is spendable (and nothing is shown).
  let credited = closes.filter((p) => balances.has(p.currency));
  for (;;) {
    const spendable =
      credited.length > 0
        ? await credits.spendableOfAll(
            subject.environmentId,
            credited.map((p) => ({ subjectId: subject.subjectId, currency: p.currency, at: p.finalizesAt })),
          )
        : [];
    if (!credited.some((p) => p.draftId)) return { credited, spendable };
    const still = new Set((await draftsOf(engine, subject.environmentId, subject.subjectId)).map((i) => i.id));
    const kept = credited.filter((p) => !p.draftId || still.has(p.draftId));
    if (kept.length === credited.length) return { credited, spendable };
    credited = kept;
  }
}

/**
 * Per currency of `balances`, of `active`'s cards or of the subject's drafts: what is taken off
 * the balance to give the available credit (balance − available: see the file's comment). The
 * drafts (only when the subject has credit) and the grants are read once each, the grants for
 * every close's instant. A currency with no close: nothing (no cost: its available credit is its
 * balance).
 */
export async function takenOffBalance(
  engine: UsagePricing,
  credits: CreditReads,
  subject: { environmentId: string; subjectId: string },
  active: readonly Subscription[],
  balances: ReadonlyMap<string, string>,
): Promise<Map<string, Decimal>> {
  const spentOnce = new Set<string>();
  const { environmentId, subjectId } = subject;
  // A previous period's drafts finalize before any current close: they come first (and take their "once" discounts).
  const drafts = balances.size > 0 ? await pricedDrafts(engine, environmentId, subjectId, new Set(balances.keys()), spentOnce) : [];
  const all: Close[] = [...drafts, ...(await pricedPeriods(engine, active, spentOnce))];
  const { credited, spendable } = await spendableAfterDrafts(engine, credits, subject, balances, all);
  // A currency without credit: its closes, nothing spendable (drafts are only counted where there is credit).
  const closes = [...credited, ...all.filter((p) => !balances.has(p.currency))];
  const withGrants = closes.map((p, i) => ({ ...p, spendable: spendable[i] ?? [] }));
  const out = new Map<string, Decimal>();
  for (const currency of new Set(closes.map((p) => p.currency))) {
    const { uncovered, left } = closesOf(withGrants.filter((p) => p.currency === currency));
    const available = uncovered.gt(0) ? uncovered.negated() : left;
    out.set(currency, dec(balances.get(currency) ?? "0").minus(available));
  }
  return out;
}

/**
 * Billing state's credit fields: per currency the subject has (or had) credit in, sorted by code,
 * the balance and the available credit (balance − `taken`: takenOffBalance's, may be negative). A currency the
 * subject never had credit in is left out: it pays in arrears there, and an app that stops a
 * customer at zero available credit must not stop one who never bought credit.
 */
export function creditFields(balances: ReadonlyMap<string, string>, taken: ReadonlyMap<string, Decimal>): { balance: CurrencyAmount[]; available: CurrencyAmount[] } {
  const currencies = [...balances.keys()].sort();
  const balance: CurrencyAmount[] = [];
  const available: CurrencyAmount[] = [];
  for (const c of currencies) {
    const b = dec(balances.get(c) ?? "0");
    balance.push({ currencyCode: c, value: formatDecimal(b) });
    available.push({ currencyCode: c, value: formatDecimal(b.minus(taken.get(c) ?? ZERO)) });
  }
  return { balance, available };
}
