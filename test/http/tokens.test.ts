/** CONTRACT §2 token request: lifetime, flags, header, claims, response shape and refusals. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { buildTestApp, createProviderAndClient, T0, type TestApp } from "../helpers/app.ts";
import { expectError, json, UNKNOWN_ID, UUID_RE } from "./support.ts";

interface TokenAnswer {
  accessToken: string;
  expiresAt: string;
  type: string;
}

const AUDIENCE = "https://api.example.test";
const ISSUER = "https://tokens.example.test";
const IAT = T0 / 1000;

describe("token request", () => {
  let t: TestApp;
  let providerId: string;
  let clientId: string;
  let path: string;
  let currentKid: string;
  beforeAll(async () => {
    t = await buildTestApp();
    ({ providerId, clientId } = await createProviderAndClient(t, AUDIENCE));
    path = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
    const keys = await json<{ items: { kid: string; state: string }[] }>(await t.api("GET", "/v1/keys"));
    currentKid = keys.items.find((k) => k.state === "current")?.kid ?? "";
  });
  afterAll(() => t.close());

  const issue = async (body?: unknown): Promise<TokenAnswer> => {
    const res = await t.api("POST", path, body);
    expect({ status: res.status, body: res.status === 201 ? "" : await res.clone().text() }).toEqual({ status: 201, body: "" });
    return json<TokenAnswer>(res);
  };
  const lifetime = async (body?: unknown) => {
    const claims = decodeJwt((await issue(body)).accessToken);
    return (claims.exp as number) - (claims.iat as number);
  };

  test("answers 201 with exactly {accessToken, expiresAt, type: 'Bearer'} and Cache-Control: no-store", async () => {
    const res = await t.api("POST", path, { expiresIn: 600 });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = await json<TokenAnswer>(res);
    expect(Object.keys(body).sort()).toEqual(["accessToken", "expiresAt", "type"]);
    expect(body.type).toBe("Bearer");
    expect(body.expiresAt).toBe(new Date((T0 / 1000 + 600) * 1000).toISOString());
  });

  test("the default lifetime is 3600 when expiresIn is omitted or 0", async () => {
    expect(await lifetime()).toBe(3600);
    expect(await lifetime({})).toBe(3600);
    expect(await lifetime({ expiresIn: 0 })).toBe(3600);
  });

  test("expiresIn 1 and 172800 are accepted as sent", async () => {
    expect(await lifetime({ expiresIn: 1 })).toBe(1);
    expect(await lifetime({ expiresIn: 172800 })).toBe(172800);
  });

  for (const value of [-1, 1.5, "60", 172801, null, true]) {
    test(`expiresIn ${JSON.stringify(value)} → 400 naming expiresIn`, async () => {
      await expectError(await t.api("POST", path, { expiresIn: value }), 400, "invalid_request", "expiresIn");
    });
  }

  for (const field of ["useJwtType", "audienceAsArray", "forceDefaultDomain"]) {
    for (const value of ["true", 1, null]) {
      test(`${field}: ${JSON.stringify(value)} → 400 naming ${field}`, async () => {
        await expectError(await t.api("POST", path, { [field]: value }), 400, "invalid_request", field);
      });
    }
  }

  test("an unknown field → 400 naming it", async () => {
    await expectError(await t.api("POST", path, { scope: "read" }), 400, "invalid_request", "scope");
  });

  test("an empty POST without a content type means {} (201)", async () => {
    const auth = { authorization: `Bearer ${t.apiKey}` };
    const none = await t.request("POST", path, undefined, auth);
    expect(none.status).toBe(201);
    const empty = await t.request("POST", path, "", auth);
    expect(empty.status).toBe(201);
    expect(empty.headers.get("content-type")).toStartWith("application/json");
  });

  test("the header is exactly {alg, kid, typ: 'at+jwt'} by default and typ 'JWT' with useJwtType", async () => {
    expect(decodeProtectedHeader((await issue()).accessToken)).toEqual({ alg: "ES256", kid: currentKid, typ: "at+jwt" });
    expect(decodeProtectedHeader((await issue({ useJwtType: false })).accessToken).typ).toBe("at+jwt");
    expect(decodeProtectedHeader((await issue({ useJwtType: true })).accessToken)).toEqual({ alg: "ES256", kid: currentKid, typ: "JWT" });
  });

  test("aud is a string by default and a one-element array with audienceAsArray", async () => {
    expect(decodeJwt((await issue()).accessToken).aud).toBe(AUDIENCE);
    expect(decodeJwt((await issue({ audienceAsArray: false })).accessToken).aud).toBe(AUDIENCE);
    expect(decodeJwt((await issue({ audienceAsArray: true })).accessToken).aud).toEqual([AUDIENCE]);
  });

  test("the claims are exactly iss, sub, client_id, aud, iat, exp, jti", async () => {
    const answer = await issue({ expiresIn: 900 });
    const claims = decodeJwt(answer.accessToken);
    expect(claims).toEqual({
      iss: ISSUER,
      sub: clientId,
      client_id: clientId,
      aud: AUDIENCE,
      iat: IAT,
      exp: IAT + 900,
      jti: expect.stringMatching(UUID_RE),
    });
    expect(answer.expiresAt).toBe(new Date((IAT + 900) * 1000).toISOString());
    expect(answer.expiresAt).toBe("2026-01-01T00:15:00.000Z");
  });

  test("iat follows the clock", async () => {
    t.clock.advance(90);
    try {
      expect(decodeJwt((await issue()).accessToken).iat).toBe(IAT + 90);
    } finally {
      t.clock.advance(-90);
    }
  });

  test("jti is unique over 50 tokens", async () => {
    const jtis = new Set<unknown>();
    for (let i = 0; i < 50; i++) jtis.add(decodeJwt((await issue()).accessToken).jti);
    expect(jtis.size).toBe(50);
  });

  test("forceDefaultDomain true still yields the configured issuer", async () => {
    expect(decodeJwt((await issue({ forceDefaultDomain: true })).accessToken).iss).toBe(ISSUER);
    expect(decodeJwt((await issue({ forceDefaultDomain: false })).accessToken).iss).toBe(ISSUER);
  });

  test("a token for an unknown client, or via another provider → 404", async () => {
    await expectError(await t.api("POST", `/v1/providers/${providerId}/clients/${UNKNOWN_ID}/tokens`), 404, "not_found");
    await expectError(await t.api("POST", `/v1/providers/${UNKNOWN_ID}/clients/${clientId}/tokens`), 404, "not_found");
    const other = await json<{ id: string }>(await t.api("POST", "/v1/providers", { name: "other" }));
    await expectError(await t.api("POST", `/v1/providers/${other.id}/clients/${clientId}/tokens`), 404, "not_found");
  });

  test("malformed ids in the path → 400", async () => {
    await expectError(await t.api("POST", `/v1/providers/${providerId}/clients/nope/tokens`), 400, "invalid_request", "clientId");
    await expectError(await t.api("POST", `/v1/providers/nope/clients/${clientId}/tokens`), 400, "invalid_request", "providerId");
  });
});
