/**
 * POST /oauth/introspect (RFC 7662): the active answer with the token's claims, and
 * `{active: false}` for every token that is not active now (garbage, a foreign or tampered
 * signature, an unknown kid, another issuer, missing claims, expiry, a revoked signing key, a
 * deleted client); retired keys still verify; client authentication as at the token endpoint.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from "jose";
import { buildTestApp, T0, type TestApp } from "../helpers/app.ts";
import { bodyOf, json } from "../http/support.ts";
import {
  basic,
  createTestClient,
  expectInvalidClient,
  expectOAuthError,
  formRequest,
  introspect,
  isActive,
  issueToken,
  type TestClient,
} from "./support.ts";

const ISSUER = "https://tokens.example.test";
const AUDIENCE = "https://billing.example.test";
const INACTIVE = { active: false };

describe("introspection endpoint", () => {
  let t: TestApp;
  let owner: TestClient;
  let resourceServer: TestClient;
  beforeAll(async () => {
    t = await buildTestApp({ rotationPeriod: 600 });
    owner = await createTestClient(t, undefined, AUDIENCE);
    resourceServer = await createTestClient(t, owner.providerId, "https://other.example.test");
  });
  afterAll(() => t.close());

  /** Signs `claims` with the project's current key, as the service would (only the claims differ). */
  const signWithProjectKey = (claims: Record<string, unknown>) => t.ctx.keys.ring(t.ctx.projectId).sign("at+jwt", claims);
  const ownClaims = () => ({
    iss: ISSUER,
    sub: owner.clientId,
    client_id: owner.clientId,
    aud: AUDIENCE,
    iat: Math.floor(t.clock.now() / 1000),
    exp: Math.floor(t.clock.now() / 1000) + 600,
    jti: crypto.randomUUID(),
  });

  test("an active token: 200 with exactly the RFC 7662 members and the token's claims, not cached", async () => {
    const token = await issueToken(t, owner);
    const res = await formRequest(t, "/oauth/introspect", { token }, owner.auth);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("pragma")).toBe("no-cache");
    const claims = decodeJwt(token);
    expect(await bodyOf(res)).toEqual({
      active: true,
      client_id: owner.clientId,
      sub: owner.clientId,
      aud: AUDIENCE,
      iss: ISSUER,
      exp: T0 / 1000 + 3600,
      iat: T0 / 1000,
      jti: claims.jti as string,
      token_type: "Bearer",
    });
  });

  test("any client of the project may introspect, by client_secret_basic or client_secret_post", async () => {
    const token = await issueToken(t, owner);
    expect(await introspect(t, resourceServer, token)).toMatchObject({ active: true, client_id: owner.clientId, aud: AUDIENCE });
    const post = await formRequest(t, "/oauth/introspect", { token, client_id: resourceServer.clientId, client_secret: resourceServer.secret });
    expect(await json<{ active: boolean; client_id: string }>(post)).toMatchObject({ active: true, client_id: owner.clientId });
  });

  test("tokens of the management route are introspected alike: audience as array, typ JWT", async () => {
    const res = await t.api("POST", `/v1/providers/${owner.providerId}/clients/${owner.clientId}/tokens`, { audienceAsArray: true, useJwtType: true, expiresIn: 60 });
    const { accessToken } = await json<{ accessToken: string }>(res);
    expect(await introspect(t, owner, accessToken)).toMatchObject({ active: true, aud: [AUDIENCE], exp: T0 / 1000 + 60 });
  });

  test("token_type_hint is ignored, whatever it says", async () => {
    const token = await issueToken(t, owner);
    for (const hint of ["access_token", "refresh_token", "something_else"]) {
      expect(await introspect(t, owner, token, { token_type_hint: hint })).toMatchObject({ active: true });
    }
  });

  test("garbage is {active: false}, exactly", async () => {
    const token = await issueToken(t, owner);
    const [header, payload, signature] = token.split(".") as [string, string, string];
    for (const garbage of ["x", "a.b.c", `${header}.${payload}`, `${header}.${payload}.`, `${token}x`, `${header}.${payload}.${"A".repeat(signature.length)}`]) {
      expect({ garbage, body: await introspect(t, owner, garbage) }).toEqual({ garbage, body: INACTIVE });
    }
  });

  test("a changed payload under the original signature is {active: false}", async () => {
    const token = await issueToken(t, owner);
    const [header, , signature] = token.split(".") as [string, string, string];
    const forged = Buffer.from(JSON.stringify({ ...decodeJwt(token), exp: T0 / 1000 + 999_999 })).toString("base64url");
    expect(await introspect(t, owner, `${header}.${forged}.${signature}`)).toEqual(INACTIVE);
  });

  test("a token signed by a key the project never published is {active: false}, with an unknown kid or the current kid", async () => {
    const { privateKey, publicKey } = await generateKeyPair("ES256");
    const foreignKid = (await exportJWK(publicKey)).x as string;
    for (const kid of [foreignKid, t.ctx.keys.ring(t.ctx.projectId).kid]) {
      const token = await new SignJWT(ownClaims()).setProtectedHeader({ alg: "ES256", kid, typ: "at+jwt" }).sign(privateKey);
      expect(await introspect(t, owner, token)).toEqual(INACTIVE);
    }
  });

  test("a token of the project's key with another issuer is {active: false}", async () => {
    expect(await introspect(t, owner, await signWithProjectKey(ownClaims()))).toMatchObject({ active: true });
    expect(await introspect(t, owner, await signWithProjectKey({ ...ownClaims(), iss: "https://evil.example.test" }))).toEqual(INACTIVE);
  });

  test("a token missing a claim of ours, or with a mistyped one, is {active: false}", async () => {
    for (const claim of ["jti", "client_id", "sub", "iat", "exp", "aud"]) {
      const claims: Record<string, unknown> = ownClaims();
      delete claims[claim];
      expect({ claim, body: await introspect(t, owner, await signWithProjectKey(claims)) }).toEqual({ claim, body: INACTIVE });
    }
    for (const [claim, value] of [["jti", 7], ["client_id", [owner.clientId]], ["aud", [1]], ["exp", "later"]] as const) {
      const token = await signWithProjectKey({ ...ownClaims(), [claim]: value });
      expect({ claim, body: await introspect(t, owner, token) }).toEqual({ claim, body: INACTIVE });
    }
  });

  test("a token of a client that is not in the project is {active: false}", async () => {
    const stranger = crypto.randomUUID();
    expect(await introspect(t, owner, await signWithProjectKey({ ...ownClaims(), sub: stranger, client_id: stranger }))).toEqual(INACTIVE);
  });

  test("client authentication is required: 401 invalid_client with the Basic challenge", async () => {
    const token = await issueToken(t, owner);
    await expectInvalidClient(await formRequest(t, "/oauth/introspect", { token }), "Client authentication is required");
    await expectInvalidClient(await formRequest(t, "/oauth/introspect", { token }, { authorization: basic(owner.clientId, `${owner.secret}x`) }), "wrong secret");
    await expectInvalidClient(await formRequest(t, "/oauth/introspect", { token, client_id: owner.clientId, client_secret: "nope" }));
    await expectInvalidClient(await formRequest(t, "/oauth/introspect", { token }, { authorization: "Bearer abc" }));
  });

  test("a missing or repeated token, or a JSON body, is 400 invalid_request; GET is 405", async () => {
    await expectOAuthError(await formRequest(t, "/oauth/introspect", {}, owner.auth), 400, "invalid_request", "token");
    await expectOAuthError(await formRequest(t, "/oauth/introspect", "token=a&token=b", owner.auth), 400, "invalid_request", "token");
    const asJson = await t.request("POST", "/oauth/introspect", { token: "x" }, owner.auth);
    await expectOAuthError(asJson, 400, "invalid_request", "form-encoded");
    const get = await t.request("GET", "/oauth/introspect", undefined, owner.auth);
    expect(get.headers.get("allow")).toBe("POST");
    await expectOAuthError(get, 405, "invalid_request");
  });
});

describe("introspection over time and key changes", () => {
  let t: TestApp;
  let owner: TestClient;
  beforeAll(async () => {
    // JWKS max-age 300 s: the next key may be promoted 300 s after start.
    t = await buildTestApp({ rotationPeriod: 600 });
    owner = await createTestClient(t);
  });
  afterAll(() => t.close());

  test("active until its exp, then {active: false}", async () => {
    const token = await issueToken(t, owner);
    const start = t.clock.ms;
    t.clock.advance(3599);
    expect(await isActive(t, owner, token)).toBe(true);
    t.clock.advance(1);
    expect(await introspect(t, owner, token)).toEqual(INACTIVE);
    t.clock.ms = start;
  });

  test("a token of a retired key stays active; once that key is revoked it is {active: false}", async () => {
    const oldToken = await issueToken(t, owner);
    const oldKid = t.ctx.keys.ring(t.ctx.projectId).kid;
    t.clock.advance(300);
    expect((await t.api("POST", "/v1/keys/rotate")).status).toBe(200);
    expect(t.ctx.keys.ring(t.ctx.projectId).kid).not.toBe(oldKid);
    const newToken = await issueToken(t, owner);
    expect(await isActive(t, owner, oldToken)).toBe(true);
    expect(await isActive(t, owner, newToken)).toBe(true);
    expect((await t.api("POST", `/v1/keys/${oldKid}/revoke`)).status).toBe(200);
    expect(await introspect(t, owner, oldToken)).toEqual(INACTIVE);
    expect(await isActive(t, owner, newToken)).toBe(true);
  });

  test("a token of a deleted client is {active: false}", async () => {
    const doomed = await createTestClient(t, owner.providerId);
    const token = await issueToken(t, doomed);
    expect(await isActive(t, owner, token)).toBe(true);
    expect((await t.api("DELETE", `/v1/providers/${doomed.providerId}/clients/${doomed.clientId}`)).status).toBe(204);
    expect(await introspect(t, owner, token)).toEqual(INACTIVE);
  });
});
