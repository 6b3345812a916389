import { describe, expect, test } from "bun:test";
import { base64url } from "jose";
import {
  createMasterKeyCheck,
  importMasterKey,
  privateKeyAad,
  seal,
  unseal,
  verifyMasterKeyCheck,
} from "../../src/keys/sealing.ts";

const rawKey = (fill: number) => new Uint8Array(32).fill(fill);
const PLAINTEXT = '{"kty":"EC","d":"secret-scalar"}';
const AAD = privateKeyAad("project-1", "kid-1");

/** The sealed value with byte `index` XOR-ed (negative index counts from the end). */
function flipByte(sealed: string, index: number): string {
  const bytes = base64url.decode(sealed);
  const at = index < 0 ? bytes.length + index : index;
  bytes[at] = (bytes[at] as number) ^ 0x01;
  return base64url.encode(bytes);
}

describe("importMasterKey", () => {
  test("accepts exactly 32 bytes", async () => {
    const key = await importMasterKey(rawKey(1));
    expect(key.algorithm).toMatchObject({ name: "AES-GCM", length: 256 });
    expect(key.extractable).toBe(false);
    expect(() => importMasterKey(new Uint8Array(31))).toThrow("exactly 32 bytes");
    expect(() => importMasterKey(new Uint8Array(33))).toThrow("exactly 32 bytes");
  });
});

describe("seal and unseal", () => {
  test("round trip; iv || ciphertext || 16-byte tag; a fresh iv every time", async () => {
    const key = await importMasterKey(rawKey(1));
    const a = await seal(key, PLAINTEXT, AAD);
    const b = await seal(key, PLAINTEXT, AAD);
    expect(await unseal(key, a, AAD)).toBe(PLAINTEXT);
    expect(await unseal(key, b, AAD)).toBe(PLAINTEXT);
    expect(a).not.toBe(b);
    expect(base64url.decode(a).length).toBe(12 + new TextEncoder().encode(PLAINTEXT).length + 16);
    expect(a).not.toContain("secret");
    expect(new TextDecoder().decode(base64url.decode(a))).not.toContain("secret-scalar");
  });

  test("a wrong master key throws", async () => {
    const sealed = await seal(await importMasterKey(rawKey(1)), PLAINTEXT, AAD);
    await expect(unseal(await importMasterKey(rawKey(2)), sealed, AAD)).rejects.toThrow();
  });

  test("a wrong AAD (other project or kid) throws", async () => {
    const key = await importMasterKey(rawKey(1));
    const sealed = await seal(key, PLAINTEXT, AAD);
    await expect(unseal(key, sealed, privateKeyAad("project-2", "kid-1"))).rejects.toThrow();
    await expect(unseal(key, sealed, privateKeyAad("project-1", "kid-2"))).rejects.toThrow();
    expect(privateKeyAad("p", "k")).toBe("tokenmint:signing-key:p:k");
  });

  test("a flipped byte in the iv, the ciphertext or the tag throws", async () => {
    const key = await importMasterKey(rawKey(1));
    const sealed = await seal(key, PLAINTEXT, AAD);
    for (const index of [0, 11, 12, 20, -17, -1]) {
      await expect(unseal(key, flipByte(sealed, index), AAD)).rejects.toThrow();
    }
    expect(await unseal(key, sealed, AAD)).toBe(PLAINTEXT);
  });

  test("a truncated value throws", async () => {
    const key = await importMasterKey(rawKey(1));
    const sealed = await seal(key, PLAINTEXT, AAD);
    const bytes = base64url.decode(sealed);
    await expect(unseal(key, base64url.encode(bytes.subarray(0, bytes.length - 1)), AAD)).rejects.toThrow();
  });
});

describe("unsealing through node:crypto and through WebCrypto", () => {
  test("a key imported straight through WebCrypto (unsealed there) and importMasterKey's (unsealed through node:crypto) agree on every value, and refuse the same ones", async () => {
    const key = await importMasterKey(rawKey(3));
    const webOnly = await crypto.subtle.importKey("raw", rawKey(3), { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
    for (const plaintext of ["", "x", PLAINTEXT, "é→𝄞".repeat(300)]) {
      const sealed = await seal(key, plaintext, AAD);
      expect(await unseal(key, sealed, AAD)).toBe(plaintext);
      expect(await unseal(webOnly, sealed, AAD)).toBe(plaintext);
      expect(await unseal(key, await seal(webOnly, plaintext, AAD), AAD)).toBe(plaintext);
    }
    const sealed = await seal(key, PLAINTEXT, AAD);
    const bytes = base64url.decode(sealed);
    const refused = [
      ...[0, 11, 12, -17, -1].map((index) => ({ value: flipByte(sealed, index), aad: AAD })),
      { value: sealed, aad: privateKeyAad("project-1", "kid-2") },
      { value: base64url.encode(bytes.subarray(0, bytes.length - 1)), aad: AAD },
      { value: base64url.encode(bytes.subarray(0, 27)), aad: AAD },
      { value: "", aad: AAD },
    ];
    for (const { value, aad } of refused) {
      await expect(unseal(key, value, aad)).rejects.toThrow();
      await expect(unseal(webOnly, value, aad)).rejects.toThrow();
    }
    await expect(unseal(await importMasterKey(rawKey(4)), sealed, AAD)).rejects.toThrow();
  });
});

describe("master key check", () => {
  test("verifies with the key that made it, not with another", async () => {
    const right = await importMasterKey(rawKey(7));
    const check = await createMasterKeyCheck(right);
    expect(await verifyMasterKeyCheck(right, check)).toBe(true);
    expect(await verifyMasterKeyCheck(await importMasterKey(rawKey(7)), check)).toBe(true);
    expect(await verifyMasterKeyCheck(await importMasterKey(rawKey(8)), check)).toBe(false);
  });

  test("is false for an altered or garbage check value, never a throw", async () => {
    const key = await importMasterKey(rawKey(7));
    const check = await createMasterKeyCheck(key);
    expect(await verifyMasterKeyCheck(key, flipByte(check, 15))).toBe(false);
    expect(await verifyMasterKeyCheck(key, "not a sealed value!")).toBe(false);
    expect(await verifyMasterKeyCheck(key, "")).toBe(false);
  });

  test("a value sealed with other AAD is not a valid check", async () => {
    const key = await importMasterKey(rawKey(7));
    expect(await verifyMasterKeyCheck(key, await seal(key, "tokenmint master key check v1", AAD))).toBe(false);
  });
});
