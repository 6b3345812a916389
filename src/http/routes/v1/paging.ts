/** @module http/routes/v1/paging — opaque cursors over id-ordered listings. */
import { base64url } from "jose";
import { isUuid } from "../../../core/ids.ts";
import { AppError } from "../../../errors.ts";
import type { Page } from "../../../store/store.ts";

export const DEFAULT_PAGE_SIZE = 50;

/** Reads `limit` and `cursor` (already pattern-checked) into a page request. */
export function pageRequest(query: Record<string, string | undefined>): { limit: number; after?: string } {
  const limit = query.limit === undefined ? DEFAULT_PAGE_SIZE : Number(query.limit);
  if (query.cursor === undefined) return { limit };
  let after: string;
  try {
    after = new TextDecoder().decode(base64url.decode(query.cursor));
  } catch {
    after = "";
  }
  if (!isUuid(after)) throw new AppError("invalid_request", "Invalid query parameter 'cursor': must be a nextCursor value from a previous page.");
  // Ids are stored in lower case; one spelt in capitals would start the page before its own item.
  return { limit, after: after.toLowerCase() };
}

/** The wire form of a page. */
export const pageBody = <R, V>(page: Page<R>, view: (record: R) => V) => ({
  items: page.items.map(view),
  nextCursor: page.last === undefined ? null : base64url.encode(new TextEncoder().encode(page.last)),
});
