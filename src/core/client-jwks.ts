/**
 * @module core/client-jwks
 * A client's public keys, the credentials of `private_key_jwt` (RFC 7523 §2.2): a set of 1 to 5
 * public JWKs, replaced as a whole. Accepted: RSA of 2048 to 8192 bits, EC on P-256, P-384 or
 * P-521, OKP Ed25519, each in its one encoding (no leading zero bytes, full-length coordinates),
 * and no Ed25519 point of small order. A private member or a symmetric key is refused, naming the
 * problem. Each key is stored with the public members its type needs and nothing else (kty, kid,
 * use, alg, n, e, crv, x, y): other members, such as `key_ops`, `ext` or `x5c`, are dropped. A
 * key without `kid` gets its RFC 7638 thumbprint (SHA-256) as kid, so every stored key has one,
 * unique in the set.
 */
import { createPublicKey } from "node:crypto";
import { base64url, calculateJwkThumbprint, importJWK } from "jose";
import { AppError } from "../errors.ts";
import { StoreError, type ClientJwksRecord, type Store } from "../store/store.ts";
import { getClient } from "./clients.ts";
import { ALG_KEY_TYPES, ASSERTION_ALGS, isSmallOrderEd25519, type AssertionAlg } from "./oauth/client-assertion.ts";
import { isPlainText } from "./text.ts";

/** How many public keys a client may register at once: enough for a rotation across several signers. */
export const MAX_CLIENT_KEYS = 5;
/** The smallest RSA modulus accepted, in bits (RFC 7518 §3.3). */
export const MIN_RSA_BITS = 2048;
/**
 * The largest RSA modulus accepted: verifying against a 16384-bit key costs about 1.2 ms of CPU,
 * and an assertion without a kid is tried against each of the client's keys, at the cost of
 * anyone who knows a client id.
 */
export const MAX_RSA_BITS = 8192;

/** The value of an RSA public exponent, or undefined past 2^53 (no signer uses one that large). */
function exponentOf(value: string): number | undefined {
  let e = 0;
  for (const byte of base64url.decode(value)) {
    e = e * 256 + byte;
    if (e > Number.MAX_SAFE_INTEGER) return undefined;
  }
  return e;
}

/** Members that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2). */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];
/** The key members each accepted kty needs, in the order they are stored. */
const KEY_MEMBERS = { RSA: ["n", "e"], EC: ["crv", "x", "y"], OKP: ["crv", "x"] } as const;
type Kty = keyof typeof KEY_MEMBERS;
const CURVES: Readonly<Record<Kty, readonly string[]>> = { RSA: [], EC: ["P-256", "P-384", "P-521"], OKP: ["Ed25519"] };
/** Unpadded base64url: its alphabet, and a length that encodes whole bytes (4n + 1 characters never do). */
const isBase64url = (value: string) => /^[A-Za-z0-9_-]+$/.test(value) && value.length % 4 !== 1;
/** A kid is 1..200 printable characters (no control characters), like our other free text. */

const problem = (index: number, text: string) => new AppError("invalid_request", `keys[${index}]: ${text}`);

/** Size in bits of a big-endian unsigned integer given as base64url (an RSA modulus). */
function bitLength(value: string): number {
  const bytes = base64url.decode(value);
  let first = 0;
  while (first < bytes.length && bytes[first] === 0) first++;
  if (first === bytes.length) return 0;
  return (bytes.length - first - 1) * 8 + (bytes[first] as number).toString(2).length;
}

/** The field prime of Ed25519, 2^255 - 19, and its curve constant d = -121665/121666 (RFC 8032 §5.1). */
const ED25519_P = 2n ** 255n - 19n;
const ED25519_D = 37095705934669439343138083508754565189542113879843219016388785533085940283555n;

/** `base` to the power `exponent`, modulo `modulus`. */
function modPow(base: bigint, exponent: bigint, modulus: bigint): bigint {
  let result = 1n;
  let b = base % modulus;
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % modulus;
    b = (b * b) % modulus;
  }
  return result;
}

/**
 * Whether 32 bytes decode to a point of Ed25519 (RFC 8032 §5.1.3): y below p, and a square
 * x² = (y² - 1) / (d·y² + 1), with the sign bit clear where x is 0. The runtimes take any 32
 * bytes as a key; one that is no point verifies nothing.
 */
function isEd25519Point(bytes: Uint8Array): boolean {
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? (bytes[i] as number) & 0x7f : (bytes[i] as number));
  if (y >= ED25519_P) return false;
  const yy = (y * y) % ED25519_P;
  const xx = (((yy - 1n + ED25519_P) % ED25519_P) * modPow((ED25519_D * yy + 1n) % ED25519_P, ED25519_P - 2n, ED25519_P)) % ED25519_P;
  if (xx === 0n) return (bytes[31] as number) >> 7 === 0;
  // Euler's criterion: a square modulo p exactly when its (p-1)/2-th power is 1.
  return modPow(xx, (ED25519_P - 1n) / 2n, ED25519_P) === 1n;
}

/** Bytes of each coordinate of a curve's points (RFC 7518 §6.2.1.2, RFC 8037 §2): always the full length. */
const COORDINATE_BYTES: Readonly<Record<string, number>> = { "P-256": 32, "P-384": 48, "P-521": 66, Ed25519: 32 };

/**
 * Why a key's members are not in the one encoding RFC 7518 and RFC 8037 allow, or not a key a
 * signature can be trusted with; undefined when fine. A single encoding keeps the kid, the
 * key's RFC 7638 thumbprint, the one its holder computes, and one key from entering a set twice.
 */
function encodingProblem(kty: Kty, key: Record<string, string>): string | undefined {
  if (kty === "RSA") {
    for (const member of ["n", "e"]) {
      if (base64url.decode(key[member] as string)[0] === 0) return `'${member}' must not start with a zero byte (RFC 7518 §6.3.1).`;
    }
    return undefined;
  }
  const size = COORDINATE_BYTES[key.crv as string] as number;
  for (const member of kty === "EC" ? ["x", "y"] : ["x"]) {
    if (base64url.decode(key[member] as string).length !== size) return `'${member}' must be ${size} bytes for ${key.crv}, leading zeros included.`;
  }
  if (kty === "OKP" && isSmallOrderEd25519(key.x as string)) return "is a point of small order, which verifies forged signatures; register a real Ed25519 public key.";
  return undefined;
}

/** An alg a key of this type and curve can verify (for the import that proves the key is well formed). */
const algForKey = (kty: Kty, crv: string | undefined): AssertionAlg =>
  ASSERTION_ALGS.find((alg) => ALG_KEY_TYPES[alg].kty === kty && ALG_KEY_TYPES[alg].crv === crv) as AssertionAlg;

/**
 * One JWK of a PUT body as the stored public key, or 400 invalid_request naming the key and the
 * problem. The copy takes only the members listed above (never deletes from the input).
 */
export async function publicClientJwk(input: unknown, index: number): Promise<Record<string, string>> {
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw problem(index, "must be a JWK object.");
  const jwk = input as Record<string, unknown>;
  const privates = PRIVATE_MEMBERS.filter((member) => Object.hasOwn(jwk, member));
  if (jwk.kty === "oct") throw problem(index, "symmetric keys (kty 'oct') are not accepted; register a public RSA, EC or OKP key.");
  if (privates.length > 0) {
    throw problem(index, `private key member${privates.length > 1 ? "s" : ""} ${privates.map((m) => `'${m}'`).join(", ")} must not be sent; register the public key only.`);
  }
  if (typeof jwk.kty !== "string" || !Object.hasOwn(KEY_MEMBERS, jwk.kty)) throw problem(index, "kty must be 'RSA', 'EC' or 'OKP'.");
  const kty = jwk.kty as Kty;
  const key: Record<string, string> = { kty };
  for (const member of KEY_MEMBERS[kty]) {
    const value = jwk[member];
    if (typeof value !== "string" || (member !== "crv" && !isBase64url(value))) throw problem(index, `'${member}' is required for kty '${kty}' (a base64url string).`);
    key[member] = value;
  }
  if (kty !== "RSA" && !CURVES[kty].includes(key.crv as string)) throw problem(index, `crv must be one of ${CURVES[kty].map((c) => `'${c}'`).join(", ")} for kty '${kty}'.`);
  const encoding = encodingProblem(kty, key);
  if (encoding !== undefined) throw problem(index, encoding);
  if (kty === "RSA") {
    const bits = bitLength(key.n as string);
    if (bits < MIN_RSA_BITS || bits > MAX_RSA_BITS) throw problem(index, `RSA keys must have a modulus of ${MIN_RSA_BITS} to ${MAX_RSA_BITS} bits.`);
    // An exponent no verifier takes (even, below 3, past 2^32) registers a key no assertion could use.
    const e = exponentOf(key.e as string);
    if (e === undefined || e < 3 || e % 2 === 0 || e > 2 ** 32) throw problem(index, "the RSA exponent 'e' must be odd, from 3 to 2^32 (65537, AQAB, as a rule).");
  }
  if (jwk.use !== undefined && jwk.use !== "sig") throw problem(index, "use must be 'sig' (or left out): these keys verify client assertions.");
  if (jwk.alg !== undefined) {
    const fits = ASSERTION_ALGS.filter((alg) => ALG_KEY_TYPES[alg].kty === kty && ALG_KEY_TYPES[alg].crv === key.crv);
    if (!fits.includes(jwk.alg as AssertionAlg)) throw problem(index, `alg must be one of ${fits.join(", ")} for this key (or left out).`);
  }
  if (jwk.kid !== undefined && (typeof jwk.kid !== "string" || !isPlainText(jwk.kid, 1, 200))) throw problem(index, "kid must be a string of 1 to 200 characters without control characters.");
  try {
    // Both parsers: WebCrypto's (jose), and node:crypto's, which verifies assertions (client-assertion.ts).
    await importJWK({ ...key }, algForKey(kty, key.crv));
    createPublicKey({ key: { ...key }, format: "jwk" });
    // What both parsers take and no signature verifies against: an even RSA modulus (a product
    // of two odd primes is odd), 32 bytes that are no Ed25519 point.
    const numbers = base64url.decode((kty === "RSA" ? key.n : key.x) as string);
    if (kty === "RSA" ? ((numbers[numbers.length - 1] as number) & 1) === 0 : kty === "OKP" && !isEd25519Point(numbers)) throw new Error("no key");
  } catch {
    throw problem(index, `is not a valid ${kty}${key.crv === undefined ? "" : ` ${key.crv}`} public key.`);
  }
  const kid = (jwk.kid as string | undefined) ?? (await calculateJwkThumbprint(key as never, "sha256"));
  return {
    kty,
    kid,
    ...(jwk.use === undefined ? {} : { use: "sig" }),
    ...(jwk.alg === undefined ? {} : { alg: jwk.alg as string }),
    ...Object.fromEntries(KEY_MEMBERS[kty].map((member) => [member, key[member] as string])),
  };
}

/** A whole PUT body's keys as the stored set: each key checked, kids unique. */
export async function publicClientJwks(keys: readonly unknown[]): Promise<Record<string, string>[]> {
  if (keys.length < 1 || keys.length > MAX_CLIENT_KEYS) throw new AppError("invalid_request", `keys must hold 1 to ${MAX_CLIENT_KEYS} public keys.`);
  const stored: Record<string, string>[] = [];
  for (const [index, input] of keys.entries()) {
    const key = await publicClientJwk(input, index);
    const twin = stored.findIndex((other) => other.kid === key.kid);
    if (twin >= 0) throw problem(index, `kid '${key.kid}' is already used by keys[${twin}]; kids must be unique in the set.`);
    stored.push(key);
  }
  return stored;
}

/** Replaces the public keys of a client of `providerId`; 404 for an unknown provider or client. */
export async function putClientJwks(
  store: Store,
  projectId: string,
  providerId: string,
  clientId: string,
  keys: readonly unknown[],
  now: number,
): Promise<ClientJwksRecord> {
  await getClient(store, projectId, providerId, clientId);
  const record: ClientJwksRecord = { projectId, clientId, keys: await publicClientJwks(keys), updatedAt: now };
  await store.putClientJwks(record);
  return record;
}

const noKeys = (clientId: string) =>
  new AppError("not_found", `Client ${clientId} has no public keys; register them with PUT .../clients/${clientId}/jwks.`);

/** The public keys of a client of `providerId`; 404 for an unknown provider or client, or none registered. */
export async function getClientJwks(store: Store, projectId: string, providerId: string, clientId: string): Promise<ClientJwksRecord> {
  await getClient(store, projectId, providerId, clientId);
  const record = await store.getClientJwks(projectId, clientId);
  if (record === undefined) throw noKeys(clientId);
  return record;
}

/** Removes the public keys of a client: private_key_jwt stops working for it at once. 404 when none. */
export async function deleteClientJwks(store: Store, projectId: string, providerId: string, clientId: string): Promise<void> {
  await getClient(store, projectId, providerId, clientId);
  try {
    await store.deleteClientJwks(projectId, clientId);
  } catch (error) {
    if (error instanceof StoreError && error.kind === "not_found") throw noKeys(clientId);
    throw error;
  }
}
