/**
 * core/client-jwks: what a client may register as public keys for private_key_jwt, and exactly
 * what is stored (public members only, a kid on every key).
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { base64url, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from "jose";
import { publicClientJwk, publicClientJwks } from "../../src/core/client-jwks.ts";
import { AppError } from "../../src/errors.ts";

/** The AppError message of a refused key set; fails when the set is accepted or the error differs. */
async function refusal(keys: unknown[]): Promise<string> {
  try {
    await publicClientJwks(keys);
  } catch (error) {
    if (error instanceof AppError && error.code === "invalid_request") return error.message;
    throw error;
  }
  throw new Error("expected the key set to be refused");
}

describe("client public keys", () => {
  const pub: Record<string, JWK> = {};
  const priv: Record<string, JWK> = {};
  beforeAll(async () => {
    for (const [name, alg, options] of [
      ["rsa", "RS256", {}],
      ["p256", "ES256", {}],
      ["p384", "ES384", {}],
      ["p521", "ES512", {}],
      ["ed25519", "EdDSA", {}],
    ] as const) {
      const pair = await generateKeyPair(alg, { extractable: true, ...options });
      pub[name] = await exportJWK(pair.publicKey);
      priv[name] = await exportJWK(pair.privateKey);
    }
  });

  test("accepts RSA 2048, EC P-256/P-384/P-521 and Ed25519; a missing kid becomes the RFC 7638 thumbprint", async () => {
    const stored = await publicClientJwks(Object.values(pub));
    expect(stored).toHaveLength(5);
    for (const [index, jwk] of Object.values(pub).entries()) {
      expect(stored[index]?.kid).toBe(await calculateJwkThumbprint(jwk, "sha256"));
    }
    expect(Object.keys(stored[0] as object)).toEqual(["kty", "kid", "n", "e"]);
    expect(Object.keys(stored[1] as object)).toEqual(["kty", "kid", "crv", "x", "y"]);
    expect(Object.keys(stored[4] as object)).toEqual(["kty", "kid", "crv", "x"]);
    expect(stored[4]).toEqual({ kty: "OKP", kid: stored[4]?.kid as string, crv: "Ed25519", x: pub.ed25519?.x as string });
  });

  test("keeps kid, use 'sig' and a fitting alg as given, and drops every other member", async () => {
    const stored = await publicClientJwk({ ...pub.p256, kid: "billing 2026-01", use: "sig", alg: "ES256", key_ops: ["verify"], ext: true, x5c: ["MIIB"] }, 0);
    expect(stored).toEqual({ kty: "EC", kid: "billing 2026-01", use: "sig", alg: "ES256", crv: "P-256", x: pub.p256?.x as string, y: pub.p256?.y as string });
    expect((await publicClientJwk({ ...pub.rsa, alg: "PS512" }, 0)).alg).toBe("PS512");
  });

  for (const [name, member] of [
    ["an RSA key's d", "d"],
    ["an RSA key's p", "p"],
    ["an RSA key's q", "q"],
    ["an RSA key's dp", "dp"],
    ["an RSA key's dq", "dq"],
    ["an RSA key's qi", "qi"],
  ] as const) {
    test(`refuses ${name}, naming the member and the key`, async () => {
      expect(await refusal([pub.p256, { ...pub.rsa, [member]: "AQAB" }])).toBe(`keys[1]: private key member '${member}' must not be sent; register the public key only.`);
    });
  }

  test("refuses whole private keys of every type, naming their private members", async () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" });
    expect(await refusal([rsa])).toBe("keys[0]: private key members 'd', 'p', 'q', 'dp', 'dq', 'qi' must not be sent; register the public key only.");
    expect(await refusal([priv.p256])).toContain("keys[0]: private key member 'd'");
    expect(await refusal([priv.ed25519])).toContain("keys[0]: private key member 'd'");
  });

  test("refuses symmetric keys, with or without k", async () => {
    expect(await refusal([{ kty: "oct", k: "c2VjcmV0" }])).toBe("keys[0]: symmetric keys (kty 'oct') are not accepted; register a public RSA, EC or OKP key.");
    expect(await refusal([{ kty: "oct" }])).toContain("symmetric keys");
    expect(await refusal([{ ...pub.p256, k: "c2VjcmV0" }])).toContain("private key member 'k'");
  });

  test("refuses RSA keys under 2048 or over 8192 bits, and exponents no verifier takes", async () => {
    const small = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" });
    expect(await refusal([small])).toBe("keys[0]: RSA keys must have a modulus of 2048 to 8192 bits.");
    const almost = generateKeyPairSync("rsa", { modulusLength: 2040 }).publicKey.export({ format: "jwk" });
    expect(await refusal([almost])).toContain("2048 to 8192 bits");
    // A modulus past 8192 bits (each try of an assertion against it costs a millisecond of CPU): its size is what counts.
    const huge = { kty: "RSA", n: base64url.encode(new Uint8Array(1025).fill(0xc5)), e: "AQAB" };
    expect(await refusal([huge])).toBe("keys[0]: RSA keys must have a modulus of 2048 to 8192 bits.");
    const rsa = pub.rsa as { kty: string; n: string; e: string };
    // Each value in its shortest big-endian form (a leading zero byte is refused on its own, below).
    const minimal = (v: number) => base64url.encode(Buffer.from(v.toString(16).padStart(v.toString(16).length + (v.toString(16).length % 2), "0"), "hex"));
    for (const e of [1, 2, 65536, 2 ** 32 + 1].map(minimal)) {
      expect(await refusal([{ ...rsa, e }])).toBe("keys[0]: the RSA exponent 'e' must be odd, from 3 to 2^32 (65537, AQAB, as a rule).");
    }
    for (const e of ["Aw", "AQAB"]) expect(await publicClientJwks([{ ...rsa, e }])).toHaveLength(1);
  });

  test("refuses other key types and curves", async () => {
    expect(await refusal([{ kty: "AKP", alg: "ML-DSA-44", pub: "AAAA" }])).toBe("keys[0]: kty must be 'RSA', 'EC' or 'OKP'.");
    expect(await refusal([{ n: "AQAB" }])).toContain("kty must be");
    expect(await refusal([{ ...pub.p256, crv: "secp256k1" }])).toBe("keys[0]: crv must be one of 'P-256', 'P-384', 'P-521' for kty 'EC'.");
    expect(await refusal([{ kty: "OKP", crv: "X25519", x: pub.ed25519?.x }])).toBe("keys[0]: crv must be one of 'Ed25519' for kty 'OKP'.");
  });

  test("refuses missing or malformed key members, and points that are not on the curve", async () => {
    expect(await refusal([{ kty: "EC", crv: "P-256", x: pub.p256?.x }])).toBe("keys[0]: 'y' is required for kty 'EC' (a base64url string).");
    expect(await refusal([{ kty: "RSA", n: pub.rsa?.n }])).toContain("'e' is required");
    expect(await refusal([{ ...pub.p256, x: "not base64url!" }])).toContain("'x' is required");
    expect(await refusal([{ ...pub.p256, y: pub.p256?.x }])).toBe("keys[0]: is not a valid EC P-256 public key.");
    expect(await refusal([{ ...pub.p256, crv: "P-384" }])).toBe("keys[0]: 'x' must be 48 bytes for P-384, leading zeros included.");
    expect(await refusal([{ ...pub.ed25519, x: "AAAA" }])).toBe("keys[0]: 'x' must be 32 bytes for Ed25519, leading zeros included.");
  });

  test("refuses what the runtimes parse but nothing verifies against: an even RSA modulus, 32 bytes that are no Ed25519 point", async () => {
    const rsa = pub.rsa as { kty: string; n: string; e: string };
    const n = Buffer.from(base64url.decode(rsa.n));
    n[n.length - 1] = (n[n.length - 1] as number) ^ 1;
    expect(await refusal([{ ...rsa, n: base64url.encode(n) }])).toBe("keys[0]: is not a valid RSA public key.");
    // y = 2, 7 and 8 give no square x² = (y² - 1) / (d·y² + 1); y = p + 2 is past the field.
    const y = (value: bigint) => base64url.encode(Buffer.from(value.toString(16).padStart(64, "0"), "hex").reverse());
    for (const value of [2n, 7n, 8n, 2n ** 255n - 19n + 2n]) {
      expect({ value, refusal: await refusal([{ kty: "OKP", crv: "Ed25519", x: y(value) }]) }).toEqual({ value, refusal: "keys[0]: is not a valid OKP Ed25519 public key." });
    }
    // Real keys, both signs of x among them, are points.
    const signs = new Set<number>();
    for (let i = 0; i < 64; i++) {
      const x = generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }).x as string;
      signs.add((base64url.decode(x)[31] as number) >> 7);
      expect(await publicClientJwks([{ kty: "OKP", crv: "Ed25519", x }])).toHaveLength(1);
    }
    expect([...signs].sort()).toEqual([0, 1]);
  });

  test("refuses encodings other than the one RFC 7518 and RFC 8037 allow: the kid is the thumbprint its holder computes, and one key cannot enter a set twice", async () => {
    const rsa = pub.rsa as { kty: string; n: string; e: string };
    const padded = (value: string) => base64url.encode(Buffer.concat([Buffer.from([0]), Buffer.from(base64url.decode(value))]));
    expect(await refusal([{ ...rsa, n: padded(rsa.n) }])).toBe("keys[0]: 'n' must not start with a zero byte (RFC 7518 §6.3.1).");
    expect(await refusal([{ ...rsa, e: "AAEAAQ" }])).toBe("keys[0]: 'e' must not start with a zero byte (RFC 7518 §6.3.1).");
    expect(await refusal([{ ...rsa, e: "AA" }])).toContain("'e' must not start with a zero byte");
    const p256 = pub.p256 as { x: string; y: string };
    expect(await refusal([{ ...p256, x: padded(p256.x) }])).toBe("keys[0]: 'x' must be 32 bytes for P-256, leading zeros included.");
    expect(await refusal([{ ...p256, y: base64url.encode(base64url.decode(p256.y).subarray(1)) }])).toBe("keys[0]: 'y' must be 32 bytes for P-256, leading zeros included.");
    // The canonical form is stored, with its thumbprint as kid.
    const [stored] = await publicClientJwks([rsa]);
    expect(stored?.kid).toBe(await calculateJwkThumbprint(rsa as JWK, "sha256"));
  });

  test("refuses Ed25519 points of small order, against which a forged signature verifies", async () => {
    const point = (hex: string) => base64url.encode(Buffer.from(hex, "hex"));
    const smallOrder = [
      "0000000000000000000000000000000000000000000000000000000000000000",
      "0100000000000000000000000000000000000000000000000000000000000000",
      "0100000000000000000000000000000000000000000000000000000000000080",
      "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
      "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
      "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
      "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
      "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ];
    for (const hex of smallOrder) {
      expect({ hex, refusal: await refusal([{ kty: "OKP", crv: "Ed25519", x: point(hex) }]) }).toEqual({
        hex,
        refusal: "keys[0]: is a point of small order, which verifies forged signatures; register a real Ed25519 public key.",
      });
    }
    // The forgery such a key lets through: R the identity point, S zero, for any message.
    const identity = await importJWK({ kty: "OKP", crv: "Ed25519", x: point(smallOrder[1] as string) }, "EdDSA");
    const forged = new Uint8Array(64);
    forged[0] = 1;
    expect(await crypto.subtle.verify("Ed25519", identity as CryptoKey, forged, new TextEncoder().encode("any message"))).toBe(true);
  });

  test("refuses a use other than sig, an alg that does not fit the key, and a malformed kid", async () => {
    expect(await refusal([{ ...pub.p256, use: "enc" }])).toBe("keys[0]: use must be 'sig' (or left out): these keys verify client assertions.");
    expect(await refusal([{ ...pub.p256, alg: "ES384" }])).toBe("keys[0]: alg must be one of ES256 for this key (or left out).");
    expect(await refusal([{ ...pub.rsa, alg: "HS256" }])).toBe("keys[0]: alg must be one of RS256, RS384, RS512, PS256, PS384, PS512 for this key (or left out).");
    expect(await refusal([{ ...pub.ed25519, alg: "none" }])).toContain("alg must be one of EdDSA");
    expect(await refusal([{ ...pub.p256, kid: "" }])).toContain("kid must be a string of 1 to 200 characters");
    expect(await refusal([{ ...pub.p256, kid: 7 }])).toContain("kid must be a string");
    expect(await refusal([{ ...pub.p256, kid: "a\nb" }])).toContain("kid must be a string");
    // Characters are code points, as for every text of the API.
    expect((await publicClientJwks([{ ...pub.p256, kid: "🔑".repeat(200) }]))[0]?.kid).toBe("🔑".repeat(200));
    expect(await refusal([{ ...pub.p256, kid: "🔑".repeat(201) }])).toContain("kid must be a string of 1 to 200 characters");
  });

  test("refuses duplicate kids, given or computed, and sets of 0 or more than 5 keys", async () => {
    expect(await refusal([{ ...pub.p256, kid: "a" }, { ...pub.p384, kid: "a" }])).toBe("keys[1]: kid 'a' is already used by keys[0]; kids must be unique in the set.");
    expect(await refusal([pub.p256, pub.rsa, pub.p256])).toContain("keys[2]: kid");
    expect(await refusal([])).toBe("keys must hold 1 to 5 public keys.");
    expect(await refusal(Array.from({ length: 6 }, (_, i) => ({ ...pub.p256, kid: `k${i}` })))).toBe("keys must hold 1 to 5 public keys.");
    expect(await refusal(["not a key"])).toBe("keys[0]: must be a JWK object.");
  });
});
