/**
 * The libcrypto ES256 and EdDSA signers of scripts/bench-signers.ts: what the benchmark times
 * must be real signatures, in the JWS form.
 */
import { describe, expect, test } from "bun:test";
import { generateKeyPairSync, sign, verify } from "node:crypto";
import { derToJoseP256, libcryptoEcSigner } from "../../scripts/bench/libcrypto-ec.ts";
import { loadLibcrypto } from "../../src/keys/signers/libcrypto.ts";

const hasLibcrypto = (await loadLibcrypto()).available;

describe("derToJoseP256", () => {
  test("a short r is padded on the left and a positive-making zero byte of s is dropped", () => {
    const r = new Uint8Array(31).fill(0x11);
    const s = new Uint8Array(32).fill(0xf0);
    // SEQUENCE { INTEGER r (31 bytes), INTEGER 00 || s (33 bytes) }
    const der = new Uint8Array([0x30, 2 + 31 + 2 + 33, 0x02, 31, ...r, 0x02, 33, 0x00, ...s]);
    const raw = derToJoseP256(der);
    expect(raw.byteLength).toBe(64);
    expect([...raw.subarray(0, 32)]).toEqual([0, ...r]);
    expect([...raw.subarray(32)]).toEqual([...s]);
  });

  test("anything but two DER integers is refused", () => {
    expect(() => derToJoseP256(new Uint8Array([0x30, 4, 0x04, 1, 1, 0x02]))).toThrow("not a DER ECDSA signature");
  });
});

describe.skipIf(!hasLibcrypto)("libcrypto signers of the benchmark", () => {
  test("ES256: every signature verifies with node:crypto as r||s", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const signer = await libcryptoEcSigner("ES256", privateKey);
    expect(signer?.kind).toBe("libcrypto");
    const input = new TextEncoder().encode("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJiZW5jaCJ9");
    // 600 signatures: about one r or s in 256 is shorter than 32 bytes, so the padding is used too.
    for (let i = 0; i < 600; i++) {
      const signature = (await signer?.sign(input)) as Uint8Array;
      expect(signature.byteLength).toBe(64);
      expect(verify("sha256", input, { key: publicKey, dsaEncoding: "ieee-p1363" }, signature)).toBe(true);
    }
  });

  test("EdDSA: the very bytes node:crypto signs", async () => {
    const { privateKey } = generateKeyPairSync("ed25519");
    const signer = await libcryptoEcSigner("EdDSA", privateKey);
    const input = new TextEncoder().encode("eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJiZW5jaCJ9");
    expect(Buffer.from((await signer?.sign(input)) as Uint8Array).equals(sign(null, input, privateKey))).toBe(true);
  });
});

test("without the library the benchmark gets no libcrypto signer", async () => {
  const { privateKey } = generateKeyPairSync("ed25519");
  expect(await libcryptoEcSigner("EdDSA", privateKey, "libcrypto-missing.so.0")).toBeUndefined();
});
