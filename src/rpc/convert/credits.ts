/** Wire ⇄ domain for credits (DESIGN §14): grants, ledger entries, and settings. */
import { create } from "@bufbuild/protobuf";
import type { SettingsInput } from "../../billing/credits/grants.js";
import type { AmountInput, CreateGrantInput } from "../../billing/credits/validation.js";
import type { CreditGrant, CreditSettings, LedgerEntry } from "../../billing/credits/types.js";
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
import { amount, instantOf, toPb } from "./common.js";

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
