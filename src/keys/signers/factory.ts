/**
 * @module keys/signers/factory
 * Picks the signer of each algorithm, once per process. The choice is the fastest per CPU second
 * measured by scripts/bench-signers.ts: node:crypto's synchronous `sign` among the runtime's own
 * signers (no thread hop per signature), and for RS256 the system's libcrypto, about twice as
 * fast again, when it loads and signs byte-identically to the built-in signer. Mode `builtin`
 * (TOKENMINT_SIGNER) keeps the runtime's own signer for every algorithm.
 *
 * Loading libcrypto, parsing a key into it and the check signature take a starting process about
 * 15 ms. A server defers them (`deferLibcrypto`): its RS256 keys sign with the built-in signer,
 * which gives the very same bytes, until it calls `handOver` once it listens.
 */
import { createPublicKey, type KeyObject, verify } from "node:crypto";
import type { JWK } from "jose";
import { SIGNING_ALGS, type SignerMode, type SigningAlg } from "../../config/schema.ts";
import type { Logger } from "../../logging/logger.ts";
import { nodePrivateKey, nodeSyncSigner } from "./builtin.ts";
import { LIBCRYPTO_NAME, libcryptoRsaSigner, loadLibcrypto } from "./libcrypto.ts";
import type { RawSigner, SignerKind } from "./signer.ts";

/** The runtime's own signer per algorithm: node:crypto `sign`, synchronous, wins each one. */
export const BUILTIN_SIGNER: Readonly<Record<SigningAlg, SignerKind>> = { RS256: "node-sync", ES256: "node-sync", EdDSA: "node-sync" };

/** A fixed input of the check that libcrypto and the built-in signer agree. */
const CHECK_INPUT = new TextEncoder().encode("eyJhbGciOiJSUzI1NiJ9.eyJjaGVjayI6InRva2VubWludCJ9");

export interface SignerFactoryOptions {
  mode: SignerMode;
  /** Told when libcrypto cannot be used and the built-in signer takes over. */
  logger?: Logger;
  /** The library to load for RS256 (tests point it at a missing one). */
  libcryptoName?: string;
  /**
   * RS256 signers made before `handOver` is called sign with the built-in signer until then; those
   * made after it use libcrypto at once. Without it, every RS256 signer uses libcrypto at once.
   */
  deferLibcrypto?: boolean;
}

/** What signs each algorithm in this process, and why libcrypto is not used if it is not. */
export interface SignerPlan {
  signers: Record<SigningAlg, SignerKind>;
  /** OpenSSL's version line when libcrypto signs RS256. */
  libcrypto?: string;
  /** Why RS256 uses the built-in signer in mode `auto`. */
  libcryptoUnavailable?: string;
}

/** An RS256 signer that signs with the built-in signer until libcrypto's takes over. */
class HandOverSigner implements RawSigner {
  #signer: RawSigner;
  /** The key, kept until the hand-over, which exports it to libcrypto. */
  #key: KeyObject | undefined;

  constructor(builtin: RawSigner, key: KeyObject) {
    this.#signer = builtin;
    this.#key = key;
  }

  get kind(): SignerKind {
    return this.#signer.kind;
  }

  sign(input: Uint8Array): Uint8Array | Promise<Uint8Array> {
    return this.#signer.sign(input);
  }

  /** Lets `make` (given the built-in signer and the key) make the signer from now on; once. */
  async handOver(make: (builtin: RawSigner, key: KeyObject) => Promise<RawSigner>): Promise<void> {
    const key = this.#key;
    if (key === undefined) return;
    this.#key = undefined;
    this.#signer = await make(this.#signer, key);
  }
}

export class SignerFactory {
  readonly #o: SignerFactoryOptions;
  /** Set once libcrypto failed for a key: no later key tries it again. */
  #libcryptoFailure: string | undefined;
  /** RS256 signers waiting for `handOver`; undefined once it ran (or when nothing is deferred). */
  #deferred: HandOverSigner[] | undefined;

  constructor(options: SignerFactoryOptions) {
    this.#o = options;
    if (options.deferLibcrypto === true) this.#deferred = [];
  }

  /** Which signer each algorithm uses; loads libcrypto (once per process) to find out. */
  async plan(): Promise<SignerPlan> {
    const signers = { ...BUILTIN_SIGNER };
    if (this.#o.mode === "builtin") return { signers };
    if (this.#libcryptoFailure !== undefined) return { signers, libcryptoUnavailable: this.#libcryptoFailure };
    const status = await loadLibcrypto(this.#o.libcryptoName ?? LIBCRYPTO_NAME);
    if (!status.available) return { signers, libcryptoUnavailable: status.reason };
    return { signers: { ...signers, RS256: "libcrypto" }, libcrypto: status.version };
  }

  /** A signer for `privateJwk`. Never fails for want of libcrypto: the built-in signer stands in. */
  async create(alg: SigningAlg, privateJwk: JWK): Promise<RawSigner> {
    const key = nodePrivateKey(privateJwk);
    const builtin = nodeSyncSigner(alg, key);
    if (alg !== "RS256" || this.#o.mode === "builtin" || this.#libcryptoFailure !== undefined) return builtin;
    if (this.#deferred !== undefined) {
      const signer = new HandOverSigner(builtin, key);
      this.#deferred.push(signer);
      return signer;
    }
    return this.#libcryptoOr(builtin, key);
  }

  /**
   * Hands every deferred RS256 signer over to libcrypto (each keeps the built-in signer if
   * libcrypto cannot sign); signers made from now on use libcrypto at once. Never fails.
   * Between two keys it lets the event loop turn: each costs about a millisecond of parsing and
   * check signatures, and a server with many RS256 projects answers requests meanwhile.
   */
  async handOver(): Promise<void> {
    const deferred = this.#deferred ?? [];
    this.#deferred = undefined;
    for (const [i, signer] of deferred.entries()) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 0));
      await signer.handOver((builtin, key) => this.#libcryptoOr(builtin, key));
    }
  }

  /** A libcrypto signer for `key`, or `builtin` (its built-in signer) when libcrypto cannot sign (logged once). */
  async #libcryptoOr(builtin: RawSigner, key: KeyObject): Promise<RawSigner> {
    if (this.#libcryptoFailure !== undefined) return builtin;
    const name = this.#o.libcryptoName ?? LIBCRYPTO_NAME;
    if (!(await loadLibcrypto(name)).available) return builtin;
    try {
      const der = new Uint8Array(key.export({ type: "pkcs8", format: "der" }));
      const signer = await libcryptoRsaSigner(der, name);
      // It must give the very bytes the built-in signer gives, or libcrypto is not used. An
      // RSASSA-PKCS1-v1_5 signature that verifies is the only one there is for its key and input
      // (RSA is a permutation), so verifying it tells, at about a thirtieth of the cost of making
      // the built-in signature to compare.
      if (!verify("sha256", CHECK_INPUT, createPublicKey(key), await signer.sign(CHECK_INPUT))) {
        signer.dispose();
        throw new Error("its signature differs from the built-in signer's");
      }
      return signer;
    } catch (error) {
      this.#libcryptoFailure = (error as Error).message;
      this.#o.logger?.warn("libcrypto cannot sign; RS256 uses the built-in signer", { reason: this.#libcryptoFailure });
      return builtin;
    }
  }
}

/**
 * Logs the "signers" line: one field per algorithm, plus OpenSSL's version or why it is not used.
 * Finding out loads libcrypto.
 */
export async function logSigners(logger: Logger, signers: SignerFactory): Promise<void> {
  const plan = await signers.plan();
  const fields: Record<string, string | undefined> = {};
  for (const alg of SIGNING_ALGS) fields[alg] = plan.signers[alg];
  logger.info("signers", { ...fields, libcrypto: plan.libcrypto, libcryptoUnavailable: plan.libcryptoUnavailable });
}
