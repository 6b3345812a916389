/**
 * @module keys/key-ring
 * The in-memory view of one project's key set: the unsealed current key ready to sign, and the
 * public JWKS document with its ETag, computed once per key-set version. Discovery answers and
 * token signing read only this; no store access per request. The signing code itself comes from
 * signers/factory.ts (libcrypto for RS256 when it works, else the runtime's own).
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
  #signer: RawSigner;
  #headers: Readonly<Record<TokenTyp, string>>;

  private constructor(set: KeySetRecord, signer: RawSigner, jwksBody: string, jwksEtag: string) {
    const { current } = keysByState(set);
    this.version = set.version;
    this.kid = current.kid;
    this.alg = current.alg;
    this.#signer = signer;
    this.jwksBody = jwksBody;
    this.jwksEtag = jwksEtag;
    this.algs = [...new Set(set.keys.map((k) => k.alg))];
    // Header segments depend only on the key, so they are encoded once.
    this.#headers = {
      "at+jwt": b64json({ alg: current.alg, kid: current.kid, typ: "at+jwt" }),
      JWT: b64json({ alg: current.alg, kid: current.kid, typ: "JWT" }),
    };
  }

  /** Where this ring's signatures are computed. */
  get signerKind(): SignerKind {
    return this.#signer.kind;
  }

  /**
   * Unseals the current key of `set`, makes its signer with `signers` and prepares the JWKS.
   * Throws if the master key is wrong.
   */
  static async build(set: KeySetRecord, masterKey: CryptoKey, signers: SignerFactory): Promise<KeyRing> {
    const { current } = keysByState(set);
    const privateJwk = JSON.parse(await unseal(masterKey, current.sealedPrivateJwk, privateKeyAad(set.projectId, current.kid))) as JWK;
    const signer = await signers.create(current.alg, privateJwk);
    const keys = [...set.keys].sort(byLifecycleOrder).map((k) => k.publicJwk);
    const jwksBody = JSON.stringify({ keys });
    // Synchronous: an asynchronous digest's round trip costs more than hashing a JWKS (a start-up builds one ring per project).
    const digest = hash("sha256", jwksBody, "buffer");
    return new KeyRing(set, signer, jwksBody, `"${base64url.encode(digest.subarray(0, 16))}"`);
  }

  async sign(typ: TokenTyp, claims: Record<string, unknown>): Promise<string> {
    const input = `${this.#headers[typ]}.${b64json(claims)}`;
    // Signatures asked for in one turn of the loop are made together at its end (runtime/end-of-turn.ts).
    const bytes = encoder.encode(input);
    const signature = await atEndOfTurn(() => this.#signer.sign(bytes));
    return `${input}.${base64url.encode(signature)}`;
  }
}
