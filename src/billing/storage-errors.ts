/**
 * Failures of storage rather than of the request, as stores report them (src/db translates its
 * drivers' errors into these; nothing above it sees a driver's error for either case). They are
 * not BillingErrors: no rule of the domain refused anything, so code that tells a refusal from a
 * failure treats them as failures. The transport tells the caller `unavailable` or `aborted`,
 * never what the driver said (src/rpc/errors.ts); both are worth retrying.
 */

/** The store cannot be reached: a refused or lost connection, a server gone away, no answer within its time limit. */
export class StorageUnavailableError extends Error {
  override readonly name = "StorageUnavailableError";
}

/** A write lost a lock conflict (a deadlock, a lock wait timeout, a busy file) that outlived the store's own retries. */
export class StorageConflictError extends Error {
  override readonly name = "StorageConflictError";
}
