/**
 * JSON text read without loss, for the one JSON reader (json.ts): numbers are kept as the digits
 * written, and malformed JSON says where it is wrong. Request text must be Unicode: a body that is
 * not valid UTF-8 is a 400 (never read with U+FFFD in place of its bad bytes), and so is a string
 * escaping half of a UTF-16 surrogate pair (`"\ud800"`, which has no UTF-8 form; json.ts names the field).
 */
import { parse as parseLossless } from "lossless-json";
import { InvalidArgumentError } from "../billing/errors.js";

export const NOT_UTF8 = "the request body is not valid UTF-8";
export const NOT_UNICODE = "must be valid Unicode text (it holds a lone UTF-16 surrogate, e.g. \\ud800)";

/** Whether text holds no lone UTF-16 surrogate (String.prototype.isWellFormed, Node 20). */
export const wellFormed = (text: string): boolean => (text as unknown as { isWellFormed(): boolean }).isWellFormed();

const fatal = new TextDecoder("utf-8", { fatal: true });

/** A JSON number as written, digit for digit. */
export class NumberLiteral {
  constructor(readonly text: string) {}
}

export class JsonSyntaxError extends Error {}

/** A JSON string, or a number token (RFC 8259 grammar) outside strings. */
const TOKEN = /"[^"\\]*(?:\\.[^"\\]*)*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
/** The key of the one-key object a number token is wrapped in before JSON.parse (see parseJson). */
const NUMBER_KEY = "\u0000#";
const NUMBER_TEXT = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** Up to this many characters, malformed JSON is re-read to say where it is wrong. */
const SMALL_JSON = 64 * 1024;

/** The index just past the string that opens at `start` (a quote), or -1 when it never closes. */
function stringEnd(text: string, start: number): number {
  let k = start + 1;
  for (;;) {
    k = text.indexOf('"', k);
    if (k < 0) return -1;
    let slashes = 0;
    while (text.charCodeAt(k - 1 - slashes) === 92) slashes++;
    if (slashes % 2 === 0) return k + 1;
    k++;
  }
}

/** Whether a digit or minus sign (a number token's start) occurs outside strings; true for a string that never closes. */
function hasNumberOutsideStrings(text: string): boolean {
  let i = 0;
  for (;;) {
    const q = text.indexOf('"', i);
    const stop = q < 0 ? text.length : q;
    for (let k = i; k < stop; k++) {
      const c = text.charCodeAt(k);
      if ((c >= 48 && c <= 57) || c === 45) return true;
    }
    if (q < 0) return false;
    const end = stringEnd(text, q);
    if (end < 0) return true;
    i = end;
  }
}

/**
 * Parses JSON text keeping numbers as their literal text; throws JsonSyntaxError. The native parser
 * does the work: each number token outside strings is first rewritten as `{"\\u0000#":"<literal>"}`,
 * which the reviver turns into a NumberLiteral (a client writing that object gets that number).
 * lossless-json alone built each string a character at a time (a 1 MB batch held about 30 MB of
 * heap). Duplicate keys: the last one wins, as with JSON.parse.
 */
export function parseJson(text: string): unknown {
  // Most bodies (a batch of events, whose values are strings) hold no number at all: the native
  // parser alone reads them, without the rewriting and the reviver (an object keyed "\u0000#"
  // written by the client still goes the long way, to be read as the number it spells).
  if (!hasNumberOutsideStrings(text) && !text.includes("\\u0000")) {
    try {
      return JSON.parse(text);
    } catch {
      // malformed: the long way says where
    }
  }
  const wrapped = text.replace(TOKEN, (token) => (token.charCodeAt(0) === 34 ? token : `{"\\u0000#":"${token}"}`)); // NUMBER_KEY, escaped as JSON
  try {
    return JSON.parse(wrapped, (_key, value: unknown) => {
      if (value === null || typeof value !== "object" || !(NUMBER_KEY in value)) return value;
      const literal = (value as Record<string, unknown>)[NUMBER_KEY];
      return typeof literal === "string" && NUMBER_TEXT.test(literal) && Object.keys(value).length === 1 ? new NumberLiteral(literal) : value;
    });
  } catch {
    // Where the text is wrong, in the client's own positions: lossless-json says it, but only
    // for small bodies (it is the slow, heap-hungry parser this one replaced; a large batch that
    // is wrong near its end would hold the event loop and the heap for seconds).
    if (text.length <= SMALL_JSON) {
      try {
        parseLossless(text);
      } catch (err) {
        throw new JsonSyntaxError(err instanceof Error ? err.message : String(err));
      }
    }
    throw new JsonSyntaxError("invalid JSON");
  }
}

/**
 * A JSON body's bytes read strictly: UTF-8 (else INVALID_UTF8), JSON (else MALFORMED_JSON),
 * numbers kept as written; a blank body is `{}`. Throws those two as InvalidArgumentError.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = fatal.decode(bytes);
  } catch {
    const err = new InvalidArgumentError([{ field: "", description: NOT_UTF8 }], "INVALID_UTF8");
    err.message = NOT_UTF8;
    throw err;
  }
  if (text.trim() === "") return {};
  try {
    return parseJson(text);
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    throw new InvalidArgumentError([{ field: "", description: `not valid JSON: ${err.message}` }], "MALFORMED_JSON", `the request body is not valid JSON: ${err.message}`);
  }
}
