/**
 * The customer portal (sdk-compat §3.8): a hosted page, reached through an unguessable URL that
 * expires, where a subject's customer sees their subscriptions, invoices and usage, replaces the
 * saved card and cancels a subscription at the end of its cycle. Opening a session is an API call
 * (a secret key); everything else happens on the page, scoped to the session's subject and
 * environment: a subscription of another subject is "not found" there.
 *
 * A session lives PORTAL_SESSION_TTL_MS on real time, also for a subject on a test clock: the
 * lifetime bounds how long a leaked URL works, and a frozen clock must not stretch it.
 */
import { NotFoundError, Violations } from "../errors.js";
import { newId, randomBase62 } from "../ids.js";
import { dec, formatDecimal } from "../money.js";
import { type Caller, systemCaller } from "../tenancy.js";
import type { Dunning } from "../payments/attempts.js";
import { type SavedCard, cardSetupReference } from "../payments/provider-events.js";
import type { BillingTx } from "./ports.js";
import type { SubscriptionChanges } from "./changes.js";
import { checkCallbackUrl } from "./checkout.js";
import type { Lookups } from "./lookups.js";
import type { BillingSubject, Invoice, PortalSession, SubjectProfile, Subscription } from "./types.js";

/** How long a portal URL works: one hour, on real time. */
export const PORTAL_SESSION_TTL_MS = 3_600_000;

/** How long after its portal session expired a card setup started from it still completes: a provider page's life (Stripe Checkout's, 24 hours). */
export const CARD_SETUP_GRACE_MS = 24 * 3_600_000;

/** How many invoices the portal lists, newest first (three years of monthly invoices). */
export const PORTAL_INVOICES_SHOWN = 36;

/** How many subscriptions the portal lists. */
export const PORTAL_SUBSCRIPTIONS_SHOWN = 100;

/** The cancel_reason a cancellation from the portal records. */
export const PORTAL_CANCEL_REASON = "customer_portal";

/** What the portal says instead of a card form in an environment without a payment provider (live). */
export const NO_PROVIDER_PORTAL_MESSAGE = "This environment has no payment provider configured, so a card cannot be saved here. Test cards are not accepted in live mode.";

/** A session whose page may be used: not expired, its subject still there. */
export interface OpenPortal {
  session: PortalSession;
  subject: BillingSubject;
  /** Acts for the session's environment, in its real mode (which decides the payment provider). */
  caller: Caller;
}

/**
 * What a portal token opens: the portal, or why not. An unknown token is undefined (404 on the
 * page); an expired session, or one whose subject was deleted, is "gone" (410).
 */
export type PortalAccess = { state: "open"; portal: OpenPortal } | { state: "expired" | "gone"; session: PortalSession };

export interface PortalUsage {
  rateName: string;
  usedUnits: string;
  includedUnits: string;
  /** Used more than included. */
  over: boolean;
}

export interface PortalSubscription {
  subscription: Subscription;
  rateCardName: string;
  /** Active and not already cancelling at the end of its cycle. */
  canCancel: boolean;
  /** Usage of the current period per usage-based rate (active subscriptions only). */
  usage: PortalUsage[];
}

/** Everything the portal page shows, read afresh for each page. */
export interface PortalView {
  session: PortalSession;
  subjectId: string;
  profile: SubjectProfile;
  subscriptions: PortalSubscription[];
  /** Newest first, at most PORTAL_INVOICES_SHOWN. */
  invoices: Invoice[];
  paymentMethod: { brand: string; last4: string } | null;
  /** Whether a card can be saved here (a payment provider: test environments), and the provider's hint (the test cards). */
  canReplaceCard: boolean;
  /** A provider with its own card page (Stripe Checkout): the card is entered there, not here. */
  cardOnProviderPage?: boolean;
  cardHint: string | undefined;
}

export type ReplaceCardResult = { ok: true; brand: string; last4: string } | { ok: false; message: string; noProvider?: boolean };

export class CustomerPortal {
  /** Dunning (payments/attempts.ts), once wired: a new card retries the open invoices at once. */
  dunning?: Pick<Dunning, "retrySubject">;

  constructor(
    private readonly lookups: Lookups,
    private readonly changes: SubscriptionChanges,
    private readonly publicBaseUrl: () => string,
  ) {}

  private get engine() {
    return this.lookups.engine;
  }

  private get stores() {
    return this.lookups.stores;
  }

  url(session: PortalSession): string {
    return `${this.publicBaseUrl()}/hosted/portal/${session.token}`;
  }

  /**
   * Opens a portal session for a subject (by ID or external ID). Every problem of the input is
   * reported at once (400) before the subject is looked up (404); nothing is written unless all is well.
   */
  async createSession(caller: Caller, input: { subjectId: string; returnUrl: string }): Promise<{ session: PortalSession; url: string }> {
    const v = new Violations();
    if (input.subjectId === "") v.add("subject_id", "is required");
    const returnUrl = checkCallbackUrl(input.returnUrl, "return_url", v);
    v.throwIfAny();
    const subject = await this.lookups.subject(caller, input.subjectId);
    const now = this.engine.now();
    const session: PortalSession = {
      id: newId("cps"),
      environmentId: caller.environmentId,
      // 40 base62 characters: about 238 random bits.
      token: randomBase62(40),
      subjectId: subject.id,
      returnUrl,
      expiresAt: new Date(now.getTime() + PORTAL_SESSION_TTL_MS),
      createdAt: now,
    };
    await this.stores.portals.insert(session);
    return { session, url: this.url(session) };
  }

  /** What `token` opens (see PortalAccess); undefined for a token no session has. */
  async access(token: string, graceMs = 0): Promise<PortalAccess | undefined> {
    const session = await this.stores.portals.get(token);
    if (!session) return undefined;
    if (this.engine.now().getTime() >= session.expiresAt.getTime() + graceMs) return { state: "expired", session };
    const subject = await this.stores.directory.subject(session.environmentId, session.subjectId);
    const mode = await this.engine.reads.modeOf(session.environmentId);
    if (!subject || subject.id !== session.subjectId || !mode) return { state: "gone", session };
    return { state: "open", portal: { session, subject, caller: systemCaller(session.environmentId, mode) } };
  }

  /** The portal page's content: subscriptions (with their usage), invoices, the saved card. */
  async view(p: OpenPortal): Promise<PortalView> {
    const env = p.session.environmentId;
    const { items } = await this.stores.subscriptions.list(env, { subjectId: p.subject.id }, { limit: PORTAL_SUBSCRIPTIONS_SHOWN, offset: 0 });
    // Running subscriptions first (oldest first), then ended ones (most recent first).
    const running = items.filter((s) => s.status !== "cancelled");
    const ended = items.filter((s) => s.status === "cancelled").reverse();
    const subscriptions: PortalSubscription[] = [];
    for (const s of [...running, ...ended]) subscriptions.push(await this.describe(s));
    const pm = p.subject.paymentMethodId ? await this.stores.paymentMethods.get(p.subject.paymentMethodId, env) : undefined;
    const provider = await this.lookups.paymentsFor(p.caller);
    return {
      session: p.session,
      subjectId: p.subject.id,
      profile: (await this.stores.directory.profile(env, p.subject.id)) ?? { name: null, email: null },
      subscriptions,
      // A draft as it would finalize now, as everywhere else it is read (late usage lands on it).
      invoices: await Promise.all((await this.stores.invoices.recent(env, p.subject.id, PORTAL_INVOICES_SHOWN)).map((i) => this.lookups.engine.drafts.preview(i).catch(() => i))),
      paymentMethod: pm ? { brand: pm.brand, last4: pm.last4 } : null,
      canReplaceCard: provider !== undefined,
      cardOnProviderPage: provider?.startCardSetup !== undefined,
      cardHint: provider?.cardHint,
    };
  }

  /** One of the portal subject's subscriptions; another subject's (or none) is not found. */
  async subscription(p: OpenPortal, id: string): Promise<PortalSubscription> {
    const s = id === "" ? undefined : await this.stores.subscriptions.get(p.session.environmentId, id);
    if (!s || s.subjectId !== p.subject.id) throw new NotFoundError("SUBSCRIPTION_NOT_FOUND", "no such subscription", { subscription_id: id });
    return this.describe(s);
  }

  /**
   * A subscription as the portal shows it. Usage is what billing state reports (the same
   * engine.builder.usedUnits over the current period), grouped by subscription.
   */
  private async describe(s: Subscription): Promise<PortalSubscription> {
    const card = await this.engine.reads.card(s.environmentId, s.rateCardId);
    const usage: PortalUsage[] = [];
    if (s.status === "active") {
      for (const { rate, used } of await this.engine.builder.usedUnits(card, s, s.usageSince, s.periodEnd)) {
        usage.push({ rateName: rate.name, usedUnits: formatDecimal(used), includedUnits: String(rate.includedUnits), over: used.gt(dec(rate.includedUnits)) });
      }
    }
    return { subscription: s, rateCardName: card.name, canCancel: s.status === "active" && !s.cancelsAtEndOfCycle, usage };
  }

  /**
   * Cancels one of the portal subject's subscriptions at the end of its cycle, through the API's
   * use case (SubscriptionChanges.cancel): the same checks, and a race with a cycle close is
   * retried the same way. Not active or already cancelling: FailedPreconditionError.
   */
  async cancelAtEndOfCycle(p: OpenPortal, subscriptionId: string): Promise<Subscription> {
    const { subscription } = await this.subscription(p, subscriptionId);
    return this.changes.cancel(p.caller, subscription.id, { atEndOfCycle: true, reason: PORTAL_CANCEL_REASON });
  }

  /**
   * Replaces the saved card with the one typed in: a declined or unknown card changes nothing; a
   * good one is saved and becomes the subject's payment method (future charges go to it). An
   * environment without a payment provider (live) takes no card: test cards are refused there.
   */
  async replaceCard(p: OpenPortal, cardNumber: string): Promise<ReplaceCardResult> {
    const provider = await this.lookups.paymentsFor(p.caller);
    if (!provider) return { ok: false, noProvider: true, message: NO_PROVIDER_PORTAL_MESSAGE };
    const card = provider.tokenize(cardNumber);
    if (!card.ok) return card;
    const pmId = newId("pm_card");
    await this.stores.transaction(async (tx) => {
      await tx.insertPaymentMethod({
        id: pmId,
        environmentId: p.session.environmentId,
        subjectId: p.subject.id,
        brand: card.brand,
        last4: card.last4,
        behavior: card.behavior,
        createdAt: this.engine.now(),
      });
      await tx.setSubjectPaymentMethod(p.subject.id, pmId, p.session.environmentId);
    });
    // DESIGN §16: the subject's open invoices are charged to the new card at once (their next attempt).
    const saved = await this.stores.paymentMethods.get(pmId, p.session.environmentId);
    if (saved && this.dunning) await this.dunning.retrySubject(p.session.environmentId, p.subject.id, saved, await this.lookups.nowFor(p.subject));
    return { ok: true, brand: card.brand, last4: card.last4 };
  }

  /**
   * A provider with its own card page (Stripe Checkout, DESIGN §16): where the customer goes to
   * save a new card; the provider's webhook or the customer's return saves it (saveProviderCard).
   * Undefined: the card form is used (or there is no provider).
   */
  async startCardSetup(p: OpenPortal): Promise<string | undefined> {
    const provider = await this.lookups.paymentsFor(p.caller);
    if (!provider?.startCardSetup) return undefined;
    const profile = await this.stores.directory.profile(p.session.environmentId, p.subject.id);
    const back = `${this.url(p.session)}/card`;
    const { url } = await provider.startCardSetup({
      environmentId: p.session.environmentId,
      subjectId: p.subject.id,
      email: profile?.email ?? null,
      name: profile?.name ?? null,
      returnReference: cardSetupReference("portal", p.session.token),
      successUrl: back,
      cancelUrl: back,
    });
    return url;
  }

  /**
   * Saves a card the provider saved on its page for the portal session `token`, once (`record`
   * false: the provider's event is a repeat, or the setup was completed already); it becomes the subject's payment method and open
   * invoices are charged to it at once, as with a typed card. Only a session of `environmentId`
   * (where the webhook or the return came in): another environment's is left as it is, as an
   * unknown token (no redirect).
   */
  async saveProviderCard(environmentId: string, token: string, card: SavedCard, record: (tx: BillingTx) => Promise<boolean>): Promise<{ redirect: string | null }> {
    // A setup starts only while the portal is open, and the provider's page lives on after it (Stripe's, 24 hours): its
    // completion saves the card until then, or the customer's new card was dropped and dunning went on with the old one.
    const access = await this.access(token, CARD_SETUP_GRACE_MS);
    if ((access?.state === "open" ? access.portal.session : access?.session)?.environmentId !== environmentId) return { redirect: null };
    const back = `${this.publicBaseUrl()}/hosted/portal/${token}?done=card`;
    if (access?.state !== "open") return { redirect: access ? `${this.publicBaseUrl()}/hosted/portal/${token}` : null };
    const p = access.portal;
    const pmId = newId("pm_card");
    const saved = await this.stores.transaction(async (tx) => {
      if (!(await record(tx))) return false;
      await tx.insertPaymentMethod({
        id: pmId,
        environmentId: p.session.environmentId,
        subjectId: p.subject.id,
        brand: card.brand,
        last4: card.last4,
        behavior: "succeeds",
        createdAt: this.engine.now(),
        provider: card.provider,
        providerRef: card.providerRef,
        customerRef: card.customerRef,
      });
      await tx.setSubjectPaymentMethod(p.subject.id, pmId, p.session.environmentId);
      return true;
    });
    const pm = saved ? await this.stores.paymentMethods.get(pmId, p.session.environmentId) : undefined;
    if (pm && this.dunning) await this.dunning.retrySubject(p.session.environmentId, p.subject.id, pm, await this.lookups.nowFor(p.subject));
    return { redirect: back };
  }
}
