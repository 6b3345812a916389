/**
 * POST /oauth/token with private_key_jwt (RFC 7523 §2.2, OpenID Connect Core §9): assertions
 * signed with jose by RSA, EC and Ed25519 keys get the client's token; every rule of the
 * assertion (alg, key, iss/sub, aud, exp, lifetime, nbf, iat, jti and its single use, across
 * processes too) refuses with invalid_client naming the check; combining methods is
 * invalid_request; a client holding a secret and keys may use either.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { base64url, createLocalJWKSet, jwtVerify, SignJWT, UnsecuredJWT, type JSONWebKeySet } from "jose";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { json, UNKNOWN_ID } from "../http/support.ts";
import { assertionRequest, clientKey, ISSUER, JWT_BEARER, registerKeys, signAssertion, TOKEN_ENDPOINT, type ClientKey } from "./assertions.ts";
import { basic, createSecret, expectInvalidClient, expectOAuthError, FORM, tokenRequest } from "./support.ts";

const AUDIENCE = "https://billing.example.test";
const GRANT = { grant_type: "client_credentials" };

describe("token endpoint: private_key_jwt", () => {
  let t: TestApp;
  let providerId: string;
  let clientId: string;
  let secret: string;
  let rsa: ClientKey;
  let ec: ClientKey;
  let ed: ClientKey;
  let ps: ClientKey;
  let p384: ClientKey;
  let stranger: ClientKey;
  let otherClientId: string;
  let otherKey: ClientKey;
  beforeAll(async () => {
    t = await buildTestApp();
    ({ providerId, clientId } = await createProviderAndClient(t, AUDIENCE));
    ({ secret } = await createSecret(t, providerId, clientId));
    [rsa, ec, ed, ps, p384, stranger, otherKey] = await Promise.all([
      clientKey("RS256", "rsa-1"),
      clientKey("ES256", "ec-1"),
      clientKey("EdDSA", "ed-1"),
      clientKey("PS256", "ps-1"),
      clientKey("ES384"),
      clientKey("ES256", "ec-1"),
      clientKey("ES256", "other-1"),
    ]);
    await registerKeys(t, providerId, clientId, [rsa.publicJwk, ec.publicJwk, ed.publicJwk, { ...ps.publicJwk, alg: "PS256" }, p384.publicJwk]);
    const other = await createProviderAndClient(t);
    otherClientId = other.clientId;
    await registerKeys(t, other.providerId, otherClientId, [otherKey.publicJwk]);
  });
  afterAll(() => t.close());

  const sign = (key: ClientKey, options: Parameters<typeof signAssertion>[3] = {}) => signAssertion(t, key, clientId, options);
  const now = () => Math.floor(t.clock.now() / 1000);
  const accepted = async (res: Response) => {
    expect({ status: res.status, body: res.status === 200 ? "" : await res.clone().text() }).toEqual({ status: 200, body: "" });
    return json<{ access_token: string; token_type: string; expires_in: number }>(res);
  };

  for (const [name, key] of [
    ["RS256", () => rsa],
    ["ES256", () => ec],
    ["EdDSA", () => ed],
    ["PS256", () => ps],
  ] as const) {
    test(`an ${name} assertion gets the client's token, which verifies against the served JWKS`, async () => {
      const answer = await accepted(await assertionRequest(t, await sign(key())));
      expect(answer.token_type).toBe("Bearer");
      expect(answer.expires_in).toBe(3600);
      const jwks = await json<JSONWebKeySet>(await t.request("GET", "/.well-known/jwks"));
      const { payload } = await jwtVerify(answer.access_token, createLocalJWKSet(jwks), { issuer: ISSUER, audience: AUDIENCE, currentDate: new Date(t.clock.now()) });
      expect(payload).toMatchObject({ sub: clientId, client_id: clientId, aud: AUDIENCE });
    });
  }

  test("without kid in the header, each registered key of the alg's type is tried", async () => {
    await accepted(await assertionRequest(t, await sign(p384, { header: { kid: undefined } })));
    await accepted(await assertionRequest(t, await sign(ed, { header: { kid: undefined } })));
    await accepted(await assertionRequest(t, await sign(ec, { header: { kid: undefined } })));
  });

  test("aud may be the issuer or the token endpoint, alone or in a list; client_id may be repeated", async () => {
    await accepted(await assertionRequest(t, await sign(ec, { claims: { aud: ISSUER } })));
    await accepted(await assertionRequest(t, await sign(ec, { claims: { aud: ["https://elsewhere.example.test", TOKEN_ENDPOINT] } })));
    await accepted(await assertionRequest(t, await sign(ec), { client_id: clientId }));
  });

  test("a replay of the same assertion, or another one with a used jti, is refused", async () => {
    const assertion = await sign(ec, { claims: { jti: "once" } });
    await accepted(await assertionRequest(t, assertion));
    await expectInvalidClient(await assertionRequest(t, assertion), "already used");
    t.clock.advance(20);
    await expectInvalidClient(await assertionRequest(t, await sign(rsa, { claims: { jti: "once" } })), "already used");
    t.clock.advance(-20);
    // The jti belongs to its client: another client may use the same value.
    await accepted(await assertionRequest(t, await signAssertion(t, otherKey, otherClientId, { claims: { jti: "once" } })));
  });

  test("an assertion with a fractional exp is refused as a replay for as long as it verifies", async () => {
    const nowS = Math.floor(t.clock.now() / 1000);
    const assertion = await sign(ec, { claims: { iat: nowS, exp: nowS + 10.5 } });
    await accepted(await assertionRequest(t, assertion));
    const start = t.clock.ms;
    // It verifies until the second nowS + 10.5 + 30 ends (jose compares whole seconds of now).
    for (const afterMs of [10_000, 40_600, 40_999]) {
      t.clock.ms = start + afterMs;
      await expectInvalidClient(await assertionRequest(t, assertion), "already used");
    }
    t.clock.ms = start + 41_000;
    await expectInvalidClient(await assertionRequest(t, assertion), "expired");
    t.clock.ms = start;
  });

  test("a small-order Ed25519 key stored before such keys were refused is never tried: the forgery it allows is refused", async () => {
    const victim = await createProviderAndClient(t);
    const identity = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    // Written as a set stored by an earlier version would be.
    await t.ctx.store.putClientJwks({ projectId: t.ctx.projectId, clientId: victim.clientId, keys: [{ kty: "OKP", kid: "old", crv: "Ed25519", x: identity }], updatedAt: t.clock.now() });
    const b64 = (value: unknown) => base64url.encode(JSON.stringify(value));
    const claims = { iss: victim.clientId, sub: victim.clientId, aud: ISSUER, jti: crypto.randomUUID(), iat: now(), exp: now() + 60 };
    const signature = new Uint8Array(64);
    signature[0] = 1;
    const forged = `${b64({ alg: "EdDSA" })}.${b64(claims)}.${base64url.encode(signature)}`;
    await expectInvalidClient(await assertionRequest(t, forged), "can verify alg EdDSA");
  });

  test("a replay through a second store instance on the same data (as another process) is refused too", async () => {
    const second = await buildTestApp({ dataDir: t.dataDir, masterKey: t.masterKey, clock: t.clock });
    try {
      const assertion = await sign(ed);
      await accepted(await assertionRequest(t, assertion));
      await expectInvalidClient(await assertionRequest(second, assertion), "already used");
      const fresh = await sign(ed);
      await accepted(await assertionRequest(second, fresh));
      await expectInvalidClient(await assertionRequest(t, fresh), "already used");
    } finally {
      await second.close();
    }
  });

  test("a refused assertion does not use up its jti", async () => {
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { jti: "kept", aud: "https://wrong.example.test" } })), "aud");
    await accepted(await assertionRequest(t, await sign(ec, { claims: { jti: "kept" } })));
  });

  test("aud must contain the issuer or the token endpoint", async () => {
    for (const aud of ["https://wrong.example.test", `${ISSUER}/`, `${TOKEN_ENDPOINT}/x`, [AUDIENCE], AUDIENCE]) {
      await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { aud } })), `aud must contain '${ISSUER}' or '${TOKEN_ENDPOINT}'`);
    }
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { aud: undefined } })), "'aud'");
  });

  test("each endpoint takes the issuer, the token endpoint or its own URL as aud, never another endpoint's", async () => {
    const at = async (path: string, aud: string) => {
      const assertion = await sign(ec, { claims: { aud } });
      const params = { client_assertion_type: JWT_BEARER, client_assertion: assertion, ...(path === "/oauth/token" ? GRANT : { token: "not-a-token" }) };
      return t.request("POST", path, new URLSearchParams(params).toString(), FORM);
    };
    const [introspect, revoke] = [`${ISSUER}/oauth/introspect`, `${ISSUER}/oauth/revoke`];
    // The token endpoint: the issuer or its own URL (RFC 7523 §3, OpenID Connect Core §9).
    for (const aud of [introspect, revoke]) {
      await expectInvalidClient(await at("/oauth/token", aud), `aud must contain '${ISSUER}' or '${TOKEN_ENDPOINT}'.`);
    }
    // Introspection and revocation: also the token endpoint, which clients send for every endpoint.
    for (const [path, own, other] of [["/oauth/introspect", introspect, revoke], ["/oauth/revoke", revoke, introspect]]) {
      for (const aud of [ISSUER, TOKEN_ENDPOINT, own]) expect((await at(path, aud)).status).toBe(200);
      await expectInvalidClient(await at(path, other), `aud must contain '${ISSUER}' or '${TOKEN_ENDPOINT}' or '${own}'.`);
    }
  });

  test("iss and sub must both be the client id", async () => {
    for (const claims of [{ iss: UNKNOWN_ID }, { sub: UNKNOWN_ID }, { iss: undefined }, { sub: undefined }, { iss: ISSUER }]) {
      await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims })), "iss and sub");
    }
    // Both naming an unknown client.
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iss: UNKNOWN_ID, sub: UNKNOWN_ID } })), "unknown client");
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iss: "nope", sub: "nope" } })), "unknown client");
  });

  test("a key of another client, or a key never registered, does not verify", async () => {
    // Signed by the other client's key, claiming to be this client.
    await expectInvalidClient(await assertionRequest(t, await sign(otherKey, { header: { kid: "ec-1" } })), "signature does not verify");
    await expectInvalidClient(await assertionRequest(t, await sign(otherKey)), "No registered key of the client has the kid 'other-1'");
    // The same kid as a registered key, but another key.
    await expectInvalidClient(await assertionRequest(t, await sign(stranger)), "signature does not verify");
    await expectInvalidClient(await assertionRequest(t, await sign(stranger, { header: { kid: undefined } })), "signature does not verify");
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { header: { kid: "unknown-kid" } })), "kid 'unknown-kid'");
  });

  test("alg none, HS256 and algs outside the list are refused before any key is tried", async () => {
    const claims = { iss: clientId, sub: clientId, aud: TOKEN_ENDPOINT, iat: now(), exp: now() + 60, jti: crypto.randomUUID() };
    const unsecured = new UnsecuredJWT(claims).encode();
    await expectInvalidClient(await assertionRequest(t, unsecured), "alg 'none' is not accepted");
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: "ec-1" }).sign(new TextEncoder().encode("a shared secret of thirty-two bytes!"));
    await expectInvalidClient(await assertionRequest(t, hs), "alg 'HS256' is not accepted");
    // A registered key restricted to PS256 does not verify RS256.
    await expectInvalidClient(await assertionRequest(t, await sign(rsa, { header: { kid: "ps-1" } })), "with kid 'ps-1' can verify alg RS256");
    // An alg that does not fit the named key's type or curve.
    await expectInvalidClient(await assertionRequest(t, await sign(p384, { header: { kid: "ec-1" } })), "with kid 'ec-1' can verify alg ES384");
    await expectInvalidClient(await assertionRequest(t, await sign(ed, { header: { kid: "rsa-1" } })), "with kid 'rsa-1' can verify alg EdDSA");
  });

  test("exp is required and must not have passed (30 s of clock skew allowed)", async () => {
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { exp: undefined } })), "'exp'");
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iat: now() - 120, exp: now() - 31 } })), "expired");
    await accepted(await assertionRequest(t, await sign(ec, { claims: { iat: now() - 120, exp: now() - 20 } })));
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { exp: "soon" } })), "NumericDate");
  });

  test("an assertion may live at most an hour: exp - iat and exp - now", async () => {
    await accepted(await assertionRequest(t, await sign(ec, { claims: { iat: now(), exp: now() + 3600 } })));
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iat: now(), exp: now() + 3601 } })), "lives too long");
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iat: now() - 2000, exp: now() + 2000 } })), "lives too long");
    await accepted(await assertionRequest(t, await sign(ec, { claims: { iat: undefined, exp: now() + 3630 } })));
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iat: undefined, exp: now() + 3631 } })), "lives too long");
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iat: undefined, exp: now() + 86400 } })), "lives too long");
  });

  test("nbf and iat in the future are refused beyond the clock skew", async () => {
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { nbf: now() + 31 } })), "nbf");
    await accepted(await assertionRequest(t, await sign(ec, { claims: { nbf: now() + 20 } })));
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { iat: now() + 31, exp: now() + 90 } })), "iat is in the future");
    await accepted(await assertionRequest(t, await sign(ec, { claims: { iat: now() + 20, exp: now() + 80 } })));
  });

  test("jti is required: a string of 1 to 256 characters", async () => {
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { jti: undefined } })), "'jti'");
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { jti: 42 } })), "jti must be a string");
    await expectInvalidClient(await assertionRequest(t, await sign(ec, { claims: { jti: "x".repeat(257) } })), "jti must be a string");
    await accepted(await assertionRequest(t, await sign(ec, { claims: { jti: "y".repeat(256) } })));
  });

  test("something that is not a signed JWT is invalid_client", async () => {
    const [h, p, s] = (await sign(ec)).split(".") as [string, string, string];
    for (const assertion of ["garbage", `${h}.${p}`, `${h}.${p}.${s}.x.y`, `${h}.bm90IGpzb24.${s}`]) {
      await expectInvalidClient(await assertionRequest(t, assertion), "not a JWT");
    }
    // A valid signature over changed claims does not exist.
    const forged = Buffer.from(JSON.stringify({ iss: clientId, sub: clientId, aud: TOKEN_ENDPOINT, exp: now() + 60, jti: "forged" })).toString("base64url");
    await expectInvalidClient(await assertionRequest(t, `${h}.${forged}.${s}`), "signature does not verify");
  });

  test("combining methods, half of the assertion parameters, or another client_id is invalid_request", async () => {
    const assertion = await sign(ec);
    await expectOAuthError(await assertionRequest(t, assertion, {}, { authorization: basic(clientId, secret) }), 400, "invalid_request", "one client authentication method");
    await expectOAuthError(await assertionRequest(t, assertion, { client_id: clientId, client_secret: secret }), 400, "invalid_request", "one client authentication method");
    await expectOAuthError(await tokenRequest(t, { ...GRANT, client_assertion: assertion }), 400, "invalid_request", "client_assertion_type");
    await expectOAuthError(await tokenRequest(t, { ...GRANT, client_assertion_type: JWT_BEARER }), 400, "invalid_request", "without client_assertion");
    await expectOAuthError(await tokenRequest(t, { ...GRANT, client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:saml2-bearer", client_assertion: assertion }), 400, "invalid_request", JWT_BEARER);
    await expectOAuthError(await assertionRequest(t, assertion, { client_id: otherClientId }), 400, "invalid_request", "client_id");
    // None of these used the assertion up.
    await accepted(await assertionRequest(t, assertion));
  });

  test("a client holding a secret and keys may use either method", async () => {
    await accepted(await tokenRequest(t, GRANT, { authorization: basic(clientId, secret) }));
    await accepted(await tokenRequest(t, { ...GRANT, client_id: clientId, client_secret: secret }));
    await accepted(await assertionRequest(t, await sign(rsa)));
  });

  test("a client without keys, and an unknown client, are refused alike", async () => {
    const { providerId: p, clientId: keyless } = await createProviderAndClient(t);
    await createSecret(t, p, keyless);
    const noKeys = await expectInvalidClient(await assertionRequest(t, await signAssertion(t, ec, keyless)));
    const unknown = await expectInvalidClient(await assertionRequest(t, await signAssertion(t, ec, UNKNOWN_ID)));
    expect(noKeys.error_description).toBe(unknown.error_description);
  });

  test("no description names a key or the assertion", async () => {
    const assertion = await sign(stranger);
    const body = await expectInvalidClient(await assertionRequest(t, assertion));
    for (const secretish of [assertion, stranger.publicJwk.x as string, ec.publicJwk.x as string]) expect(body.error_description).not.toContain(secretish);
  });
});
