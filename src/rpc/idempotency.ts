/**
 * Idempotent writes on every protocol (DESIGN §12): the interceptor every unary mutating call goes
 * through, after the key check (auth.ts) and inside the error interceptor (errors.ts), on each call
 * path (connect-node, the lean gRPC path, the REST bridge: invoke.ts).
 *
 * An `Idempotency-Key` header claims the key for its environment (db/stores/idempotency-store.ts);
 * the call's transactions mark it changed as they commit (db/change-scope.ts); a success or 4xx
 * outcome is stored, and a repeat of the same method and request gets it again, marked
 * `Idempotent-Replayed: true`. A 5xx, `unavailable` or `aborted` outcome lets the key go, unless a
 * change was committed: then the retry is told the outcome was lost, never run twice.
 *
 * The fingerprint hashes the method and the request's protobuf bytes, so a retry matches whichever
 * protocol it comes in on. On the server's call paths (context.ts replaySeamKey) a replay goes on to
 * the method, where `replaying` puts the stored answer in place of the implementation, so that it
 * has the protocol's own headers and trailers (an interceptor that answers by itself cannot keep them
 * in connect-node).
 */
import { createHash } from "node:crypto";
import { type DescMethod, type Message, create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type Interceptor, type ServiceImplSpec, createContextKey } from "@connectrpc/connect";
import { IDEMPOTENCY_IN_USE_WAIT_MS, type IdempotencyOutcome, type IdempotencyStore, idempotencyKeyProblem, settleLater } from "../billing/idempotency.js";
import { AbortedError, FailedPreconditionError, InvalidArgumentError } from "../billing/errors.js";
import type { Logger } from "../log.js";
import { callerKey, idempotencyKeyKey, replaySeamKey, traceKey } from "./context.js";
import { publicError } from "./errors.js";

export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const REPLAYED_HEADER = "idempotent-replayed";

/** Usage ingest keeps its own key in each event (DESIGN §7): the header adds nothing there. */
const OWN_KEYS = new Set(["billing.v1.UsageEventService/CreateUsageEvent", "billing.v1.UsageEventService/CreateUsageEventBatch", "billing.v1.UsageEventService/StreamUsageEvents"]);

/** Whether calls of `method` take an Idempotency-Key: unary, not NO_SIDE_EFFECTS, not ingest. */
export function takesIdempotencyKey(method: DescMethod): boolean {
  return method.methodKind === "unary" && method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS && !OWN_KEYS.has(`${method.parent.typeName}/${method.name}`);
}

/** Outcomes stored: success, and errors that are the request's (4xx) rather than the moment's. */
const NOT_STORED = new Set([Code.Unavailable, Code.Aborted, Code.Internal, Code.Unknown, Code.DataLoss, Code.DeadlineExceeded, Code.Canceled, Code.ResourceExhausted, Code.Unimplemented]);

function errorOutcome(err: ConnectError): IdempotencyOutcome {
  const details = err.details.map((d) =>
    "desc" in d
      ? { type: d.desc.typeName, value: Buffer.from(toBinary(d.desc, create(d.desc, d.value as never))).toString("base64") }
      : { type: d.type, value: Buffer.from(d.value).toString("base64") },
  );
  return { ok: false, code: err.code, message: err.rawMessage, details };
}

function replayedError(o: Extract<IdempotencyOutcome, { ok: false }>): ConnectError {
  const err = new ConnectError(o.message, o.code as Code, new Headers({ [REPLAYED_HEADER]: "true" }));
  for (const d of o.details) err.details.push({ type: d.type, value: new Uint8Array(Buffer.from(d.value, "base64")) });
  return err;
}

/** The stored answer of a replayed call, for `replaying` to give in place of the implementation. */
const replayKey = createContextKey<Message | undefined>(undefined, { description: "idempotent replay" });

/** `spec` with each unary method answering a replayed call (replayKey) with its stored answer, marked replayed. */
export function replaying(spec: ServiceImplSpec): ServiceImplSpec {
  const methods: ServiceImplSpec["methods"] = {};
  for (const [name, m] of Object.entries(spec.methods)) {
    if (m.kind !== "unary") {
      methods[name] = m;
      continue;
    }
    const impl = m.impl;
    methods[name] = {
      ...m,
      impl: (input, ctx) => {
        const replay = ctx.values.get(replayKey);
        if (replay === undefined) return impl(input, ctx);
        ctx.responseHeader.set(REPLAYED_HEADER, "true");
        return replay;
      },
    } as typeof m;
  }
  return { ...spec, methods };
}

/** `stopped`: aborted when the server stops, ending the writes of outcomes the database refused (settleLater). */
export function idempotencyInterceptor(store: IdempotencyStore, log: Logger, now: () => Date = () => new Date(), stopped?: AbortSignal): Interceptor {
  // The outcome (or the key's release) once the call is answered: a write the database refuses is made again until it holds.
  const settle = (rpc: string, write: () => Promise<unknown>) =>
    write().catch((err: unknown) => {
      log.warn("idempotency key: outcome not stored; writing it again", { rpc, err });
      settleLater(write, stopped, (e) => log.error("idempotency key: outcome never stored; the key is settled when its lease ends", { rpc, err: e }));
    });
  return (next) => async (req) => {
    if (req.stream || !takesIdempotencyKey(req.method)) return next(req);
    const key = req.header.get(IDEMPOTENCY_KEY_HEADER);
    const caller = req.contextValues.get(callerKey);
    if (key === null || caller === undefined) return next(req);
    const problem = idempotencyKeyProblem(key);
    if (problem !== undefined) throw new InvalidArgumentError([{ field: "Idempotency-Key", description: problem }], "INVALID_IDEMPOTENCY_KEY", `Idempotency-Key: ${problem}`);
    const method = req.method;
    const rpc = `${method.parent.typeName}/${method.name}`;
    const fingerprint = createHash("sha256").update(rpc).update("\n").update(toBinary(method.input, req.message)).digest("hex");

    let result = await store.claim(caller.environmentId, key, fingerprint, rpc, now());
    // A first call still running: wait a little for its outcome (a client's quick retry of a call
    // that timed out on its side), then tell the caller to retry later.
    for (let waited = 0; result.kind === "in_use" && waited < IDEMPOTENCY_IN_USE_WAIT_MS; waited += 50) {
      await new Promise((r) => setTimeout(r, 50));
      result = await store.claim(caller.environmentId, key, fingerprint, rpc, now());
    }
    switch (result.kind) {
      case "replay": {
        const o = result.outcome;
        if (!o.ok) throw replayedError(o);
        const message = fromBinary(method.output, Buffer.from(o.message, "base64"));
        if (req.contextValues.get(replaySeamKey)) {
          req.contextValues.set(replayKey, message);
          return next(req);
        }
        return { stream: false, service: req.service, method, header: new Headers({ [REPLAYED_HEADER]: "true" }), trailer: new Headers(), message } as never;
      }
      case "reused":
        throw new InvalidArgumentError(
          [{ field: "Idempotency-Key", description: `was used for another request (${result.rpc === rpc ? "other parameters" : result.rpc}) within the last 24 hours` }],
          "IDEMPOTENCY_KEY_REUSED",
          `Idempotency-Key ${JSON.stringify(key)} was already used with other parameters; use a new key for a new request`,
        );
      case "in_use":
        throw new AbortedError("IDEMPOTENCY_KEY_IN_USE", `a request with Idempotency-Key ${JSON.stringify(key)} is still being processed; retry it later`);
      case "lost":
        throw new FailedPreconditionError(
          "IDEMPOTENCY_OUTCOME_LOST",
          `the request with Idempotency-Key ${JSON.stringify(key)} made its change, but the server stopped before it stored the answer; look the resource up rather than retrying`,
        );
    }
    const claim = result.claim;
    // The method may derive what it writes from the key (credit notes: their ID, hence a refund's key at the provider).
    req.contextValues.set(idempotencyKeyKey, key);
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await store.within(claim, () => next(req));
    } catch (err) {
      const out = publicError(err, log, req.url, req.contextValues.get(traceKey)?.id);
      await settle(rpc, NOT_STORED.has(out.code) ? () => store.release(claim) : () => store.complete(claim, errorOutcome(out), now()));
      throw out;
    }
    // Until the outcome is stored a retry is IN_USE; a change committed is never run again.
    if (!res.stream) await settle(rpc, () => store.complete(claim, { ok: true, message: Buffer.from(toBinary(method.output, res.message)).toString("base64") }, now()));
    return res;
  };
}
