/**
 * Opening a hosted checkout: what a subscription, a rate-card upgrade or a timeline start asks of
 * a customer without a card on file. Its callback URLs are checked and kept normalized here; the
 * page that completes or cancels it is hosted-checkout.ts.
 */
import type { RateCard } from "../catalog/types.js";
import { FailedPreconditionError, Violations } from "../errors.js";
import { newId, randomBase62 } from "../ids.js";
import { type Decimal, amountProblem, dec, formatDecimal } from "../money.js";
import type { Caller } from "../tenancy.js";
import type { Lookups } from "./lookups.js";
import { noPaymentProvider } from "./payments.js";
import type { BillingSubject, CheckoutSession } from "./types.js";

export const CHECKOUT_TTL_MS = 24 * 3_600_000;

/** What a hosted checkout of an environment without a payment provider (live) tells the customer. */
export const NO_PROVIDER_PAGE_MESSAGE = "This environment has no payment provider configured, so this checkout cannot take a payment. Test cards are not accepted in live mode.";

export interface CallbackUrls {
  successUrl: string;
  cancelledUrl: string;
}

/** The longest callback URL kept (the column holds 2000 characters), after normalizing. */
export const MAX_CALLBACK_URL_LENGTH = 2000;

/**
 * A callback URL as it is kept and later sent in a Location header: the WHATWG URL
 * serialization (`new URL(u).href`), which is ASCII only — the host in punycode, everything else
 * beyond ASCII percent-encoded as UTF-8 — so the redirect after a payment cannot fail on it.
 * Undefined when it is not an absolute http(s) URL.
 */
export function normalizeCallbackUrl(url: string): string | undefined {
  // The URL parser drops tabs and line breaks and trims spaces: refused rather than guessed at.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\s\u0000-\u001f\u007f]/.test(url)) return undefined;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return undefined;
  const href = u.href;
  // Defensive: a serialization is ASCII; anything else could not be a header value.
  return /^[\x21-\x7e]+$/.test(href) ? href : undefined;
}

/**
 * Checks one URL a hosted page sends the customer to (a checkout's callback, the portal's
 * return_url): required, absolute http(s), at most MAX_CALLBACK_URL_LENGTH characters once
 * normalized. Returns it normalized, or "" after recording the problem as `field`.
 */
export function checkCallbackUrl(url: string, field: string, v: Violations): string {
  const normalized = normalizeCallbackUrl(url);
  if (normalized === undefined) v.add(field, url === "" ? "is required" : "must be an http or https URL");
  else if (normalized.length > MAX_CALLBACK_URL_LENGTH) v.add(field, `must have at most ${MAX_CALLBACK_URL_LENGTH} characters once encoded (it has ${normalized.length})`);
  else return normalized;
  return "";
}

/** Checks the callback URLs (every problem) and returns them normalized (normalizeCallbackUrl). */
export function checkUrls(c: CallbackUrls | undefined, v: Violations, why = "this needs a checkout (no payment method on file, or create_checkout_session is always)"): CallbackUrls {
  const cv = v.at("checkout_callback_urls");
  if (!c) {
    cv.add("", `is required: ${why}`);
    return { successUrl: "", cancelledUrl: "" };
  }
  return { successUrl: checkCallbackUrl(c.successUrl, "success_url", cv), cancelledUrl: checkCallbackUrl(c.cancelledUrl, "cancelled_url", cv) };
}

export class Checkouts {
  /**
   * What completing a checkout about to open would charge now (checkout-preview.ts: discounts,
   * tax and credit booked as its completion books them; set by the wiring); undefined, or
   * answering undefined: the amount its opener gives (the raw lines), as it stands.
   */
  amountOf: ((session: CheckoutSession) => Promise<string | undefined>) | undefined = undefined;

  constructor(
    private readonly lookups: Lookups,
    private readonly publicBaseUrl: () => string,
  ) {}

  url(session: CheckoutSession): string {
    return `${this.publicBaseUrl()}/hosted/checkout/${session.token}`;
  }

  /** Opens a hosted checkout; the callback URLs are required and checked here, for every kind. */
  async open(
    caller: Caller,
    subject: BillingSubject,
    kind: CheckoutSession["kind"],
    payload: Record<string, unknown>,
    given: CallbackUrls | undefined,
    card: Pick<RateCard, "currency">,
    amountDue: Decimal | string,
    description: string,
    now: Date,
  ) {
    // Nothing that cannot be paid is opened (callers check first; this is the last guard).
    if (!(await this.lookups.paymentsFor(caller))) throw noPaymentProvider("a hosted checkout cannot take a payment");
    const v = new Violations();
    const callbacks = checkUrls(given, v);
    v.throwIfAny();
    const raw = typeof amountDue === "string" ? dec(amountDue) : amountDue;
    const tooLarge = amountProblem(raw);
    if (tooLarge) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the amount due ${tooLarge}`);
    const session: CheckoutSession = {
      id: newId("cs"),
      environmentId: caller.environmentId,
      token: randomBase62(40),
      subjectId: subject.id,
      kind,
      payload,
      successUrl: callbacks.successUrl,
      cancelledUrl: callbacks.cancelledUrl,
      status: "open",
      amountDue: formatDecimal(raw),
      currency: card.currency ?? "USD",
      description,
      expiresAt: new Date(now.getTime() + CHECKOUT_TTL_MS),
      createdAt: now,
    };
    // Its `amount`: what completing it now would bill (a draft invoice: when its grace period ends), as its page shows it (a credit purchase's: its invoice's).
    const booked = session.kind === "credit" ? undefined : await this.amountOf?.(session);
    if (booked !== undefined && amountProblem(dec(booked))) throw new FailedPreconditionError("AMOUNT_TOO_LARGE", `the amount due ${amountProblem(dec(booked))}`);
    if (booked !== undefined) session.amountDue = formatDecimal(dec(booked));
    await this.lookups.stores.checkouts.insert(session);
    return session;
  }
}
