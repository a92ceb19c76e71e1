/** Wire ⇄ domain for credits (DESIGN §14): grants, ledger entries, settings, and their events. */
import { create, toJson } from "@bufbuild/protobuf";
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
import { restJson, stringifyRest } from "../json-out.js";
import { callbacksOf } from "./billing.js";
import { instantOf, ts } from "./common.js";

const money = (currencyCode: string, value: string) => ({ currencyCode, value });

export function grantToPb(g: CreditGrant): CreditGrantPb {
  return create(CreditGrantSchema, {
    id: g.id,
    subjectId: g.subjectId,
    amount: money(g.currency, g.amount),
    remainingAmount: money(g.currency, g.remaining),
    category: g.category,
    priority: g.priority,
    effectiveAt: ts(g.effectiveAt),
    expiresAt: g.expiresAt ? ts(g.expiresAt) : undefined,
    appliesToRateCodes: g.appliesToRateCodes,
    metadata: g.metadata,
    status: g.status,
    invoiceId: g.invoiceId ?? undefined,
    createdAt: ts(g.createdAt),
    voidedAt: g.voidedAt ? ts(g.voidedAt) : undefined,
    expiredAt: g.expiredAt ? ts(g.expiredAt) : undefined,
  });
}

export function ledgerEntryToPb(e: LedgerEntry): CreditLedgerEntryPb {
  return create(CreditLedgerEntrySchema, {
    id: e.id,
    subjectId: e.subjectId,
    creditGrantId: e.grantId,
    entryType: e.type,
    amount: money(e.currency, e.amount),
    invoiceId: e.invoiceId ?? undefined,
    description: e.description,
    createdAt: ts(e.createdAt),
  });
}

export function settingsToPb(s: CreditSettings): CreditSettingsPb {
  return create(CreditSettingsSchema, {
    subjectId: s.subjectId,
    currencyCode: s.currency,
    lowBalanceThreshold: s.lowBalanceThreshold === null ? undefined : money(s.currency, s.lowBalanceThreshold),
    autoTopUp: s.autoTopUp ? { threshold: money(s.currency, s.autoTopUp.threshold), amount: money(s.currency, s.autoTopUp.amount), priority: s.autoTopUp.priority } : undefined,
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
export function grantEventJson(g: CreditGrant): string {
  const json = toJson(CreditGrantSchema, grantToPb(g), { useProtoFieldName: true, alwaysEmitImplicit: true });
  const out = restJson(CreditGrantSchema, json as never);
  return stringifyRest(out.json, out.rawNumbers);
}

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
