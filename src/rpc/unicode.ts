/**
 * Request text must be Unicode: a body that is not valid UTF-8 is refused (never read with
 * U+FFFD in place of its bad bytes), and so is a JSON string that escapes half of a UTF-16
 * surrogate pair (`"\ud800"`), which has no UTF-8 form to store. Both are a 400
 * `invalid_argument`; the surrogate names the field. The REST bridge and the Connect router
 * (through its jsonOptions.textDecoder) both read JSON bodies through here.
 */
import { InvalidArgumentError } from "../billing/errors.js";
import { toConnectError } from "./errors.js";

export const NOT_UTF8 = "the request body is not valid UTF-8";
export const NOT_UNICODE = "must be valid Unicode text (it holds a lone UTF-16 surrogate, e.g. \\ud800)";

const fatal = new TextDecoder("utf-8", { fatal: true });

/** The error for a body that is not UTF-8 (reason INVALID_UTF8). */
export function notUtf8(): InvalidArgumentError {
  const err = new InvalidArgumentError([{ field: "", description: NOT_UTF8 }], "INVALID_UTF8");
  err.message = NOT_UTF8;
  return err;
}

/** Bytes as UTF-8 text, or undefined when they are not valid UTF-8. */
export function strictUtf8(bytes: Uint8Array): string | undefined {
  try {
    return fatal.decode(bytes);
  } catch {
    return undefined;
  }
}

const wellFormed = (text: string) => (text as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Only text with a `\uD800`–`\uDFFF` escape can decode to a lone surrogate (UTF-8 cannot encode one). */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

/** The JSON path (`name`, `metadata.plan`, `events[2].subject_id`) of the first string or key of `text` that is not well-formed Unicode. */
export function loneSurrogateAt(text: string): string | undefined {
  if (!SURROGATE_ESCAPE.test(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined; // the JSON parser that follows reports the syntax error
  }
  const walk = (v: unknown, path: string): string | undefined => {
    if (typeof v === "string") return wellFormed(v) ? undefined : path || "body";
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const at = walk(v[i], `${path}[${i}]`);
        if (at !== undefined) return at;
      }
    } else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        const p = path === "" ? k : `${path}.${k}`;
        const at = wellFormed(k) ? walk(x, p) : p;
        if (at !== undefined) return at;
      }
    }
    return undefined;
  };
  return walk(value, "");
}

/**
 * The Connect router's JSON text decoder: strict UTF-8, and no lone surrogates. Its errors are
 * Connect errors with our reason and field (the router passes a ConnectError through as is).
 */
export class StrictJsonDecoder extends TextDecoder {
  constructor() {
    super("utf-8", { fatal: true });
  }
  override decode(input?: AllowSharedBufferSource, options?: TextDecodeOptions): string {
    let text: string;
    try {
      text = super.decode(input, options);
    } catch {
      throw toConnectError(notUtf8());
    }
    const at = loneSurrogateAt(text);
    if (at !== undefined) throw toConnectError(new InvalidArgumentError([{ field: at, description: NOT_UNICODE }]));
    return text;
  }
}
