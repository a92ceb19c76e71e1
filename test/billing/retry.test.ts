/**
 * Lost races and database failures as the caller sees them: a lost race is retried a bounded
 * number of times and then `aborted` (409); legit preconditions are not retried; driver errors
 * of an unreachable database are `unavailable` (503), deadlocks `aborted`, and neither says more
 * (src/db translates them, storageError; the transport maps what it gives).
 */
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { AbortedError, FailedPreconditionError } from "../../src/billing/errors.js";
import { RACE_ATTEMPTS, retryingRaces } from "../../src/billing/subscriptions/races.js";
import { isUnavailable, storageError } from "../../src/db/errors.js";
import { createLogger } from "../../src/log.js";
import { publicError } from "../../src/rpc/errors.js";

const quiet = createLogger("error", () => {});

test("a lost race is tried again, a bounded number of times, then aborted", async (t) => {
  let n = 0;
  const err = await t.throwsAsync(
    retryingRaces(async () => {
      n++;
      throw new AbortedError("SUBSCRIPTION_CHANGED", "changed meanwhile");
    }),
  );
  t.true(err instanceof AbortedError);
  t.is(n, RACE_ATTEMPTS);
  t.is(publicError(err, quiet, "test").code, Code.Aborted);
  t.is(codeToHttpStatus(Code.Aborted), 409);
});

test("a race lost twice, then won, succeeds; a failed precondition is not retried", async (t) => {
  let n = 0;
  t.is(
    await retryingRaces(async () => {
      if (++n < 3) throw new AbortedError("SUBSCRIPTION_CHANGED", "changed meanwhile");
      return "done";
    }),
    "done",
  );
  t.is(n, 3);
  let m = 0;
  await t.throwsAsync(
    retryingRaces(async () => {
      m++;
      throw new FailedPreconditionError("SUBSCRIPTION_NOT_ACTIVE", "cancelled");
    }),
    { instanceOf: FailedPreconditionError },
  );
  t.is(m, 1);
});

const unavailable: [string, object][] = [
  ["refused", Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:3306"), { code: "ECONNREFUSED", errno: -111, fatal: true })],
  ["lost", Object.assign(new Error("Connection lost: The server closed the connection."), { code: "PROTOCOL_CONNECTION_LOST", fatal: true })],
  ["gone away (TypeORM wrapped)", { name: "QueryFailedError", message: "MySQL server has gone away", driverError: { errno: 2006, code: "CR_SERVER_GONE_ERROR" } }],
  ["connect timeout", Object.assign(new Error("connect ETIMEDOUT"), { code: "ETIMEDOUT", fatal: true })],
  ["pool closed", new Error("Pool is closed.")],
  ["sqlite file", Object.assign(new Error("unable to open database file"), { code: "SQLITE_CANTOPEN" })],
];
for (const [name, err] of unavailable) {
  test(`an unreachable database (${name}) is unavailable, 503, with nothing of the driver's message`, (t) => {
    t.true(isUnavailable(err));
    const pub = publicError(storageError(err), quiet, "test");
    t.is(pub.code, Code.Unavailable);
    t.is(codeToHttpStatus(pub.code), 503);
    t.is(pub.rawMessage, "the database is unavailable; try again later");
  });
}

test("a deadlock that escaped is aborted; a refused value or a missing table is not unavailable", (t) => {
  const deadlock = { name: "QueryFailedError", message: "Deadlock found", driverError: { errno: 1213, code: "ER_LOCK_DEADLOCK", sqlState: "40001" } };
  t.is(publicError(storageError(deadlock), quiet, "test").code, Code.Aborted);
  const noTable = { name: "QueryFailedError", message: "Table doesn't exist", driverError: { errno: 1146, code: "ER_NO_SUCH_TABLE", sqlState: "42S02" } };
  t.false(isUnavailable(noTable));
  t.is(publicError(storageError(noTable), quiet, "test").code, Code.Internal);
  t.false(isUnavailable(Object.assign(new Error("no such table: x"), { code: "SQLITE_ERROR" })));
  t.is(publicError(new ConnectError("boom", Code.Internal, undefined, undefined, storageError(new Error("Pool is closed."))), quiet, "test").code, Code.Unavailable);
});
