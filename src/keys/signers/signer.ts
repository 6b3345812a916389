/**
 * @module keys/signers/signer
 * The shape every signing backend shares: a function from the JWS signing input to the raw JWS
 * signature bytes (RFC 7515/7518: RSASSA-PKCS1-v1_5 bytes for RS256, r||s for ES256, the Ed25519
 * signature for EdDSA), bound to one private key.
 */

/** Where a signature is computed. */
export type SignerKind = "libcrypto" | "node-sync" | "node-async" | "webcrypto";

/** Signs with one private key. */
export interface RawSigner {
  readonly kind: SignerKind;
  /** The raw JWS signature of `input` (ASCII of `header.payload`). */
  sign(input: Uint8Array): Uint8Array | Promise<Uint8Array>;
}
