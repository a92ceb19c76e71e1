/**
 * Subjects: the customers being billed. Pure rules and the use cases over a store port; the
 * store (src/db) enforces uniqueness, this module enforces meaning.
 */
import { FailedPreconditionError, NotFoundError, Violations } from "./errors.js";
import { type NewEvent, subjectEvent } from "./events/types.js";
import { newId } from "./ids.js";
import { type Metadata, checkMetadata } from "./metadata.js";
import { type Page, type PageResult, checkPage } from "./pagination.js";
import type { Subject } from "./subject-types.js";
import type { Caller } from "./tenancy.js";
import type { TaxRateReader } from "./taxes/built-in.js";
import { type BillingDetailsInput, checkBillingDetails } from "./taxes/details.js";
import { checkTaxRateIds } from "./taxes/rates.js";
import type { BillingDetails } from "./taxes/types.js";

export interface SubjectPatch {
  email?: string | null;
  name?: string | null;
  metadata?: Metadata;
  /** Replaces the billing details whole; null clears them. */
  billingDetails?: BillingDetails | null;
}

/** Storage port. Implementations scope every query to `environmentId`. */
export interface SubjectStore {
  /**
   * Throws AlreadyExistsError when a live subject of the environment has the same external ID.
   * `events` are written in the same transaction (the outbox).
   */
  insert(subject: Subject, events: NewEvent[]): Promise<void>;
  /** A live subject whose ID, or else whose external ID, equals `key`. */
  findByIdOrExternalId(environmentId: string, key: string): Promise<Subject | undefined>;
  /** Applies the patch to a live subject, with the events of the result; returns it, or undefined when there is none. */
  update(environmentId: string, id: string, patch: SubjectPatch, at: Date, events: (updated: Subject) => NewEvent[]): Promise<Subject | undefined>;
  list(environmentId: string, page: Page): Promise<PageResult<Subject>>;
  /** Live subjects whose name or email contains `query`, ignoring case. */
  search(environmentId: string, query: string, page: Page): Promise<PageResult<Subject>>;
  /** Marks a live subject deleted and frees its external ID, with `events`; false when there is none. */
  softDelete(environmentId: string, id: string, at: Date, events: NewEvent[]): Promise<boolean>;
}

export const MAX_TEXT = 255;
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;

export interface CreateSubjectInput {
  testClockId?: string;
  email?: string;
  externalId?: string;
  metadata: Metadata;
  name?: string;
  billingDetails?: BillingDetailsInput;
}

export interface UpdateSubjectInput {
  email?: string;
  name?: string;
  metadata?: Metadata;
  /** Replaces them whole; null clears them; undefined: unchanged. */
  billingDetails?: BillingDetailsInput | null;
}

function checkEmail(email: string | undefined, v: Violations, allowEmpty: boolean): void {
  if (email === undefined || (allowEmpty && email === "")) return;
  if (email.length > 254 || !EMAIL.test(email)) v.add("email", "must be a valid email address");
}

function checkText(field: string, value: string | undefined, v: Violations, allowEmpty: boolean): void {
  if (value === undefined) return;
  if (!allowEmpty && value.length === 0) v.add(field, "must not be empty");
  if (value.length > MAX_TEXT) v.add(field, `must have at most ${MAX_TEXT} characters`);
}

/** What subjects ask of billing: whether a test clock exists, whether a subject may go. */
export interface SubjectGuards {
  clockExists(environmentId: string, clockId: string): Promise<boolean>;
  /** Why the subject cannot be deleted (e.g. an active subscription), or undefined. */
  deleteBlocker(environmentId: string, subjectId: string): Promise<string | undefined>;
  /** Tax rates by id (DESIGN §15): billing details' tax_rate_ids must name active ones. */
  taxRates?: TaxRateReader;
}

/** Billing details checked at `billing_details`, their tax rates included. */
async function checkedDetails(guards: SubjectGuards, environmentId: string, input: BillingDetailsInput, v: Violations): Promise<BillingDetails> {
  const at = v.at("billing_details");
  const details = checkBillingDetails(input, at);
  await checkTaxRateIds(guards.taxRates ?? (async () => []), environmentId, details.taxRateIds, at.at("tax_rate_ids"));
  return details;
}

export class SubjectService {
  /**
   * Called after an update of a subject's name, email or billing details commits (the payment
   * provider's customer kept in sync, DESIGN §16; set at wiring, src/wiring/stripe.ts); it must not
   * throw: it logs its own failures.
   */
  detailsChanged?: (environmentId: string, subjectId: string) => Promise<void>;

  constructor(
    private readonly store: SubjectStore,
    private readonly now: () => Date,
    private readonly guards: SubjectGuards = { clockExists: async () => false, deleteBlocker: async () => undefined },
  ) {}

  async create(caller: Caller, input: CreateSubjectInput): Promise<Subject> {
    const v = new Violations();
    checkEmail(input.email, v, false);
    checkText("external_id", input.externalId, v, false);
    checkText("name", input.name, v, true);
    checkMetadata(input.metadata, v.at("metadata"));
    if (input.testClockId !== undefined && !(input.testClockId !== "" && (await this.guards.clockExists(caller.environmentId, input.testClockId)))) {
      v.add("test_clock_id", "no test clock with this ID exists in this environment");
    }
    const billingDetails = input.billingDetails && (await checkedDetails(this.guards, caller.environmentId, input.billingDetails, v));
    v.throwIfAny();
    const subject: Subject = {
      id: newId("subj"),
      environmentId: caller.environmentId,
      createdAt: this.now(),
      email: input.email || null,
      externalId: input.externalId ?? null,
      metadata: input.metadata,
      name: input.name || null,
      testClockId: input.testClockId ?? null,
      hasPaymentMethod: false,
      billingDetails: billingDetails ?? null,
    };
    await this.store.insert(subject, [subjectEvent("subject.created", subject)]);
    return subject;
  }

  /** By ID or external ID; NotFoundError when the environment has no such live subject. */
  async get(caller: Caller, key: string, field = "subject_id"): Promise<Subject> {
    const v = new Violations();
    if (key === "") v.add(field, "is required");
    v.throwIfAny();
    const subject = await this.store.findByIdOrExternalId(caller.environmentId, key);
    if (!subject) throw new NotFoundError("SUBJECT_NOT_FOUND", `subject ${JSON.stringify(key)} not found`, { subject_id: key });
    return subject;
  }

  async update(caller: Caller, key: string, input: UpdateSubjectInput): Promise<Subject> {
    const v = new Violations();
    checkEmail(input.email, v, true);
    checkText("name", input.name, v, true);
    if (input.metadata) checkMetadata(input.metadata, v.at("metadata"));
    const billingDetails = input.billingDetails && (await checkedDetails(this.guards, caller.environmentId, input.billingDetails, v));
    v.throwIfAny();
    const existing = await this.get(caller, key);
    const patch: SubjectPatch = {};
    if (input.email !== undefined) patch.email = input.email || null;
    if (input.name !== undefined) patch.name = input.name || null;
    if (input.metadata !== undefined) patch.metadata = input.metadata;
    if (input.billingDetails !== undefined) patch.billingDetails = billingDetails ?? null;
    const updated = await this.store.update(caller.environmentId, existing.id, patch, this.now(), (u) => [subjectEvent("subject.updated", u)]);
    if (!updated) throw new NotFoundError("SUBJECT_NOT_FOUND", `subject ${JSON.stringify(key)} not found`, { subject_id: key });
    if (patch.name !== undefined || patch.email !== undefined || patch.billingDetails !== undefined) {
      // Never fails the update, which has committed: a failure is the hook's to log.
      await this.detailsChanged?.(caller.environmentId, updated.id).catch(() => undefined);
    }
    return updated;
  }

  async list(caller: Caller, limit?: number, offset?: number): Promise<PageResult<Subject>> {
    const v = new Violations();
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.store.list(caller.environmentId, page);
  }

  async search(caller: Caller, query: string, limit?: number, offset?: number): Promise<PageResult<Subject>> {
    const v = new Violations();
    if (query.trim() === "") v.add("query", "is required");
    if (query.length > MAX_TEXT) v.add("query", `must have at most ${MAX_TEXT} characters`);
    const page = checkPage(limit, offset, v);
    v.throwIfAny();
    return this.store.search(caller.environmentId, query, page);
  }

  async delete(caller: Caller, key: string): Promise<Subject> {
    const subject = await this.get(caller, key);
    const blocker = await this.guards.deleteBlocker(caller.environmentId, subject.id);
    if (blocker) throw new FailedPreconditionError("SUBJECT_HAS_ACTIVE_SUBSCRIPTION", blocker, { subject_id: subject.id });
    const deleted = await this.store.softDelete(caller.environmentId, subject.id, this.now(), [subjectEvent("subject.deleted", subject)]);
    if (!deleted) throw new NotFoundError("SUBJECT_NOT_FOUND", `subject ${JSON.stringify(key)} not found`, { subject_id: key });
    return subject;
  }
}
