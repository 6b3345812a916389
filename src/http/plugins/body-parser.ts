/**
 * @module http/plugins/body-parser
 * The one body parser: enforces the size limit (413) and treats an empty body as `{}`.
 * Management routes take JSON only: a non-empty body needs a JSON content type (415), bad JSON is
 * 400, and the text fields the contract trims are trimmed (schemas/common.ts TRIMMED_FIELDS).
 * OAuth routes (route.ts isOAuthPath) take `application/x-www-form-urlencoded` only, as RFC 6749
 * §3.2 requires: anything else is 400. Runs before validation. The direct lane (http/direct.ts)
 * parses with the same functions.
 */
import { Elysia } from "elysia";
import { decodeUtf8Strict } from "../../core/utf8.ts";
import { AppError } from "../../errors.ts";
import { trimTextFields } from "../../schemas/common.ts";
import { isOAuthPath } from "../route.ts";

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json(?:\s*;.*)?$/i;
const FORM_TYPE = /^application\/x-www-form-urlencoded(?:\s*;.*)?$/i;

/**
 * The bytes of a body of unknown length (chunked, no `Content-Length`), read piece by piece and
 * no further once past `maxBytes`: the bytes returned are then longer than `maxBytes`.
 */
async function readUnknownLength(request: Request, maxBytes: number): Promise<Uint8Array<ArrayBuffer>> {
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const pieces: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    pieces.push(value);
    length += value.byteLength;
    if (length > maxBytes) {
      // What is left is not kept: the runtime drops it (tooLarge).
      reader.cancel().catch(() => {});
      break;
    }
  }
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const piece of pieces) {
    bytes.set(piece, at);
    at += piece.byteLength;
  }
  return bytes;
}

/**
 * The bytes of a request's body, reading no more of it than `maxBytes` and one piece: a declared
 * length over the limit reads nothing (undefined); one within it is read whole (the runtime reads
 * no more than it declares); a body of unknown length stops one piece past the limit, so the
 * bytes are then longer than `maxBytes`. The runtime's own limit is set past any body
 * (cli/serve.ts), so every body too large is refused by tokenmint, with the contract's JSON. Not
 * an async function: the token path awaits the runtime's read itself, with no step between.
 */
export function bodyBytes(request: Request, maxBytes: number): Promise<Uint8Array<ArrayBuffer>> | undefined {
  const declared = request.headers.get("content-length");
  if (declared === null) return readUnknownLength(request, maxBytes);
  const length = Number(declared);
  if (length <= maxBytes) return request.bytes();
  // Not a number: the header sent twice with one value ("13, 13"), which the runtime accepts and
  // frames the body by (RFC 9110 §8.6; two values differ and it answers 400). Read as of unknown length.
  return Number.isNaN(length) ? readUnknownLength(request, maxBytes) : undefined;
}

/**
 * The 413 of a body over the limit. The connection stays open: the runtime reads the rest of the
 * body and drops it, so the answer reaches a client still sending (closing with its bytes unread
 * would reset the connection, and the client could lose the answer) and the next request follows.
 */
const tooLarge = (maxBytes: number) => new AppError("payload_too_large", `The request body is larger than ${maxBytes} bytes.`);

/** The body's bytes, within the size limit; 413 otherwise (declared or actual). */
async function readBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  const bytes = await bodyBytes(request, maxBytes);
  if (bytes === undefined || bytes.byteLength > maxBytes) throw tooLarge(maxBytes);
  return bytes;
}

function utf8(bytes: Uint8Array): string {
  try {
    return decodeUtf8Strict(bytes);
  } catch {
    throw new AppError("invalid_request", "The request body is not valid UTF-8.");
  }
}

/**
 * The deepest nesting of objects and arrays a JSON body may have. No request schema goes past a
 * few levels; a body nested thousands deep (a few KiB) would only cost stack and memory later.
 */
export const MAX_JSON_DEPTH = 32;

/** Whether JSON `text` nests objects and arrays deeper than `max` (brackets inside strings do not count). */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return true;
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth--;
  }
  return false;
}

/** A UTF-16 surrogate without its other half. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether any string in `value` (keys included) holds a lone UTF-16 surrogate. */
function holdsLoneSurrogate(value: unknown): boolean {
  if (typeof value === "string") return LONE_SURROGATE.test(value);
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return value.some(holdsLoneSurrogate);
  return Object.entries(value).some(([name, member]) => LONE_SURROGATE.test(name) || holdsLoneSurrogate(member));
}

/** A `\uD800`-`\uDFFF` escape: the only way a lone surrogate gets into a body that is valid UTF-8. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** The body's bytes parsed per the contract, or the matching AppError (empty is `{}`). */
export function parseJsonBytes(bytes: Uint8Array, contentType: string | null): unknown {
  if (bytes.byteLength === 0) return {};
  if (!JSON_TYPE.test(contentType ?? "")) {
    throw new AppError("unsupported_media_type", "The request body must be JSON, sent with 'Content-Type: application/json'.");
  }
  const text = utf8(bytes);
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new AppError("invalid_request", `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AppError("invalid_request", "The request body is not valid JSON.");
  }
  // Text that is not Unicode (half of a surrogate pair) could not be stored and read back as sent.
  if (SURROGATE_ESCAPE.test(text) && holdsLoneSurrogate(parsed)) {
    throw new AppError("invalid_request", "The request body holds a string that is not valid Unicode (an unpaired surrogate escape such as \\ud800).");
  }
  return trimTextFields(parsed);
}

/**
 * Parses form-encoded bytes into parameters: an empty value counts as absent and a repeated
 * parameter becomes a list, which validation refuses for the parameters it knows (RFC 6749 §3.1,
 * §3.2). Built with Object.fromEntries, so a parameter named `__proto__` is just a name.
 */
export function parseFormBytes(bytes: Uint8Array, contentType: string | null): Record<string, string | string[]> {
  if (bytes.byteLength === 0) return {};
  if (!FORM_TYPE.test(contentType ?? "")) {
    throw new AppError("invalid_request", "The request body must be form-encoded, sent with 'Content-Type: application/x-www-form-urlencoded' (RFC 6749).");
  }
  const params = new Map<string, string[]>();
  for (const [name, value] of new URLSearchParams(utf8(bytes))) {
    if (value === "") continue;
    const values = params.get(name);
    if (values === undefined) params.set(name, [value]);
    else values.push(value);
  }
  return Object.fromEntries([...params].map(([name, values]) => [name, values.length === 1 ? (values[0] as string) : values]));
}

/** Whether a Content-Encoding header names a coding: every one but `identity` (no coding) is refused. */
const isEncoded = (encoding: string | null) =>
  encoding !== null && encoding.split(",").some((coding) => coding.trim() !== "" && coding.trim().toLowerCase() !== "identity");

/**
 * The body of a request to `pathname`, read into `bytes`: form for OAuth paths, JSON for the rest.
 * A body sent with a content coding (gzip, br) is refused, not read as if it were plain: 415, or
 * at the OAuth endpoints, which never answer 415, 400 (RFC 9110 §8.4).
 */
export function parseBody(bytes: Uint8Array, request: Request, pathname: string): unknown {
  const oauth = isOAuthPath(pathname);
  if (bytes.byteLength > 0 && isEncoded(request.headers.get("content-encoding"))) {
    const message = "The request body must not be compressed or otherwise encoded: send it without a Content-Encoding.";
    throw new AppError(oauth ? "invalid_request" : "unsupported_media_type", message);
  }
  const contentType = request.headers.get("content-type");
  return oauth ? parseFormBytes(bytes, contentType) : parseJsonBytes(bytes, contentType);
}

/**
 * Registers the parser for every route: form for OAuth paths, JSON for the rest. The only OPTIONS
 * routes are CORS preflights, which take no body: one sent is ignored, as it is with a GET.
 */
export const bodyParser = (maxBytes: number) =>
  new Elysia({ name: "body-parser" }).onParse({ as: "global" }, async ({ request, path }) =>
    request.method === "OPTIONS" ? null : parseBody(await readBody(request, maxBytes), request, path),
  );
