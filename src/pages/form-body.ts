/**
 * The body of a form POSTed to a page without an API key (hosted checkout and portal, the
 * dashboard), read whole by the page dispatch (edge/pages.ts) before the request takes one of the
 * API's admission slots (DESIGN §10: nothing a caller without a valid key sends may hold a shared
 * slot for more than a short deadline), within its own bound, deadline (FORM_BODY_TIMEOUT_MS) and
 * count (MAX_FORM_BODIES_IN_FLIGHT); the page then reads it from memory (shell.ts readForm).
 */
import { declaredLength } from "../edge/body.js";
import type { Req, Res } from "../edge/listener.js";

/** The largest form body a page accepts: its fields are a card number, a key, a CSRF token, an ID or two. */
const FORM_BODY_BYTES = 16 * 1024;

/** Why a form body was not read whole: too slow (the deadline passed), too large, or the client went away. */
export type FormRefusal = "timeout" | "too_large" | "gone";

const FORMS = new WeakMap<Req, Buffer>();

/** The form body the server read for this request (shell.ts readForm); undefined when none was. */
export function formBodyOf(req: Req): Buffer | undefined {
  return FORMS.get(req);
}

/** The count of form bodies being read at once on this server, bounded apart from the API's admission. */
export class FormBodies {
  private reading = 0;
  constructor(
    readonly maxInFlight: number,
    readonly timeoutMs: number,
    readonly maxBytes = FORM_BODY_BYTES,
  ) {}

  /**
   * Reads `req`'s body whole, within the bound and the deadline (counted from now), and keeps it
   * for the page: resolves undefined once it is read, else the refusal ("gone" for a client that
   * went away, which needs no answer). Resolves "full" at once when `maxInFlight` bodies are
   * being read. Never rejects.
   */
  read(req: Req, res: Res): Promise<FormRefusal | "full" | undefined> {
    if ((declaredLength(req.headers) ?? 0) > this.maxBytes) return Promise.resolve("too_large");
    if (this.reading >= this.maxInFlight) return Promise.resolve("full");
    this.reading++;
    return new Promise<FormRefusal | undefined>((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let done = false;
      const finish = (outcome: FormRefusal | undefined) => {
        if (done) return;
        done = true;
        this.reading--;
        clearTimeout(timer);
        for (const [emitter, event, listener] of listeners) emitter.off(event, listener);
        if (outcome === undefined) FORMS.set(req, Buffer.concat(chunks, size));
        else req.pause();
        resolve(outcome);
      };
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        if (size > this.maxBytes) finish("too_large");
        else chunks.push(chunk);
      };
      const onGone = () => finish(req.complete ? undefined : "gone");
      const listeners: [NodeJS.EventEmitter, string, (chunk: Buffer) => void][] = [
        [req, "data", onData],
        [req, "end", () => finish(undefined)],
        [req, "aborted", onGone],
        [req, "close", onGone],
        [req, "error", onGone],
        [res, "close", onGone],
      ];
      const timer = setTimeout(() => finish("timeout"), this.timeoutMs);
      for (const [emitter, event, listener] of listeners) emitter.on(event, listener);
    });
  }
}
