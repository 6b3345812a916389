/**
 * @module keys/key-ring
 * The in-memory view of one project's key set: the unsealed current key ready to sign, and the
 * public JWKS document with its ETag, computed once per key-set version. Discovery answers and
 * token signing read only this; no store access per request. The signing code itself comes from
 * signers/factory.ts (libcrypto for RS256 when it works, else the runtime's own).
 *
 * The public part is made at once; the signer (the current key unsealed and parsed) when it is
 * first needed, or at once by `build`. A ring rebuilt because another process changed the set
 * (`KeyRing.of`) makes its signer at its first signature: a process catching up with many
 * rotations made elsewhere reads and publishes them without unsealing each key before its next
 * answer (an RS256 signer takes a few milliseconds to make).
 */
import { hash } from "node:crypto";
import { base64url, type JWK } from "jose";
import type { SigningAlg } from "../config/schema.ts";
import { atEndOfTurn } from "../runtime/end-of-turn.ts";
import type { KeySetRecord } from "../store/store.ts";
import { byLifecycleOrder, keysByState } from "./lifecycle.ts";
import { privateKeyAad, unseal } from "./sealing.ts";
import type { SignerFactory } from "./signers/factory.ts";
import type { RawSigner, SignerKind } from "./signers/signer.ts";

/** The JWS `typ` values an access token may carry. */
export type TokenTyp = "at+jwt" | "JWT";

const encoder = new TextEncoder();
const b64json = (value: unknown) => base64url.encode(encoder.encode(JSON.stringify(value)));

/** A narrow signer: what token issuing needs, so an external KMS could stand in later. */
export interface Signer {
  readonly kid: string;
  readonly alg: SigningAlg;
  /** Signs `claims` as a compact JWS with header {alg, kid, typ}. */
  sign(typ: TokenTyp, claims: Record<string, unknown>): Promise<string>;
}

export class KeyRing implements Signer {
  readonly version: number;
  readonly kid: string;
  readonly alg: SigningAlg;
  /** The JWKS body, serialized once. */
  readonly jwksBody: string;
  /** Strong ETag of `jwksBody`. */
  readonly jwksEtag: string;
  /** Algorithms of every published key. */
  readonly algs: readonly SigningAlg[];
  /** The signer, once made. */
  #signer: RawSigner | undefined;
  /** Makes the signer; the one making it now, shared by every signature that waits for it. */
  #make: () => Promise<RawSigner>;
  #making: Promise<RawSigner> | undefined;
  #headers: Readonly<Record<TokenTyp, string>>;

  private constructor(set: KeySetRecord, make: () => Promise<RawSigner>) {
    const { current } = keysByState(set);
    this.version = set.version;
    this.kid = current.kid;
    this.alg = current.alg;
    this.#make = make;
    const keys = [...set.keys].sort(byLifecycleOrder).map((k) => k.publicJwk);
    this.jwksBody = JSON.stringify({ keys });
    // Synchronous: an asynchronous digest's round trip costs more than hashing a JWKS (a start-up builds one ring per project).
    this.jwksEtag = `"${base64url.encode(hash("sha256", this.jwksBody, "buffer").subarray(0, 16))}"`;
    this.algs = [...new Set(set.keys.map((k) => k.alg))];
    // Header segments depend only on the key, so they are encoded once.
    this.#headers = {
      "at+jwt": b64json({ alg: current.alg, kid: current.kid, typ: "at+jwt" }),
      JWT: b64json({ alg: current.alg, kid: current.kid, typ: "JWT" }),
    };
  }

  /** Where this ring's signatures are computed; undefined until its signer is made. */
  get signerKind(): SignerKind | undefined {
    return this.#signer?.kind;
  }

  /**
   * The ring of `set` with its JWKS prepared; the current key is unsealed and its signer made
   * with `signers` at the first signature (or `ready`). A failure there fails that signature, and
   * the next one tries again.
   */
  static of(set: KeySetRecord, masterKey: CryptoKey, signers: SignerFactory): KeyRing {
    const { current } = keysByState(set);
    return new KeyRing(set, async () => {
      const sealed = current.sealedPrivateJwk;
      if (sealed === undefined) throw new Error(`the current signing key ${current.kid} of project ${set.projectId} has no private half`);
      const privateJwk = JSON.parse(await unseal(masterKey, sealed, privateKeyAad(set.projectId, current.kid))) as JWK;
      return signers.create(current.alg, privateJwk);
    });
  }

  /**
   * `of`, with the signer made before it resolves: throws if the current key cannot be unsealed
   * (a wrong master key).
   */
  static async build(set: KeySetRecord, masterKey: CryptoKey, signers: SignerFactory): Promise<KeyRing> {
    const ring = KeyRing.of(set, masterKey, signers);
    await ring.ready();
    return ring;
  }

  /** The signer, made now if it is not yet. */
  ready(): Promise<RawSigner> {
    if (this.#making !== undefined) return this.#making;
    const making = this.#make().then(
      (signer) => (this.#signer = signer),
      (error: unknown) => {
        this.#making = undefined;
        throw error;
      },
    );
    this.#making = making;
    return making;
  }

  async sign(typ: TokenTyp, claims: Record<string, unknown>): Promise<string> {
    const signer = this.#signer ?? (await this.ready());
    const input = `${this.#headers[typ]}.${b64json(claims)}`;
    // Signatures asked for in one turn of the loop are made together at its end (runtime/end-of-turn.ts).
    const bytes = encoder.encode(input);
    const signature = await atEndOfTurn(() => signer.sign(bytes));
    return `${input}.${base64url.encode(signature)}`;
  }
}
