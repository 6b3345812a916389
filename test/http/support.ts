/**
 * Assertions shared by the HTTP tests: the exact error shape of CONTRACT §3, and the formats of
 * ids and timestamps.
 */
import { expect } from "bun:test";

/** Canonical lowercase UUID. */
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** ISO 8601 UTC as `Date#toISOString` writes it. */
export const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** Well-formed UUIDs that the service never issues. */
export const UNKNOWN_ID = "00000000-0000-7000-8000-000000000000";
export const OTHER_UNKNOWN_ID = "ffffffff-ffff-7fff-bfff-ffffffffffff";

/** The media type of a response, without parameters. */
export const mediaType = (res: Response) => (res.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase();

/** The JSON body of a response, typed by the caller. */
export const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

/** The JSON body of a response, untyped: for comparing with `toEqual`. */
export const bodyOf = (res: Response): Promise<unknown> => res.json();

export interface ErrorBody {
  code: string;
  message: string;
}

/**
 * Asserts a CONTRACT §3 error: exact status, `Content-Type: application/json`, a body of exactly
 * `{code, message}` with the exact code, and (when given) a message containing `mention`.
 */
export async function expectError(res: Response, status: number, code: string, mention?: string | RegExp): Promise<ErrorBody> {
  const text = await res.text();
  expect({ status: res.status, body: text }).toEqual({ status, body: expect.any(String) });
  expect(mediaType(res)).toBe("application/json");
  const body = JSON.parse(text) as ErrorBody;
  expect(Object.keys(body).sort()).toEqual(["code", "message"]);
  expect(body.code).toBe(code);
  expect(typeof body.message).toBe("string");
  expect(body.message.length).toBeGreaterThan(0);
  if (typeof mention === "string") expect(body.message).toContain(mention);
  else if (mention !== undefined) expect(body.message).toMatch(mention);
  return body;
}
