/**
 * KeyRing: the JWKS is ready as soon as the ring is made; the signer, made from the sealed
 * current key, is made once (at `build`, or at the first signature of a ring from `of`), shared
 * by the signatures that wait for it, and made again after a failure.
 */
import { describe, expect, test } from "bun:test";
import type { JWK } from "jose";
import { createLocalJWKSet, jwtVerify } from "jose";
import type { SigningAlg } from "../../src/config/schema.ts";
import { generateSigningKey } from "../../src/keys/generate.ts";
import { KeyRing } from "../../src/keys/key-ring.ts";
import { initialKeySet } from "../../src/keys/lifecycle.ts";
import { importMasterKey } from "../../src/keys/sealing.ts";
import { SignerFactory } from "../../src/keys/signers/factory.ts";
import type { RawSigner } from "../../src/keys/signers/signer.ts";
import type { KeySetRecord } from "../../src/store/store.ts";

const masterKey = await importMasterKey(new Uint8Array(32).fill(7));

async function keySet(alg: SigningAlg = "ES256"): Promise<KeySetRecord> {
  const [current, next] = await Promise.all([generateSigningKey("p1", alg, masterKey, 1_000, "current"), generateSigningKey("p1", alg, masterKey, 1_000, "next")]);
  return initialKeySet("p1", current, next, 1_000);
}

/** A factory that counts the signers it makes, failing the first `failures` of them. */
function countingFactory(failures = 0): { factory: SignerFactory; made: () => number } {
  const real = new SignerFactory({ mode: "builtin" });
  let calls = 0;
  const factory = {
    create: (alg: SigningAlg, jwk: JWK): Promise<RawSigner> => {
      calls++;
      return calls <= failures ? Promise.reject(new Error("not this time")) : real.create(alg, jwk);
    },
  } as unknown as SignerFactory;
  return { factory, made: () => calls };
}

describe("KeyRing", () => {
  test("of: the JWKS and its ETag at once, the signer at the first signature, made once for signatures that wait together", async () => {
    const set = await keySet();
    const { factory, made } = countingFactory();
    const ring = KeyRing.of(set, masterKey, factory);
    expect(JSON.parse(ring.jwksBody).keys.map((k: { kid: string }) => k.kid)).toEqual(set.keys.map((k) => k.kid));
    expect(ring.jwksEtag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    expect(ring.signerKind).toBeUndefined();
    expect(made()).toBe(0);
    const tokens = await Promise.all([1, 2, 3].map((n) => ring.sign("JWT", { n })));
    expect(made()).toBe(1);
    expect(ring.signerKind).toBe("node-sync");
    for (const token of tokens) {
      const { protectedHeader } = await jwtVerify(token, createLocalJWKSet(JSON.parse(ring.jwksBody)));
      expect(protectedHeader).toEqual({ alg: "ES256", kid: ring.kid, typ: "JWT" });
    }
    await ring.sign("JWT", { n: 4 });
    expect(made()).toBe(1);
  });

  test("build makes the signer before it resolves, and the JWKS is the same as of's", async () => {
    const set = await keySet("EdDSA");
    const { factory, made } = countingFactory();
    const ring = await KeyRing.build(set, masterKey, factory);
    expect(made()).toBe(1);
    expect(ring.signerKind).toBe("node-sync");
    expect(ring.jwksEtag).toBe(KeyRing.of(set, masterKey, factory).jwksEtag);
  });

  test("a signer that cannot be made fails the signatures waiting for it; the next signature makes it again", async () => {
    const set = await keySet();
    const { factory, made } = countingFactory(1);
    const ring = KeyRing.of(set, masterKey, factory);
    const failed = await Promise.allSettled([ring.sign("JWT", { n: 1 }), ring.sign("JWT", { n: 2 })]);
    expect(failed.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(made()).toBe(1);
    expect(ring.signerKind).toBeUndefined();
    const token = await ring.sign("JWT", { n: 3 });
    expect(made()).toBe(2);
    await jwtVerify(token, createLocalJWKSet(JSON.parse(ring.jwksBody)));
  });

  test("a wrong master key: build throws; of serves the JWKS, and its signatures fail", async () => {
    const set = await keySet();
    const wrong = await importMasterKey(new Uint8Array(32).fill(8));
    const factory = new SignerFactory({ mode: "builtin" });
    await expect(KeyRing.build(set, wrong, factory)).rejects.toThrow();
    const ring = KeyRing.of(set, wrong, factory);
    expect(ring.jwksBody).toBe(KeyRing.of(set, masterKey, factory).jwksBody);
    await expect(ring.sign("JWT", { n: 1 })).rejects.toThrow();
    await expect(ring.sign("JWT", { n: 2 })).rejects.toThrow();
  });
});
