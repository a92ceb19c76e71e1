/**
 * Input checks of a credit note (DESIGN §15), each violation named by its field path: the shape
 * is checked before the invoice is read; what needs the invoice (a line index in range, an
 * amount within what is left) is checked by the use case under the invoice's lock.
 */
import type { Violations } from "../errors.js";
import { type Metadata, checkMetadata } from "../metadata.js";
import { type Decimal, amountProblem, parseDecimal } from "../money.js";
import type { CreditAsk } from "./arithmetic.js";
import { CREDIT_NOTE_OUTCOMES, CREDIT_NOTE_REASONS, type CreditNoteOutcome, type CreditNoteReason } from "./types.js";

export const MEMO_MAX_LENGTH = 1000;

export interface CreateCreditNoteInput {
  invoiceId: string;
  reason: string;
  memo?: string;
  outcome: string;
  lines: { invoiceLineIndex: number; amount?: string }[];
  amount?: string;
  metadata: Metadata;
}

export interface CheckedCreditNote {
  invoiceId: string;
  reason: CreditNoteReason;
  memo: string | null;
  outcome: CreditNoteOutcome;
  ask: CreditAsk;
  metadata: Metadata;
}

/** A positive whole number of smallest units (at most 20 digits); undefined (and a violation) otherwise. */
export function checkCreditAmount(text: string, field: string, v: Violations): Decimal | undefined {
  const d = text === "" ? undefined : parseDecimal(text);
  if (!d) {
    v.add(field, text === "" ? "is required" : "must be a decimal number");
    return undefined;
  }
  const problem = amountProblem(d);
  if (problem) v.add(field, problem);
  else if (d.lte(0)) v.add(field, "must be greater than 0");
  else if (!d.isInteger()) v.add(field, "must be a whole number of the currency's smallest unit");
  else return d;
  return undefined;
}

/** Checks a create request's shape: reason, outcome, memo, lines or amount, metadata. */
export function checkCreditNote(input: CreateCreditNoteInput, v: Violations): CheckedCreditNote {
  if (input.invoiceId === "") v.add("invoice_id", "is required");
  if (!(CREDIT_NOTE_REASONS as readonly string[]).includes(input.reason)) v.add("reason", `must be one of ${CREDIT_NOTE_REASONS.join(", ")}`);
  if (!(CREDIT_NOTE_OUTCOMES as readonly string[]).includes(input.outcome)) v.add("outcome", `must be one of ${CREDIT_NOTE_OUTCOMES.join(", ")}`);
  if (input.memo !== undefined && input.memo.length > MEMO_MAX_LENGTH) v.add("memo", `must be at most ${MEMO_MAX_LENGTH} characters`);
  checkMetadata(input.metadata, v.at("metadata"));
  let ask: CreditAsk;
  if (input.lines.length > 0) {
    if (input.amount !== undefined) v.add("amount", "must not be given with lines (give each line's amount instead)");
    const seen = new Set<number>();
    const lines = input.lines.map((l, i) => {
      const at = v.at("lines").at(i);
      if (!Number.isInteger(l.invoiceLineIndex) || l.invoiceLineIndex < 0) at.add("invoice_line_index", "must be 0 or more");
      else if (seen.has(l.invoiceLineIndex)) at.add("invoice_line_index", `line ${l.invoiceLineIndex} is already credited by an earlier entry`);
      seen.add(l.invoiceLineIndex);
      return { index: l.invoiceLineIndex, amount: l.amount === undefined ? null : (checkCreditAmount(l.amount, "amount", at) ?? null) };
    });
    ask = { kind: "lines", lines };
  } else {
    ask = { kind: "amount", amount: input.amount === undefined ? null : (checkCreditAmount(input.amount, "amount", v) ?? null) };
  }
  return {
    invoiceId: input.invoiceId,
    reason: input.reason as CreditNoteReason,
    memo: input.memo === undefined || input.memo === "" ? null : input.memo,
    outcome: input.outcome as CreditNoteOutcome,
    ask,
    metadata: input.metadata,
  };
}

/** Line indexes beyond the invoice's `count` lines, as violations. */
export function checkLineIndexes(ask: CreditAsk, count: number, v: Violations): void {
  if (ask.kind !== "lines") return;
  ask.lines.forEach((l, i) => {
    if (l.index >= count)
      v.at("lines")
        .at(i)
        .add("invoice_line_index", `is out of range: the invoice has ${count} line${count === 1 ? "" : "s"}`);
  });
}
