import { describe, expect, test } from "bun:test";
import { hashSecret, timingSafeEqual } from "../../src/core/secret-hash.ts";

describe("hashSecret", () => {
  test("is the base64url SHA-256 of the secret's UTF-8 bytes, so hashes stored by earlier releases still match", () => {
    // FIPS 180-2 test vector: SHA-256("abc").
    expect(hashSecret("abc")).toBe("ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
    expect(hashSecret("")).toBe("47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
    // Non-ASCII text is hashed as UTF-8: "é" is the bytes C3 A9 (as Latin-1, E9, it would differ).
    expect(hashSecret("é")).toBe("SplVfkAzw1Od4utlRyAXytX5VX96BiWgnxw_biumnEw");
  });

  test("answers synchronously", () => {
    expect(typeof hashSecret("tm_x")).toBe("string");
  });
});

describe("timingSafeEqual", () => {
  test("is true only for the very same string", () => {
    const hash = hashSecret("one");
    expect(timingSafeEqual(hash, hashSecret("one"))).toBe(true);
    expect(timingSafeEqual(hash, hashSecret("two"))).toBe(false);
    expect(timingSafeEqual(hash, `${hash.slice(0, -1)}${hash.endsWith("A") ? "B" : "A"}`)).toBe(false);
    expect(timingSafeEqual(`x${hash.slice(1)}`, hash)).toBe(hash.startsWith("x"));
  });

  test("strings of different lengths are unequal, a prefix included, either way round", () => {
    expect(timingSafeEqual("abc", "abcd")).toBe(false);
    expect(timingSafeEqual("abcd", "abc")).toBe(false);
    expect(timingSafeEqual("", "a")).toBe(false);
    expect(timingSafeEqual("a", "")).toBe(false);
    expect(timingSafeEqual("", "")).toBe(true);
  });
});
