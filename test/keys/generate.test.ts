import { describe, expect, test } from "bun:test";
import { calculateJwkThumbprint, compactVerify, importJWK, type JWK, CompactSign } from "jose";
import type { SigningAlg } from "../../src/config/schema.ts";
import { generateSigningKey, publicJwkOf } from "../../src/keys/generate.ts";
import { importMasterKey, privateKeyAad, unseal } from "../../src/keys/sealing.ts";

const T0 = Date.UTC(2026, 0, 1);
const PROJECT = "0190f0c0-0000-7000-8000-000000000001";
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "k"];
const masterKey = await importMasterKey(new Uint8Array(32).fill(9));

const CASES: { alg: SigningAlg; members: string[]; kty: string; crv?: string }[] = [
  { alg: "RS256", kty: "RSA", members: ["alg", "e", "kid", "kty", "n", "use"] },
  { alg: "ES256", kty: "EC", crv: "P-256", members: ["alg", "crv", "kid", "kty", "use", "x", "y"] },
  { alg: "EdDSA", kty: "OKP", crv: "Ed25519", members: ["alg", "crv", "kid", "kty", "use", "x"] },
];

describe.each(CASES)("generateSigningKey $alg", ({ alg, kty, crv, members }) => {
  const keyPromise = generateSigningKey(PROJECT, alg, masterKey, T0, "next");

  test("kid is the RFC 7638 SHA-256 thumbprint of the public JWK", async () => {
    const key = await keyPromise;
    expect(key.kid).toBe(await calculateJwkThumbprint(key.publicJwk as JWK, "sha256"));
    expect(key.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  test("publicJwk holds exactly the public members plus kid, alg, use", async () => {
    const key = await keyPromise;
    expect(Object.keys(key.publicJwk).sort()).toEqual(members);
    for (const name of PRIVATE_MEMBERS) expect(key.publicJwk).not.toHaveProperty(name);
    expect(key.publicJwk).toMatchObject({ kty, kid: key.kid, alg, use: "sig", ...(crv ? { crv } : {}) });
    if (kty === "RSA") expect(key.publicJwk.e).toBe("AQAB");
  });

  test("record metadata: alg, state, createdAt, no activatesAt for a next key", async () => {
    const key = await keyPromise;
    expect(key.alg).toBe(alg);
    expect(key.state).toBe("next");
    expect(key.createdAt).toBe(T0);
    expect(key).not.toHaveProperty("activatesAt");
    expect(Object.keys(key).sort()).toEqual(["alg", "createdAt", "kid", "publicJwk", "sealedPrivateJwk", "state"]);
  });

  test("the sealed private JWK unseals only for its project and kid, and never shows d in clear", async () => {
    const key = await keyPromise;
    const sealed = key.sealedPrivateJwk as string;
    const privateJwk = JSON.parse(await unseal(masterKey, sealed, privateKeyAad(PROJECT, key.kid))) as JWK;
    expect(typeof privateJwk.d).toBe("string");
    expect((privateJwk.d as string).length).toBeGreaterThan(20);
    expect(sealed).not.toContain(privateJwk.d as string);
    expect(JSON.stringify(key)).not.toContain(privateJwk.d as string);
    await expect(unseal(masterKey, sealed, privateKeyAad("other-project", key.kid))).rejects.toThrow();
    // The sealed key is the private half of the published public key.
    const jws = await new CompactSign(new TextEncoder().encode("payload")).setProtectedHeader({ alg }).sign(await importJWK(privateJwk, alg));
    const { payload } = await compactVerify(jws, await importJWK(key.publicJwk as JWK, alg));
    expect(new TextDecoder().decode(payload)).toBe("payload");
  });
});

describe("generateSigningKey", () => {
  test("a current key activates at creation; two keys never share a kid", async () => {
    const a = await generateSigningKey(PROJECT, "ES256", masterKey, T0 + 7, "current");
    const b = await generateSigningKey(PROJECT, "ES256", masterKey, T0 + 7, "current");
    expect(a.activatesAt).toBe(T0 + 7);
    expect(a.state).toBe("current");
    expect(a.kid).not.toBe(b.kid);
  });

  test("RSA keys are made off the event loop: the process goes on answering requests meanwhile", async () => {
    // A key made on the loop lets no request through until it is done (an RSA-2048 key takes tens of ms).
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
    try {
      let done = false;
      const generating = Promise.all([1, 2, 3].map(() => generateSigningKey(PROJECT, "RS256", masterKey, T0, "next"))).finally(() => {
        done = true;
      });
      let answered = 0;
      while (!done) {
        expect(await (await fetch(server.url)).text()).toBe("ok");
        answered++;
      }
      expect((await generating).map((key) => key.alg)).toEqual(["RS256", "RS256", "RS256"]);
      expect(answered).toBeGreaterThan(10);
    } finally {
      server.stop(true);
    }
  });
});

describe("publicJwkOf", () => {
  test("copies only public members, even from a private JWK", () => {
    const privateRsa = { kty: "RSA", n: "nn", e: "AQAB", d: "dd", p: "pp", q: "qq", dp: "a", dq: "b", qi: "c", ext: true, key_ops: ["sign"] } as JWK;
    expect(publicJwkOf(privateRsa, "K", "RS256")).toEqual({ kty: "RSA", n: "nn", e: "AQAB", kid: "K", alg: "RS256", use: "sig" });
    const privateEc = { kty: "EC", crv: "P-256", x: "xx", y: "yy", d: "dd" } as JWK;
    expect(publicJwkOf(privateEc, "K", "ES256")).toEqual({ kty: "EC", crv: "P-256", x: "xx", y: "yy", kid: "K", alg: "ES256", use: "sig" });
  });

  test("rejects symmetric keys and missing members", () => {
    expect(() => publicJwkOf({ kty: "oct", k: "secret" }, "K", "ES256")).toThrow("unsupported key type oct");
    expect(() => publicJwkOf({ kty: "EC", crv: "P-256", x: "xx" }, "K", "ES256")).toThrow("public key member y is missing");
  });
});
