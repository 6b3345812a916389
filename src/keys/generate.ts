/**
 * @module keys/generate
 * Creates signing keys: a fresh key pair for the algorithm, its kid (the RFC 7638 thumbprint of
 * the public key) and its public JWK built by copying only the public members allowed for its
 * key type, never by deleting private ones.
 *
 * Key pairs come from `node:crypto`'s asynchronous generateKeyPair, which works off the event
 * loop. WebCrypto's generateKey made the RSA key on it in this runtime: each RS256 key (a
 * rotation, a revocation's replacement, a new project) held up every request of the process for
 * the 50 ms or more an RSA-2048 key takes.
 */
import { generateKeyPair, type KeyObject } from "node:crypto";
import { calculateJwkThumbprint, type JWK } from "jose";
import type { SigningAlg } from "../config/schema.ts";
import type { SigningKeyRecord } from "../store/store.ts";
import { privateKeyAad, seal } from "./sealing.ts";

/** The public members of each key type (RFC 7517/7518/8037). */
const PUBLIC_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  RSA: ["kty", "n", "e"],
  EC: ["kty", "crv", "x", "y"],
  OKP: ["kty", "crv", "x"],
};

/** Copies the allowed public members of `jwk`, plus kid, alg and use. */
export function publicJwkOf(jwk: JWK, kid: string, alg: SigningAlg): Record<string, string> {
  const members = PUBLIC_MEMBERS[jwk.kty ?? ""];
  if (members === undefined) throw new Error(`unsupported key type ${jwk.kty}`);
  const out: Record<string, string> = {};
  for (const name of members) {
    const value = (jwk as Record<string, unknown>)[name];
    if (typeof value !== "string") throw new Error(`public key member ${name} is missing`);
    out[name] = value;
  }
  return { ...out, kid, alg, use: "sig" };
}

/** A new key pair for `alg` (RSA 2048 with exponent 65537, P-256 or Ed25519), made off the event loop. */
function keyPair(alg: SigningAlg): Promise<{ publicKey: KeyObject; privateKey: KeyObject }> {
  return new Promise((resolve, reject) => {
    const done = (error: Error | null, publicKey: KeyObject, privateKey: KeyObject) => (error === null ? resolve({ publicKey, privateKey }) : reject(error));
    if (alg === "RS256") generateKeyPair("rsa", { modulusLength: 2048, publicExponent: 0x10001 }, done);
    else if (alg === "ES256") generateKeyPair("ec", { namedCurve: "P-256" }, done);
    else generateKeyPair("ed25519", {}, done);
  });
}

/** Generates a new signing key for `projectId`, sealed with `masterKey`, in state `state`. */
export async function generateSigningKey(
  projectId: string,
  alg: SigningAlg,
  masterKey: CryptoKey,
  now: number,
  state: SigningKeyRecord["state"],
): Promise<SigningKeyRecord> {
  const { publicKey, privateKey } = await keyPair(alg);
  const publicRaw = publicKey.export({ format: "jwk" }) as JWK;
  const kid = await calculateJwkThumbprint(publicRaw, "sha256");
  const privateJwk = privateKey.export({ format: "jwk" }) as JWK;
  return {
    kid,
    alg,
    state,
    createdAt: now,
    ...(state === "current" ? { activatesAt: now } : {}),
    publicJwk: publicJwkOf(publicRaw, kid, alg),
    sealedPrivateJwk: await seal(masterKey, JSON.stringify(privateJwk), privateKeyAad(projectId, kid)),
  };
}
