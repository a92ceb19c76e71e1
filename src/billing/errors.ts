/**
 * The domain's error vocabulary. Each kind maps to one gRPC/Connect code and one HTTP status
 * in exactly one place (src/rpc/errors.ts). Handlers let these escape; nothing else throws
 * transport errors.
 */

/** One violated field: `field` is a path such as `usage_based_rates[1].price.amount.value`. */
export interface FieldViolation {
  field: string;
  description: string;
}

export abstract class BillingError extends Error {
  /** Stable, machine-readable, UPPER_SNAKE_CASE (AIP-193). */
  readonly reason: string;
  readonly metadata: Record<string, string>;
  constructor(reason: string, message: string, metadata: Record<string, string> = {}) {
    super(message);
    this.reason = reason;
    this.metadata = metadata;
  }
}

/** Bad input. Carries every violated field so a caller can fix them all at once. */
export class InvalidArgumentError extends BillingError {
  readonly violations: readonly FieldViolation[];
  constructor(violations: readonly FieldViolation[], reason = "INVALID_FIELD", message?: string) {
    super(reason, message ?? (violations.map((v) => `${v.field}: ${v.description}`).join("; ") || "invalid request"));
    this.violations = violations;
  }
}

export class NotFoundError extends BillingError {}
export class AlreadyExistsError extends BillingError {}
/**
 * The state does not allow what was asked. When the refusal is about one of the request's fields
 * (an outcome this invoice cannot take), `violations` names it, sent as a google.rpc.BadRequest
 * beside the ErrorInfo as bad input's are, so a caller finds the field the same way.
 */
export class FailedPreconditionError extends BillingError {
  readonly violations: readonly FieldViolation[];
  constructor(reason: string, message: string, metadata: Record<string, string> = {}, violations: readonly FieldViolation[] = []) {
    super(reason, message, metadata);
    this.violations = violations;
  }
}
export class AbortedError extends BillingError {}
export class UnauthenticatedError extends BillingError {}
export class PermissionDeniedError extends BillingError {}
/** The service cannot do it now (it is stopping); the same request later, to this or another server, can. */
export class UnavailableError extends BillingError {}

/**
 * Collects field violations during validation, then throws them all at once.
 * `at("fixed_rates[0]").add("code", "…")` records `fixed_rates[0].code`.
 */
export class Violations {
  private readonly list: FieldViolation[];
  private readonly prefix: string;
  constructor(prefix = "", list: FieldViolation[] = []) {
    this.prefix = prefix;
    this.list = list;
  }
  at(path: string | number): Violations {
    const seg = typeof path === "number" ? `[${path}]` : path;
    const joined = typeof path === "number" || this.prefix === "" ? `${this.prefix}${seg}` : `${this.prefix}.${seg}`;
    return new Violations(joined, this.list);
  }
  add(field: string, description: string): void {
    const path = field === "" ? this.prefix : this.prefix === "" ? field : `${this.prefix}.${field}`;
    this.list.push({ field: path, description });
  }
  get empty(): boolean {
    return this.list.length === 0;
  }
  throwIfAny(): void {
    if (this.list.length > 0) throw new InvalidArgumentError([...this.list]);
  }
}

/** Throws a single-field InvalidArgumentError. */
export function invalid(field: string, description: string): never {
  throw new InvalidArgumentError([{ field, description }]);
}
