/**
 * @module keys/signers/builtin
 * The runtime's own signers: node:crypto's `sign` (synchronous and with a callback) and
 * WebCrypto's `subtle.sign`. They work everywhere the service runs; keys come in as private JWKs.
 */
import { createPrivateKey, sign as nodeSign, type JsonWebKeyInput, type KeyObject, type SignKeyObjectInput } from "node:crypto";
import type { JWK } from "jose";
import type { SigningAlg } from "../../config/schema.ts";
import type { RawSigner } from "./signer.ts";

/** node:crypto digest name per algorithm (Ed25519 hashes internally). */
const NODE_DIGEST: Readonly<Record<SigningAlg, string | null>> = { RS256: "sha256", ES256: "sha256", EdDSA: null };

/** WebCrypto parameters per algorithm. */
const WEB_PARAMS: Readonly<Record<SigningAlg, { import: RsaHashedImportParams | EcKeyImportParams | Algorithm; sign: Algorithm | EcdsaParams }>> = {
  RS256: { import: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, sign: { name: "RSASSA-PKCS1-v1_5" } },
  ES256: { import: { name: "ECDSA", namedCurve: "P-256" }, sign: { name: "ECDSA", hash: "SHA-256" } },
  EdDSA: { import: { name: "Ed25519" }, sign: { name: "Ed25519" } },
};

/** A node:crypto private key object from a private JWK. */
export const nodePrivateKey = (privateJwk: JWK): KeyObject => createPrivateKey({ key: privateJwk as JsonWebKeyInput["key"], format: "jwk" });

/** The key argument of node:crypto's sign: ES256 wants the JWS (r||s) encoding, not DER. */
const nodeKeyInput = (alg: SigningAlg, key: KeyObject): KeyObject | SignKeyObjectInput => (alg === "ES256" ? { key, dsaEncoding: "ieee-p1363" } : key);

/** node:crypto `sign`, synchronous: runs on the calling thread. */
export function nodeSyncSigner(alg: SigningAlg, key: KeyObject): RawSigner {
  const digest = NODE_DIGEST[alg];
  const keyInput = nodeKeyInput(alg, key);
  return { kind: "node-sync", sign: (input) => nodeSign(digest, input, keyInput) };
}

/** node:crypto `sign` with a callback: the runtime may run it off the calling thread. */
export function nodeAsyncSigner(alg: SigningAlg, key: KeyObject): RawSigner {
  const digest = NODE_DIGEST[alg];
  const keyInput = nodeKeyInput(alg, key);
  return {
    kind: "node-async",
    sign: (input) => new Promise<Uint8Array>((resolve, reject) => nodeSign(digest, input, keyInput, (error, signature) => (error ? reject(error) : resolve(signature)))),
  };
}

/** WebCrypto `subtle.sign` with a non-extractable key. */
export async function webCryptoSigner(alg: SigningAlg, privateJwk: JWK): Promise<RawSigner> {
  const params = WEB_PARAMS[alg];
  const key = await crypto.subtle.importKey("jwk", privateJwk as JsonWebKey, params.import, false, ["sign"]);
  return { kind: "webcrypto", sign: async (input) => new Uint8Array(await crypto.subtle.sign(params.sign, key, input as Uint8Array<ArrayBuffer>)) };
}
