/**
 * @module core/utf8
 * Strict UTF-8 decoding of request bytes (bodies, Basic credentials): bytes that are not UTF-8
 * are refused, never replaced with U+FFFD.
 */

/** One decoder serves every call: with `fatal` and no `stream`, it keeps no state between them. */
const STRICT = new TextDecoder("utf-8", { fatal: true });

/** The text of `bytes`; throws a TypeError when they are not UTF-8. */
export const decodeUtf8Strict = (bytes: Uint8Array): string => STRICT.decode(bytes);
