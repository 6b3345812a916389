/**
 * CONTRACT §2/§4: a token verifies with a standard library against the JWKS fetched over a real
 * socket, for every signing algorithm; and §5: issuing writes nothing to the store.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createRemoteJWKSet, errors, jwtVerify } from "jose";
import type { SigningAlg } from "../../src/config/schema.ts";
import type { Store } from "../../src/store/store.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { json } from "./support.ts";

const ISSUER = "https://tokens.example.test";
const AUDIENCE = "https://api.example.test";

for (const alg of ["RS256", "ES256", "EdDSA"] as const satisfies readonly SigningAlg[]) {
  describe(`${alg}: verification over a socket`, () => {
    let t: TestApp;
    let server: ReturnType<typeof Bun.serve>;
    let base: string;
    beforeAll(async () => {
      t = await buildTestApp({ alg });
      server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: (r) => t.app.handle(r) });
      base = `http://127.0.0.1:${server.port}`;
    });
    afterAll(async () => {
      await server.stop(true);
      await t.close();
    });

    test("discovery → JWKS → jwtVerify checks typ, issuer, audience and exp", async () => {
      const { providerId, clientId } = await createProviderAndClient(t, AUDIENCE);
      const issued = await fetch(`${base}/v1/providers/${providerId}/clients/${clientId}/tokens`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ expiresIn: 120 }),
      });
      expect(issued.status).toBe(201);
      const { accessToken } = await json<{ accessToken: string }>(issued);

      const discovery = await fetch(`${base}/.well-known/openid-configuration`);
      expect(discovery.status).toBe(200);
      const doc = await json<{ issuer: string; jwks_uri: string }>(discovery);
      expect(doc.issuer).toBe(ISSUER);
      expect(doc.jwks_uri).toBe(`${ISSUER}/.well-known/jwks`);
      // The configured issuer is not this socket; keep its path, use the real host and port.
      const jwks = createRemoteJWKSet(new URL(new URL(doc.jwks_uri).pathname, base));

      const now = new Date(t.clock.now());
      const { payload, protectedHeader } = await jwtVerify(accessToken, jwks, {
        typ: "at+jwt",
        issuer: doc.issuer,
        audience: AUDIENCE,
        algorithms: [alg],
        currentDate: now,
        requiredClaims: ["exp", "iat", "jti", "sub", "client_id"],
      });
      expect(protectedHeader.alg).toBe(alg);
      expect(payload.exp).toBe(Math.floor(now.getTime() / 1000) + 120);
      expect(payload.sub).toBe(clientId);

      const expiredAt = new Date((payload.exp as number) * 1000);
      await expect(jwtVerify(accessToken, jwks, { issuer: doc.issuer, audience: AUDIENCE, currentDate: expiredAt })).rejects.toBeInstanceOf(
        errors.JWTExpired,
      );
      await expect(jwtVerify(accessToken, jwks, { issuer: "https://evil.example.test", currentDate: now })).rejects.toBeInstanceOf(
        errors.JWTClaimValidationFailed,
      );
      await expect(jwtVerify(accessToken, jwks, { typ: "JWT", currentDate: now })).rejects.toBeInstanceOf(errors.JWTClaimValidationFailed);
    });

    test("a useJwtType token verifies with typ JWT", async () => {
      const { providerId, clientId } = await createProviderAndClient(t, AUDIENCE);
      const issued = await fetch(`${base}/v1/providers/${providerId}/clients/${clientId}/tokens`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ useJwtType: true, audienceAsArray: true }),
      });
      const { accessToken } = await json<{ accessToken: string }>(issued);
      const jwks = createRemoteJWKSet(new URL("/.well-known/jwks.json", base));
      const { payload } = await jwtVerify(accessToken, jwks, { typ: "JWT", issuer: ISSUER, audience: AUDIENCE, currentDate: new Date(t.clock.now()) });
      expect(payload.aud).toEqual([AUDIENCE]);
    });
  });
}

/** Names of the Store methods that write. */
const WRITES = /^(create|update|delete|swap)|^(init|set)Meta$/;

describe("issuing is stateless", () => {
  let t: TestApp;
  let calls: string[];
  beforeAll(async () => {
    t = await buildTestApp();
    calls = [];
    // Patch the store object itself, so every holder of it (routes, auth, key service) is watched.
    const store = t.ctx.store as unknown as Record<string, (...args: unknown[]) => unknown>;
    const proto = Object.getPrototypeOf(t.ctx.store) as object;
    const names = Object.getOwnPropertyNames(proto).filter((name) => WRITES.test(name) && typeof store[name] === "function");
    expect(names).toContain("swapKeySet");
    expect(names).toContain("createProvider");
    for (const name of names) {
      const original = store[name] as (...args: unknown[]) => unknown;
      store[name] = (...args: unknown[]) => {
        calls.push(name);
        return original.apply(t.ctx.store as Store, args);
      };
    }
  });
  afterAll(() => t.close());

  test("20 token requests call no write method of the store", async () => {
    const { providerId, clientId } = await createProviderAndClient(t);
    expect(calls).toEqual(["createProvider", "createClient"]);
    calls.length = 0;
    for (let i = 0; i < 20; i++) {
      const res = await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, { expiresIn: 60 + i });
      expect(res.status).toBe(201);
    }
    expect(calls).toEqual([]);
  });
});
