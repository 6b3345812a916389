/**
 * @module keys/signers/libcrypto
 * RS256 through the system's OpenSSL 3 (`libcrypto.so.3`) via `bun:ffi`: OpenSSL's RSA signs
 * markedly faster than the runtime's own. Loading never throws: under another runtime, without
 * the library, or where `bun:ffi` cannot work (it needs the JIT, e.g. no W+X memory under
 * systemd's MemoryDenyWriteExecute), `loadLibcrypto` reports why it is unavailable and the
 * caller keeps the built-in signer.
 *
 * A signer holds one `EVP_PKEY` (parsed from PKCS#8 DER once) and one `EVP_MD_CTX`, both freed
 * when the signer is disposed or garbage-collected. Each signature is
 * `EVP_DigestSignInit(SHA-256) + EVP_DigestSign`: RSASSA-PKCS1-v1_5, deterministic, so it is
 * byte-identical to the built-in signature of the same input.
 */
import type { RawSigner } from "./signer.ts";

/** The library name looked up by the dynamic loader. */
export const LIBCRYPTO_NAME = "libcrypto.so.3";

/** The OpenSSL functions used, with their C signatures (the benchmark's signers add theirs). */
export const LIBCRYPTO_SYMBOLS = {
  OpenSSL_version: { args: ["i32"], returns: "cstring" },
  EVP_sha256: { args: [], returns: "ptr" },
  d2i_AutoPrivateKey: { args: ["ptr", "ptr", "i64"], returns: "ptr" },
  EVP_PKEY_get_base_id: { args: ["ptr"], returns: "i32" },
  EVP_PKEY_get_size: { args: ["ptr"], returns: "i32" },
  EVP_PKEY_free: { args: ["ptr"], returns: "void" },
  EVP_MD_CTX_new: { args: [], returns: "ptr" },
  EVP_MD_CTX_reset: { args: ["ptr"], returns: "i32" },
  EVP_MD_CTX_free: { args: ["ptr"], returns: "void" },
  EVP_DigestSignInit: { args: ["ptr", "ptr", "ptr", "ptr", "ptr"], returns: "i32" },
  EVP_DigestSign: { args: ["ptr", "ptr", "ptr", "ptr", "u64"], returns: "i32" },
  ERR_get_error: { args: [], returns: "u64" },
  ERR_clear_error: { args: [], returns: "void" },
} as const;

/** `EVP_PKEY_RSA` (NID_rsaEncryption). */
const EVP_PKEY_RSA = 6;

export type Pointer = number;
/** LIBCRYPTO_SYMBOLS as `dlopen` binds them. */
export interface LibcryptoBinding {
  OpenSSL_version(which: number): string;
  EVP_sha256(): Pointer | null;
  d2i_AutoPrivateKey(out: null, pp: BigUint64Array, length: number): Pointer | null;
  EVP_PKEY_get_base_id(pkey: Pointer): number;
  EVP_PKEY_get_size(pkey: Pointer): number;
  EVP_PKEY_free(pkey: Pointer): void;
  EVP_MD_CTX_new(): Pointer | null;
  EVP_MD_CTX_reset(ctx: Pointer): number;
  EVP_MD_CTX_free(ctx: Pointer): void;
  EVP_DigestSignInit(ctx: Pointer, pctx: null, md: Pointer | null, engine: null, pkey: Pointer): number;
  EVP_DigestSign(ctx: Pointer, sig: Uint8Array, siglen: BigUint64Array, tbs: Uint8Array, tbslen: number): number;
  ERR_get_error(): bigint | number;
  ERR_clear_error(): void;
}

interface Loaded {
  binding: LibcryptoBinding;
  ptr: (bytes: Uint8Array) => Pointer;
  sha256: Pointer;
  version: string;
}

/** Whether libcrypto can sign here; `version` is OpenSSL's own version line. */
export type LibcryptoStatus = { available: true; version: string } | { available: false; reason: string };

const loads = new Map<string, Promise<Loaded | Error>>();

async function open(name: string): Promise<Loaded | Error> {
  try {
    if (typeof Bun === "undefined") return new Error("not running on Bun");
    const ffi = await import("bun:ffi");
    const library = ffi.dlopen(name, LIBCRYPTO_SYMBOLS as unknown as Parameters<typeof ffi.dlopen>[1]);
    const binding = library.symbols as unknown as LibcryptoBinding;
    const sha256 = binding.EVP_sha256();
    if (!sha256) return new Error("EVP_sha256 returned null");
    return { binding, ptr: (bytes) => ffi.ptr(bytes) as Pointer, sha256, version: binding.OpenSSL_version(0) };
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

const load = (name: string) => {
  let pending = loads.get(name);
  if (pending === undefined) loads.set(name, (pending = open(name)));
  return pending;
};

/** Loads `name` (default libcrypto.so.3) once per process and says whether it can be used. Never throws. */
export async function loadLibcrypto(name = LIBCRYPTO_NAME): Promise<LibcryptoStatus> {
  const loaded = await load(name);
  return loaded instanceof Error ? { available: false, reason: loaded.message } : { available: true, version: loaded.version };
}

/** A libcrypto signer that also frees its native memory. */
export interface LibcryptoSigner extends RawSigner {
  /** Frees the key and context now; signing afterwards throws. Idempotent. */
  dispose(): void;
}

/** Frees native handles of signers that were dropped without `dispose`. */
const finalizer = new FinalizationRegistry<() => void>((free) => free());

function lastError(binding: LibcryptoBinding, what: string): Error {
  const code = binding.ERR_get_error();
  binding.ERR_clear_error();
  return new Error(`libcrypto ${what} failed (error 0x${code.toString(16)})`);
}

/**
 * An RS256 signer for an RSA private key given as PKCS#8 (or PKCS#1) DER. Throws if libcrypto
 * is unavailable or rejects the key. `der` is wiped once parsed.
 */
export async function libcryptoRsaSigner(der: Uint8Array, name = LIBCRYPTO_NAME): Promise<LibcryptoSigner> {
  const loaded = await load(name);
  if (loaded instanceof Error) throw new Error(`libcrypto is unavailable: ${loaded.message}`);
  const { binding, sha256 } = loaded;
  // d2i_* read through a pointer to a pointer and advance it.
  const cursor = new BigUint64Array([BigInt(loaded.ptr(der))]);
  const pkey = binding.d2i_AutoPrivateKey(null, cursor, der.byteLength);
  der.fill(0);
  if (!pkey) throw lastError(binding, "key parsing");
  if (binding.EVP_PKEY_get_base_id(pkey) !== EVP_PKEY_RSA) {
    binding.EVP_PKEY_free(pkey);
    throw new Error("libcrypto signer: the key is not an RSA key");
  }
  const ctx = binding.EVP_MD_CTX_new();
  if (!ctx) {
    binding.EVP_PKEY_free(pkey);
    throw lastError(binding, "EVP_MD_CTX_new");
  }
  const size = binding.EVP_PKEY_get_size(pkey);
  const out = new Uint8Array(size);
  const outLength = new BigUint64Array(1);
  let live = true;
  const free = () => {
    if (!live) return;
    live = false;
    binding.EVP_MD_CTX_free(ctx);
    binding.EVP_PKEY_free(pkey);
  };
  const signer: LibcryptoSigner = {
    kind: "libcrypto",
    sign(input) {
      if (!live) throw new Error("libcrypto signer used after dispose");
      binding.EVP_MD_CTX_reset(ctx);
      if (binding.EVP_DigestSignInit(ctx, null, sha256, null, pkey) !== 1) throw lastError(binding, "EVP_DigestSignInit");
      outLength[0] = BigInt(size);
      if (binding.EVP_DigestSign(ctx, out, outLength, input, input.byteLength) !== 1) throw lastError(binding, "EVP_DigestSign");
      return out.slice(0, Number(outLength[0]));
    },
    dispose() {
      finalizer.unregister(signer);
      free();
    },
  };
  finalizer.register(signer, free, signer);
  return signer;
}
