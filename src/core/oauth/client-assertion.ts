/**
 * @module core/oauth/client-assertion
 * `private_key_jwt` client authentication (RFC 7523 §2.2 and §3, OpenID Connect Core §9): the
 * client sends `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer` and
 * `client_assertion`, a JWT it signed with a private key whose public half it registered
 * (core/client-jwks.ts). The assertion is accepted when:
 * - its alg is one of ASSERTION_ALGS (never `none`, never HS*), and a registered key of the client
 *   fits it: the key named by the header's `kid`, or without `kid` each key of the alg's type;
 * - `iss` and `sub` are both the client id, and `aud` holds one of the acceptable audiences (the
 *   issuer or the token endpoint, and at introspection and revocation that endpoint's own URL);
 * - `exp` is present and not passed, `nbf` (if any) is reached and `iat` (if any) is not in the
 *   future, each with ASSERTION_CLOCK_SKEW_S of tolerance;
 * - it lives at most MAX_ASSERTION_LIFETIME_S: `exp` no further than that ahead of now (plus the
 *   skew) and, when `iat` is given, no further than that after `iat`. An hour, as Okta allows and
 *   as long as the assertions Python's authlib makes by default live; the bound keeps the record
 *   of used ids to an hour of them;
 * - its `jti` (required) was not used before by the same client: the store records it until
 *   `exp` plus the skew, so a replay is refused for the whole time the assertion would be valid,
 *   by every process of the service.
 * Every failure is `invalid_client`, with a description naming the failed check and never a key.
 */
import { constants, createPublicKey, verify, type KeyObject } from "node:crypto";
import { base64url, decodeJwt, decodeProtectedHeader, errors, UnsecuredJWT, type JWTPayload, type ProtectedHeaderParameters } from "jose";
import type { ClientRecord, Store } from "../../store/store.ts";
import { invalidClient, OAuthError } from "./errors.ts";

/** The value of `client_assertion_type` for a JWT assertion (RFC 7523 §2.2). */
export const CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** The JWS algorithms accepted for client assertions, as discovery lists them. */
export const ASSERTION_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"] as const;
export type AssertionAlg = (typeof ASSERTION_ALGS)[number];

/** The key type (and curve) each accepted alg verifies with. */
export const ALG_KEY_TYPES: Readonly<Record<AssertionAlg, { kty: "RSA" | "EC" | "OKP"; crv?: string }>> = {
  RS256: { kty: "RSA" },
  RS384: { kty: "RSA" },
  RS512: { kty: "RSA" },
  PS256: { kty: "RSA" },
  PS384: { kty: "RSA" },
  PS512: { kty: "RSA" },
  ES256: { kty: "EC", crv: "P-256" },
  ES384: { kty: "EC", crv: "P-384" },
  ES512: { kty: "EC", crv: "P-521" },
  EdDSA: { kty: "OKP", crv: "Ed25519" },
};

/** Tolerated clock difference between the client and us, in seconds, for exp, nbf and iat. */
export const ASSERTION_CLOCK_SKEW_S = 30;
/** The longest lifetime of an assertion, in seconds (see the module comment). */
export const MAX_ASSERTION_LIFETIME_S = 3600;
/** The longest `jti` accepted, in characters. */
export const MAX_JTI_LENGTH = 256;

/** What an assertion is checked against. */
export interface AssertionCheck {
  /** The acceptable `aud` values: the issuer and the URL of the receiving endpoint. */
  audiences: readonly string[];
  /** Epoch milliseconds (the context clock). */
  now: number;
}

const isAssertionAlg = (alg: unknown): alg is AssertionAlg => typeof alg === "string" && (ASSERTION_ALGS as readonly string[]).includes(alg);

/** A header or claim value quoted for a description, when it is short printable text. */
const shown = (value: unknown) => (typeof value === "string" && /^[\x20-\x7e]{1,80}$/.test(value) ? `'${value}'` : "(not shown)");

/** The refusal of an unknown client and of a client without keys alike. */
export const NO_CLIENT_KEYS = "Client authentication failed: unknown client, or a client without registered public keys (PUT .../jwks).";

const NOT_A_JWT = "client_assertion is not a JWT: send a compact JWS (header.payload.signature) signed with one of the client's registered keys.";

/** The protected header of a compact JWS of exactly three segments, or invalid_client: not a JWT. */
function compactHeader(assertion: string): ProtectedHeaderParameters {
  const first = assertion.indexOf(".");
  const last = assertion.lastIndexOf(".");
  if (first === last || assertion.indexOf(".", first + 1) !== last) throw invalidClient(NOT_A_JWT);
  try {
    return decodeProtectedHeader(assertion);
  } catch {
    throw invalidClient(NOT_A_JWT);
  }
}

/**
 * The client id an assertion claims, read before it is verified: its `sub`, which must equal its
 * `iss`. Only says which client's keys to verify it with; invalid_client when it is not a JWT.
 */
export function assertionClientId(assertion: string): string {
  compactHeader(assertion);
  let claims: JWTPayload;
  try {
    claims = decodeJwt(assertion);
  } catch {
    throw invalidClient(NOT_A_JWT);
  }
  if (typeof claims.sub !== "string" || claims.sub === "" || claims.iss !== claims.sub) {
    throw invalidClient("client_assertion must carry iss and sub, both equal to the client id.");
  }
  return claims.sub;
}

/**
 * The Ed25519 points of small order, as libsodium refuses them (their y, the sign bit aside): 0,
 * 1, the two of order 8, and p - 1, p and p + 1. A signature made of such a point and zero
 * verifies against it for every message or for one in a few: anyone could sign as its holder.
 */
const SMALL_ORDER_ED25519 = [
  "0000000000000000000000000000000000000000000000000000000000000000",
  "0100000000000000000000000000000000000000000000000000000000000000",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
];

/** Whether an Ed25519 public key (its `x`, base64url) is one of the points of small order. */
export function isSmallOrderEd25519(x: string): boolean {
  let bytes: Uint8Array;
  try {
    bytes = base64url.decode(x);
  } catch {
    return false;
  }
  if (bytes.length !== 32) return false;
  bytes[31] = (bytes[31] as number) & 0x7f;
  return SMALL_ORDER_ED25519.includes(Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join(""));
}

/** The client's registered keys that could have signed with the header's alg and kid. */
function candidateKeys(keys: readonly Record<string, string>[], alg: AssertionAlg, kid: unknown): Record<string, string>[] {
  const named = kid === undefined ? keys : keys.filter((key) => key.kid === kid);
  if (named.length === 0) throw invalidClient(`No registered key of the client has the kid ${shown(kid)} of the client_assertion header.`);
  const { kty, crv } = ALG_KEY_TYPES[alg];
  // A small-order Ed25519 key, registered before such keys were refused, verifies forgeries: never tried.
  const fitting = named.filter((key) => key.kty === kty && key.crv === crv && (key.alg === undefined || key.alg === alg) && !(kty === "OKP" && isSmallOrderEd25519(key.x ?? "")));
  if (fitting.length === 0) throw invalidClient(`No registered key of the client${kid === undefined ? "" : ` with kid ${shown(kid)}`} can verify alg ${alg}.`);
  return fitting;
}

/** A refusal of jose's checks as invalid_client naming the claim; anything but a JOSE error is a fault and rethrown. */
function claimRefusal(error: unknown, audiences: readonly string[]): OAuthError {
  if (!(error instanceof errors.JOSEError)) throw error;
  if (error instanceof errors.JWTExpired) return invalidClient("client_assertion has expired (exp): sign a new assertion for each request.");
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.reason === "missing") return invalidClient(`client_assertion lacks the required '${error.claim}' claim.`);
    if (error.reason === "invalid") return invalidClient(`client_assertion '${error.claim}' must be a NumericDate (seconds since the epoch).`);
    if (error.claim === "aud") return invalidClient(`client_assertion aud must contain ${audiences.map((a) => `'${a}'`).join(" or ")}.`);
    if (error.claim === "nbf") return invalidClient("client_assertion is not valid yet (nbf is in the future).");
    if (error.claim === "iss" || error.claim === "sub") return invalidClient("client_assertion must carry iss and sub, both equal to the client id.");
    return invalidClient(`client_assertion claim '${error.claim}' is not acceptable.`);
  }
  return invalidClient(NOT_A_JWT);
}

/** How node:crypto verifies each alg's signature (RFC 7518 §3): the digest and the key options. */
const VERIFIERS: Readonly<Record<AssertionAlg, { digest: string | null; options: { padding?: number; saltLength?: number; dsaEncoding?: "ieee-p1363" } }>> = {
  RS256: { digest: "sha256", options: { padding: constants.RSA_PKCS1_PADDING } },
  RS384: { digest: "sha384", options: { padding: constants.RSA_PKCS1_PADDING } },
  RS512: { digest: "sha512", options: { padding: constants.RSA_PKCS1_PADDING } },
  // The salt as long as the digest, as RFC 7518 §3.5 requires (WebCrypto and jose alike).
  PS256: { digest: "sha256", options: { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST } },
  PS384: { digest: "sha384", options: { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST } },
  PS512: { digest: "sha512", options: { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST } },
  // R and S side by side, each the curve's full length (RFC 7518 §3.4), never DER.
  ES256: { digest: "sha256", options: { dsaEncoding: "ieee-p1363" } },
  ES384: { digest: "sha384", options: { dsaEncoding: "ieee-p1363" } },
  ES512: { digest: "sha512", options: { dsaEncoding: "ieee-p1363" } },
  EdDSA: { digest: null, options: {} },
};

/** The length of an ECDSA signature per alg: R and S of the curve's size. */
const ECDSA_SIGNATURE_BYTES: Partial<Record<AssertionAlg, number>> = { ES256: 64, ES384: 96, ES512: 132 };

/** A registered key as node:crypto verifies with it; `key` undefined when it cannot be parsed here. */
interface ParsedKey {
  key: KeyObject | undefined;
  /**
   * Whether a verification takes long enough to run off the event loop: P-384, P-521 and RSA
   * over 4096 bits took 0.5 to 1.2 ms of a core each here (P-256, Ed25519 and RSA up to 4096
   * bits 0.05 to 0.1 ms), and an assertion without a kid is tried against each fitting key.
   */
  offThread: boolean;
}

/** The RSA modulus up to which a verification runs on the event loop, in bits. */
const ON_LOOP_RSA_BITS = 4096;

/**
 * Each registered key parsed once: the key objects of a cached key set (store/caching-store.ts
 * hands out the same record, frozen all the way down, until the set changes) map to their
 * node:crypto key.
 */
const parsedKeys = new WeakMap<Record<string, string>, ParsedKey>();

/** The parsed form of a registered key, made at its first use and kept as long as the key object lives. */
function parsedKeyOf(jwk: Record<string, string>): ParsedKey {
  let parsed = parsedKeys.get(jwk);
  if (parsed === undefined) {
    let key: KeyObject | undefined;
    try {
      key = createPublicKey({ key: jwk, format: "jwk" });
    } catch {
      // Registration parses every key the same way (core/client-jwks.ts): only a key stored by
      // an earlier version could fail here, and it verifies nothing.
      key = undefined;
    }
    const offThread = jwk.kty === "EC" ? jwk.crv !== "P-256" : jwk.kty === "RSA" && (key?.asymmetricKeyDetails?.modulusLength ?? 0) > ON_LOOP_RSA_BITS;
    parsed = { key, offThread };
    parsedKeys.set(jwk, parsed);
  }
  return parsed;
}

/**
 * Whether `signature` over `data` verifies with `jwk` for `alg`: synchronously, as the token's
 * own signature is made (no helper thread to wake), or for a costly key on node:crypto's
 * helper threads, with the very same verification.
 */
function signatureVerifies(alg: AssertionAlg, jwk: Record<string, string>, data: Buffer, signature: Uint8Array): boolean | Promise<boolean> {
  const size = ECDSA_SIGNATURE_BYTES[alg];
  if (size !== undefined && signature.length !== size) return false;
  const { key, offThread } = parsedKeyOf(jwk);
  if (key === undefined) return false;
  const { digest, options } = VERIFIERS[alg];
  const input = { key, ...options };
  if (!offThread) return verify(digest, data, input, signature);
  return new Promise<boolean>((resolve, reject) => verify(digest, data, input, signature, (error, valid) => (error ? reject(error) : resolve(valid))));
}

/** The protected header of the unsecured JWT that carries verified claims to jose's checks. */
const UNSECURED_HEADER = base64url.encode(JSON.stringify({ alg: "none" }));

/**
 * The claims once the signature verified with one of the candidate keys, or invalid_client. The
 * claims go through jose's checks for a JWT (exp, nbf, iss, sub, aud, the required claims, the
 * clock tolerance) unchanged: as the claims of an unsecured JWT, which jose validates with the
 * same code as a verified one, since the signature is checked here already.
 */
async function verifiedClaims(assertion: string, alg: AssertionAlg, keys: Record<string, string>[], client: ClientRecord, check: AssertionCheck): Promise<JWTPayload> {
  // Three segments (compactHeader).
  const signed = assertion.lastIndexOf(".");
  const payload = assertion.slice(assertion.indexOf(".") + 1, signed);
  let signature: Uint8Array;
  try {
    signature = base64url.decode(assertion.slice(signed + 1));
  } catch {
    throw invalidClient(NOT_A_JWT);
  }
  const data = Buffer.from(assertion.slice(0, signed));
  let verified = false;
  for (const key of keys) {
    verified = await signatureVerifies(alg, key, data, signature);
    if (verified) break;
  }
  if (!verified) {
    throw invalidClient(`client_assertion signature does not verify with the client's registered key${keys.length > 1 ? "s" : ""} for alg ${alg}.`);
  }
  try {
    return UnsecuredJWT.decode(`${UNSECURED_HEADER}.${payload}.`, {
      issuer: client.id,
      subject: client.id,
      audience: [...check.audiences],
      requiredClaims: ["exp", "jti"],
      currentDate: new Date(check.now),
      clockTolerance: ASSERTION_CLOCK_SKEW_S,
    }).payload;
  } catch (error) {
    throw claimRefusal(error, check.audiences);
  }
}

/** The lifetime, iat and jti rules jose does not check (see the module comment). */
function checkLifetimeAndJti(claims: JWTPayload, nowS: number): { exp: number; jti: string } {
  const exp = claims.exp as number;
  if (claims.iat !== undefined && claims.iat > nowS + ASSERTION_CLOCK_SKEW_S) throw invalidClient("client_assertion iat is in the future; check the client's clock.");
  if (exp > nowS + MAX_ASSERTION_LIFETIME_S + ASSERTION_CLOCK_SKEW_S || (claims.iat !== undefined && exp - claims.iat > MAX_ASSERTION_LIFETIME_S)) {
    throw invalidClient(`client_assertion lives too long: exp may be at most ${MAX_ASSERTION_LIFETIME_S} seconds after iat and after now.`);
  }
  const jti = claims.jti;
  if (typeof jti !== "string" || jti.length === 0 || jti.length > MAX_JTI_LENGTH) {
    throw invalidClient(`client_assertion jti must be a string of 1 to ${MAX_JTI_LENGTH} characters, unique per assertion.`);
  }
  return { exp, jti };
}

/**
 * Verifies a client's assertion (the client found by assertionClientId) and records its jti;
 * resolves when the client is authenticated, throws invalid_client otherwise.
 */
export async function verifyClientAssertion(store: Store, client: ClientRecord, assertion: string, check: AssertionCheck): Promise<void> {
  const header = compactHeader(assertion);
  if (!isAssertionAlg(header.alg)) {
    throw invalidClient(`client_assertion alg ${shown(header.alg)} is not accepted; sign with one of ${ASSERTION_ALGS.join(", ")}.`);
  }
  // No JWS extension is understood here (RFC 7515 §4.1.11); a JWT never has an unencoded payload.
  if (header.crit !== undefined) throw invalidClient("client_assertion header lists crit extensions; none is accepted in an assertion: sign it without a crit header parameter.");
  const jwks = await store.getClientJwks(client.projectId, client.id);
  if (jwks === undefined) throw invalidClient(NO_CLIENT_KEYS);
  const claims = await verifiedClaims(assertion, header.alg, candidateKeys(jwks.keys, header.alg, header.kid), client, check);
  const { exp, jti } = checkLifetimeAndJti(claims, Math.floor(check.now / 1000));
  // Kept as long as the assertion verifies: jose compares exp with whole seconds of now, so an exp
  // of E.5 verifies until second E + skew + 1 begins.
  if (!(await store.useAssertionJti(client.projectId, client.id, jti, Math.ceil(exp + ASSERTION_CLOCK_SKEW_S) * 1000, check.now))) {
    throw invalidClient("client_assertion was already used (same jti): sign a new assertion, with a new jti, for each request.");
  }
}
