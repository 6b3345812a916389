/**
 * @module keys/generate
 * Creates signing keys: a fresh key pair for the algorithm, its kid (the RFC 7638 thumbprint of
 * the public key) and its public JWK built by copying only the public members allowed for its
 * key type, never by deleting private ones.
 */
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from "jose";
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

/** Generates a new signing key for `projectId`, sealed with `masterKey`, in state `state`. */
export async function generateSigningKey(
  projectId: string,
  alg: SigningAlg,
  masterKey: CryptoKey,
  now: number,
  state: SigningKeyRecord["state"],
): Promise<SigningKeyRecord> {
  const options = alg === "RS256" ? { modulusLength: 2048, extractable: true } : alg === "EdDSA" ? { crv: "Ed25519", extractable: true } : { extractable: true };
  const { publicKey, privateKey } = await generateKeyPair(alg, options);
  const publicRaw = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicRaw, "sha256");
  const privateJwk = await exportJWK(privateKey);
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
