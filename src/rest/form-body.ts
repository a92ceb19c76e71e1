/**
 * The body of a form POSTed to a page that needs no API key (the hosted checkout and portal
 * forms, the dashboard's sign-in and signed-in forms), read whole by the server before the request
 * takes one of the API's admission slots (DESIGN §10: nothing a caller without a valid key sends
 * may hold a shared slot for more than a short deadline). The body has its own small bound
 * (FORM_BODY_BYTES), its own deadline (FORM_BODY_TIMEOUT_MS, from the request's headers) and its
 * own count of bodies being read at once (MAX_FORM_BODIES_IN_FLIGHT): a client that trickles a
 * form one byte at a time is cut at the deadline and never delays a keyed API call. The page then
 * reads the form from memory (pages.ts readForm).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/** The largest form body a page accepts: its fields are a card number, a key, a CSRF token, an ID or two. */
export const FORM_BODY_BYTES = 16 * 1024;

/** Why a form body was not read whole: too slow (the deadline passed), too large, or the client went away. */
export type FormRefusal = "timeout" | "too_large" | "gone";

const FORMS = new WeakMap<Req, Buffer>();

/** The form body the server read for this request (pages.ts readForm); undefined when none was. */
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

  get inFlight(): number {
    return this.reading;
  }

  /**
   * Reads `req`'s body whole, within the bound and the deadline (counted from now), and keeps it
   * for the page: resolves undefined once it is read, else the refusal ("gone" for a client that
   * went away, which needs no answer). Resolves "full" at once when `maxInFlight` bodies are
   * being read. Never rejects.
   */
  read(req: Req, res: Res): Promise<FormRefusal | "full" | undefined> {
    const declared = req.headers["content-length"];
    if (typeof declared === "string" && /^\d+$/.test(declared) && Number(declared) > this.maxBytes) return Promise.resolve("too_large");
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
        req.off("data", onData);
        req.off("end", onEnd);
        req.off("aborted", onGone);
        req.off("close", onGone);
        req.off("error", onGone);
        res.off("close", onGone);
        if (outcome === undefined) FORMS.set(req, Buffer.concat(chunks, size));
        else req.pause();
        resolve(outcome);
      };
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        if (size > this.maxBytes) finish("too_large");
        else chunks.push(chunk);
      };
      const onEnd = () => finish(undefined);
      const onGone = () => finish(req.complete ? undefined : "gone");
      const timer = setTimeout(() => finish("timeout"), this.timeoutMs);
      req.on("data", onData);
      req.on("end", onEnd);
      req.on("aborted", onGone);
      req.on("close", onGone);
      req.on("error", onGone);
      res.on("close", onGone);
    });
  }
}
