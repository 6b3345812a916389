/**
 * @module core/ids
 * Identifiers: UUID version 7 (RFC 9562), time-ordered, so listings come out in creation order
 * and a cursor is simply the last id seen. Within one millisecond a process's ids still rise in
 * the order they are made (RFC 9562 §6.2, method 2: the random part of the previous id raised by
 * a random step), so two records created in the same millisecond list in creation order too.
 */

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** The 74 bits of a UUIDv7 after its timestamp, less its version and variant: rand_a (12) and rand_b (62). */
const RANDOM_BITS = 74n;
/** A step within one millisecond: at least 1, at most 2^32, so the next id cannot be guessed from the last. */
const STEP_BITS = 32n;

/** The last id's instant and random part, for the next id of the same millisecond. */
let last = { ms: -1, random: 0n };

/** A random bigint of `bits` bits. */
function randomBits(bits: bigint): bigint {
  const bytes = crypto.getRandomValues(new Uint8Array(Number((bits + 7n) / 8n)));
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return value & ((1n << bits) - 1n);
}

/** A new UUIDv7 for the instant `now` (epoch ms). */
export function uuidv7(now: number): string {
  let random: bigint;
  if (now === last.ms) {
    random = last.random + 1n + randomBits(STEP_BITS);
    // Past the 74 bits only after some 2^41 ids in one millisecond; were it so, a fresh start keeps the id well-formed.
    if (random >> RANDOM_BITS !== 0n) random = randomBits(RANDOM_BITS - 1n);
  } else {
    // The top bit clear leaves room to rise within the millisecond.
    random = randomBits(RANDOM_BITS - 1n);
  }
  last = { ms: now, random };
  const bytes = new Uint8Array(16);
  let ms = now;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  const randA = Number(random >> 62n);
  bytes[6] = 0x70 | (randA >> 8);
  bytes[7] = randA & 0xff;
  let randB = random & ((1n << 62n) - 1n);
  for (let i = 15; i >= 9; i--) {
    bytes[i] = Number(randB & 0xffn);
    randB >>= 8n;
  }
  bytes[8] = 0x80 | Number(randB);
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
