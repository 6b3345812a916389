/**
 * ES256 and EdDSA through the system's OpenSSL 3 (`libcrypto.so.3`) via `bun:ffi`, for
 * scripts/bench-signers.ts only: the service signs these with node:crypto, which measured faster
 * (docs/performance.md, "Signers"). The measurement needs them to be real signers all the same,
 * so each is checked before it is timed: an ES256 signature must verify with node:crypto, and an
 * Ed25519 signature (deterministic) must equal node:crypto's byte for byte.
 *
 * - ES256: SHA-256 of the input (node:crypto, one shot), then `EVP_PKEY_sign` on a context
 *   initialised once per key, as `openssl speed` signs; OpenSSL's DER signature becomes the JWS
 *   r||s in JavaScript.
 * - EdDSA: `EVP_DigestSignInit` (no digest) and the one-shot `EVP_DigestSign` per signature, as
 *   Ed25519 requires.
 * Their native key and contexts are never freed: the benchmark's process ends soon after.
 */
import { hash, type KeyObject, sign, verify } from "node:crypto";
import type { SigningAlg } from "../../src/config/schema.ts";
import { LIBCRYPTO_SYMBOLS, type LibcryptoBinding, type Pointer } from "../../src/keys/signers/libcrypto.ts";
import type { RawSigner } from "../../src/keys/signers/signer.ts";

/** The service's symbols and those these two signers add. */
const SYMBOLS = {
  ...LIBCRYPTO_SYMBOLS,
  EVP_PKEY_CTX_new: { args: ["ptr", "ptr"], returns: "ptr" },
  EVP_PKEY_sign_init: { args: ["ptr"], returns: "i32" },
  EVP_PKEY_sign: { args: ["ptr", "ptr", "ptr", "ptr", "u64"], returns: "i32" },
} as const;

interface Binding extends LibcryptoBinding {
  EVP_PKEY_CTX_new(pkey: Pointer, engine: null): Pointer | null;
  EVP_PKEY_sign_init(ctx: Pointer): number;
  EVP_PKEY_sign(ctx: Pointer, sig: Uint8Array, siglen: BigUint64Array, tbs: Uint8Array, tbslen: number): number;
}

/** The JWS form (r||s, 32 bytes each) of an ECDSA P-256 signature in DER. */
export function derToJoseP256(der: Uint8Array): Uint8Array {
  const raw = new Uint8Array(64);
  // SEQUENCE { INTEGER r, INTEGER s }: a P-256 signature is short enough for one length byte.
  let at = 2;
  for (let part = 0; part < 2; part++) {
    if (der[at] !== 0x02) throw new Error("not a DER ECDSA signature");
    const length = der[at + 1] as number;
    let start = at + 2;
    let size = length;
    // A leading zero keeps a DER integer positive; r||s has none.
    while (size > 32) {
      start++;
      size--;
    }
    raw.set(der.subarray(start, start + size), part * 32 + 32 - size);
    at += 2 + length;
  }
  return raw;
}

/**
 * A libcrypto signer of `alg` (ES256 or EdDSA) for `key`, checked against node:crypto first;
 * undefined when libcrypto cannot be loaded here.
 */
export async function libcryptoEcSigner(alg: Exclude<SigningAlg, "RS256">, key: KeyObject, library = "libcrypto.so.3"): Promise<RawSigner | undefined> {
  let binding: Binding;
  let ptr: (bytes: Uint8Array) => Pointer;
  try {
    const ffi = await import("bun:ffi");
    binding = ffi.dlopen(library, SYMBOLS as unknown as Parameters<typeof ffi.dlopen>[1]).symbols as unknown as Binding;
    ptr = (bytes) => ffi.ptr(bytes) as Pointer;
  } catch {
    return undefined;
  }
  const der = new Uint8Array(key.export({ type: "pkcs8", format: "der" }));
  const pkey = binding.d2i_AutoPrivateKey(null, new BigUint64Array([BigInt(ptr(der))]), der.byteLength);
  if (!pkey) throw new Error(`libcrypto did not parse the ${alg} key`);
  const out = new Uint8Array(128);
  const outLength = new BigUint64Array(1);
  let signer: RawSigner;
  if (alg === "ES256") {
    const ctx = binding.EVP_PKEY_CTX_new(pkey, null);
    if (!ctx || binding.EVP_PKEY_sign_init(ctx) !== 1) throw new Error("EVP_PKEY_sign_init failed");
    signer = {
      kind: "libcrypto",
      sign(input) {
        const digest = hash("sha256", input, "buffer");
        outLength[0] = BigInt(out.byteLength);
        if (binding.EVP_PKEY_sign(ctx, out, outLength, digest, digest.byteLength) !== 1) throw new Error("EVP_PKEY_sign failed");
        return derToJoseP256(out.subarray(0, Number(outLength[0])));
      },
    };
  } else {
    const ctx = binding.EVP_MD_CTX_new();
    if (!ctx) throw new Error("EVP_MD_CTX_new failed");
    signer = {
      kind: "libcrypto",
      sign(input) {
        binding.EVP_MD_CTX_reset(ctx);
        if (binding.EVP_DigestSignInit(ctx, null, null, null, pkey) !== 1) throw new Error("EVP_DigestSignInit failed");
        outLength[0] = BigInt(out.byteLength);
        if (binding.EVP_DigestSign(ctx, out, outLength, input, input.byteLength) !== 1) throw new Error("EVP_DigestSign failed");
        return out.slice(0, Number(outLength[0]));
      },
    };
  }
  const probe = new TextEncoder().encode("eyJhbGciOiJFUzI1NiJ9.eyJjaGVjayI6InRva2VubWludCJ9");
  const signature = signer.sign(probe) as Uint8Array;
  const good =
    alg === "ES256"
      ? verify("sha256", probe, { key, dsaEncoding: "ieee-p1363" }, signature)
      : Buffer.from(signature).equals(sign(null, probe, key));
  if (!good) throw new Error(`libcrypto's ${alg} signature does not check out against node:crypto`);
  return signer;
}
