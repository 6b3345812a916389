/** core/tokens: the lifetime rule and the exact claims of an access token. */
import { describe, expect, test } from "bun:test";
import { buildAccessTokenClaims, DEFAULT_TOKEN_LIFETIME_S, epochSeconds, tokenLifetime, type AccessTokenInput } from "../../src/core/tokens.ts";

const input: AccessTokenInput = {
  issuer: "https://tokens.example.test",
  clientId: "019b76da-a800-72da-812d-7c8bd463f771",
  audience: "https://api.example.test",
  audienceAsArray: false,
  iat: 1_767_225_600,
  lifetime: 600,
  jti: "0b7e4a8e-6f4e-4c0e-9d2a-3f1c2b4a5d6e",
};

describe("tokenLifetime", () => {
  test("omitted or 0 means the default of 3600 s", () => {
    expect(DEFAULT_TOKEN_LIFETIME_S).toBe(3600);
    expect(tokenLifetime(undefined)).toBe(3600);
    expect(tokenLifetime(0)).toBe(3600);
  });

  test("any other validated value is used as is", () => {
    for (const seconds of [1, 59, 3600, 3601, 172800]) expect(tokenLifetime(seconds)).toBe(seconds);
  });
});

describe("buildAccessTokenClaims", () => {
  test("builds exactly iss, sub, client_id, aud, iat, exp, jti", () => {
    expect(buildAccessTokenClaims(input)).toStrictEqual({
      iss: "https://tokens.example.test",
      sub: "019b76da-a800-72da-812d-7c8bd463f771",
      client_id: "019b76da-a800-72da-812d-7c8bd463f771",
      aud: "https://api.example.test",
      iat: 1_767_225_600,
      exp: 1_767_226_200,
      jti: "0b7e4a8e-6f4e-4c0e-9d2a-3f1c2b4a5d6e",
    });
  });

  test("claims come out in a stable order", () => {
    expect(Object.keys(buildAccessTokenClaims(input))).toEqual(["iss", "sub", "client_id", "aud", "iat", "exp", "jti"]);
  });

  test("aud is a one-element array with audienceAsArray", () => {
    expect(buildAccessTokenClaims({ ...input, audienceAsArray: true }).aud).toStrictEqual(["https://api.example.test"]);
  });

  test("exp is iat + lifetime, at both ends of the allowed range", () => {
    expect(buildAccessTokenClaims({ ...input, lifetime: 1 }).exp).toBe(input.iat + 1);
    expect(buildAccessTokenClaims({ ...input, lifetime: 172800 }).exp).toBe(input.iat + 172800);
  });

  test("does not mutate its input", () => {
    const copy = structuredClone(input);
    buildAccessTokenClaims({ ...input, audienceAsArray: true });
    buildAccessTokenClaims(input);
    expect(input).toStrictEqual(copy);
  });
});

describe("epochSeconds", () => {
  test("floors epoch milliseconds to whole seconds", () => {
    expect(epochSeconds(Date.UTC(2026, 0, 1))).toBe(1_767_225_600);
    expect(epochSeconds(Date.UTC(2026, 0, 1) + 999)).toBe(1_767_225_600);
    expect(epochSeconds(Date.UTC(2026, 0, 1) + 1000)).toBe(1_767_225_601);
  });
});
