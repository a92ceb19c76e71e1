/** Wire ⇄ domain for credits (DESIGN §14): grants, ledger entries, settings, and their events. */
import { create } from "@bufbuild/protobuf";
import type { SettingsInput } from "../../billing/credits/grants.js";
import type { AmountInput, CreateGrantInput } from "../../billing/credits/validation.js";
import type { CreditGrant, CreditSettings, LedgerEntry } from "../../billing/credits/types.js";
import type { CreditAlertPayload } from "../../billing/events/types.js";
import type { Amount } from "../../gen/billing/v1/common_pb.js";
import {
  type CreditGrant as CreditGrantPb,
  CreditGrantSchema,
  type CreditLedgerEntry as CreditLedgerEntryPb,
  CreditLedgerEntrySchema,
  type CreditSettings as CreditSettingsPb,
  CreditSettingsSchema,
} from "../../gen/billing/v1/credit_pb.js";
import type { CreateCreditGrantRequest, UpdateCreditSettingsRequest } from "../../gen/billing/v1/credit_service_pb.js";
import { callbacksOf } from "./billing.js";
import { amount, instantOf, restJsonText, toPb } from "./common.js";

export function grantToPb(g: CreditGrant): CreditGrantPb {
  return toPb(CreditGrantSchema, { ...g, amount: amount(g.currency, g.amount), remainingAmount: amount(g.currency, g.remaining) });
}

export function ledgerEntryToPb(e: LedgerEntry): CreditLedgerEntryPb {
  return toPb(CreditLedgerEntrySchema, { ...e, creditGrantId: e.grantId, entryType: e.type, amount: amount(e.currency, e.amount) });
}

export function settingsToPb(s: CreditSettings): CreditSettingsPb {
  const money = (value: string) => amount(s.currency, value);
  return create(CreditSettingsSchema, {
    subjectId: s.subjectId,
    currencyCode: s.currency,
    lowBalanceThreshold: s.lowBalanceThreshold === null ? undefined : money(s.lowBalanceThreshold),
    autoTopUp: s.autoTopUp ? { threshold: money(s.autoTopUp.threshold), amount: money(s.autoTopUp.amount), priority: s.autoTopUp.priority } : undefined,
  });
}

const amountIn = (a: Amount | undefined): AmountInput | undefined => (a ? { currency: a.currencyCode, value: a.value } : undefined);

export function createGrantInput(req: CreateCreditGrantRequest): CreateGrantInput {
  return {
    subjectId: req.subjectId,
    amount: amountIn(req.amount),
    category: req.category,
    priority: req.priority,
    effectiveAt: instantOf(req.effectiveAt),
    expiresAt: instantOf(req.expiresAt),
    appliesToRateCodes: req.appliesToRateCodes,
    metadata: req.metadata,
    callbacks: callbacksOf(req.checkoutCallbackUrls),
  };
}

export function settingsInput(req: UpdateCreditSettingsRequest): SettingsInput {
  const t = req.autoTopUp;
  return {
    currency: req.currencyCode,
    lowBalanceThreshold: amountIn(req.lowBalanceThreshold),
    autoTopUp: t ? { threshold: amountIn(t.threshold), amount: amountIn(t.amount), priority: t.priority } : undefined,
  };
}

/** A grant as its events carry it: the JSON of GET /credit-grants/{id}. */
export const grantEventJson = (g: CreditGrant): string => restJsonText(CreditGrantSchema, grantToPb(g));

/** `credit.balance_low` / `credit.depleted`: the subject's credit in one currency. */
export function creditAlertJson(a: CreditAlertPayload): string {
  return JSON.stringify({
    subject_id: a.subjectId,
    currency_code: a.currency,
    credit_balance: { currency_code: a.currency, value: a.balance },
    available_credit: { currency_code: a.currency, value: a.available },
    low_balance_threshold: a.threshold === null ? null : { currency_code: a.currency, value: a.threshold },
  });
}
