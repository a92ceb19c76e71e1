/**
 * The pages for people (hosted checkout and invoices, the portal, the dashboard, the API docs),
 * last in the dispatch. The hosted and dashboard pages take an admission slot like an API call; a
 * form POSTed to one is read whole first, within its own bounds (pages/form-body.ts), so that a slow
 * sender without a key never holds one of the API's slots.
 */
import { Code, type ConnectError } from "@connectrpc/connect";
import { RETRY_AFTER_SECONDS } from "../limits.js";
import type { Logger } from "../log.js";
import { type RequestTrace, codeName } from "../ops/trace.js";
import { sendError, sendRefusal } from "../rest/errors.js";
import type { FormBodies, FormRefusal } from "../pages/form-body.js";
import { messagePage } from "../pages/shell.js";
import { withRequestInfo } from "../rpc/errors.js";
import type { createAdmitChain } from "./admit.js";
import { leaveUnread } from "./body.js";
import type { Req, Res } from "./listener.js";

/** Answers a refusal on a plain HTTP request (REST, a page) without reading (more of) its body. */
export function refuseHttp(req: Req, res: Res, trace: RequestTrace | undefined, refusal: ConnectError, readAny = false): void {
  leaveUnread(req, res, readAny);
  const err = withRequestInfo(refusal, trace?.id);
  if (trace) trace.code = codeName(err.code);
  sendRefusal(res, err);
}

/**
 * A page's form that was not read whole: 408 past the deadline, 413 over the bound, 503 when the
 * server reads as many forms as it may; the connection (HTTP/1.1) is closed or the stream reset,
 * so the sender stops. A client that went away gets nothing.
 */
function refuseForm(req: Req, res: Res, refusal: Exclude<FormRefusal, "gone"> | "full", maxBytes: number): void {
  leaveUnread(req, res, true);
  if (res.headersSent || res.destroyed) return;
  if (refusal === "full") res.setHeader("retry-after", String(RETRY_AFTER_SECONDS));
  const [status, title, text] =
    refusal === "timeout"
      ? [408, "Request timeout", "The form took too long to arrive. Try again."]
      : refusal === "too_large"
        ? [413, "Form too large", `A form may have at most ${maxBytes} bytes.`]
        : [503, "Busy", `The server is busy. Try again in ${RETRY_AFTER_SECONDS} s.`];
  messagePage(res, status, title, title, text);
}

export function createPageServer(pages: (req: Req, res: Res) => boolean, forms: FormBodies | undefined, slot: ReturnType<typeof createAdmitChain>["slot"], log: Logger) {
  /** A page (or no route at all: 404); `admit`: take an admission slot first. */
  const serve = (path: string, req: Req, res: Res, trace: RequestTrace, admit: boolean): void => {
    if (admit && slot(path, res, req, (err) => refuseHttp(req, res, trace, err)) === false) return;
    if (pages(req, res)) return;
    sendError(res, Code.NotFound, `no route for ${req.method} ${path}`, "ROUTE_NOT_FOUND");
  };

  return (path: string, req: Req, res: Res, trace: RequestTrace): void => {
    const hosted = path.startsWith("/hosted/");
    const dashboard = path.startsWith("/dashboard");
    if (hosted) trace.procedure = "hosted";
    else if (path === "/dashboard" || path.startsWith("/dashboard/")) trace.procedure = "dashboard";
    if (!hosted && !dashboard) serve(path, req, res, trace, false);
    else if (!forms || req.method !== "POST") serve(path, req, res, trace, true);
    else
      forms.read(req, res).then((refusal) => {
        if (refusal === undefined) serve(path, req, res, trace, true);
        else if (refusal === "gone") log.debug("form body: the client went away before sending it", { request_id: trace.id });
        else refuseForm(req, res, refusal, forms.maxBytes);
      });
  };
}
