import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createLocalJWKSet, jwtVerify } from "jose";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";

describe("token issuing, end to end in process", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(() => t.close());

  test("a created client gets a token that verifies against the served JWKS", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    const res = await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, { expiresIn: 600 });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as { accessToken: string; expiresAt: string; type: string };
    expect(body.type).toBe("Bearer");
    const jwks = await (await t.request("GET", "/.well-known/jwks")).json();
    const { payload, protectedHeader } = await jwtVerify(body.accessToken, createLocalJWKSet(jwks as never), {
      issuer: "https://tokens.example.test",
      audience: "https://api.example.test",
      typ: "at+jwt",
      currentDate: new Date(t.clock.now()),
    });
    expect(protectedHeader.alg).toBe("ES256");
    expect(payload.sub).toBe(clientId);
    expect(payload.exp).toBe((payload.iat as number) + 600);
    expect(body.expiresAt).toBe(new Date((payload.exp as number) * 1000).toISOString());
  });
});
