/**
 * @module core/ids
 * Identifiers: UUID version 7 (RFC 9562), time-ordered, so listings come out in creation order
 * and a cursor is simply the last id seen.
 */

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** A new UUIDv7 for the instant `now` (epoch ms). */
export function uuidv7(now: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let ms = now;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = 0x70 | ((bytes[6] as number) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] as number) & 0x3f);
  const h = Array.from(bytes, (b) => HEX[b]).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Any RFC 9562 UUID in canonical form (case-insensitive). */
export const UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
const UUID_RE = new RegExp(UUID_PATTERN);

/** True when `value` is a canonical UUID. */
export const isUuid = (value: string) => UUID_RE.test(value);

/**
 * Path parameters with every UUID in lowercase, the form ids are issued and stored in: UUIDs are
 * case-insensitive (RFC 9562 §4), so `0192D3C4-...` names the same record. Other values (a
 * `kid`) are left as they are.
 */
export function canonicalParams(params: Record<string, string>): Record<string, string> {
  for (const name in params) {
    const value = params[name] as string;
    if (isUuid(value)) params[name] = value.toLowerCase();
  }
  return params;
}
