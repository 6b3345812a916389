/**
 * POST /oauth/token, client credentials (RFC 6749 §4.4): both client authentication methods, the
 * answer, the JWT (verified with jose against the served JWKS, and the same as the management
 * route's), the audience parameter, the tokens-issued metric, statelessness and the request log.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from "jose";
import type { Store } from "../../src/store/store.ts";
import { buildTestApp, createProviderAndClient, T0, type TestApp } from "../helpers/app.ts";
import { json, mediaType, UUID_RE } from "../http/support.ts";
import { basic, createSecret, expectInvalidClient, expectOAuthError, FORM, tokenRequest } from "./support.ts";

const ISSUER = "https://tokens.example.test";
const AUDIENCE = "https://billing.example.test";
const GRANT = { grant_type: "client_credentials" };

interface TokenAnswer {
  access_token: string;
  token_type: string;
  expires_in: number;
}

describe("token endpoint: client credentials", () => {
  let t: TestApp;
  let providerId: string;
  let clientId: string;
  let secret: string;
  beforeAll(async () => {
    t = await buildTestApp();
    ({ providerId, clientId } = await createProviderAndClient(t, AUDIENCE));
    ({ secret } = await createSecret(t, providerId, clientId));
  });
  afterAll(() => t.close());

  const viaBasic = (params: Record<string, string> = GRANT) => tokenRequest(t, params, { authorization: basic(clientId, secret) });
  const viaPost = (params: Record<string, string> = GRANT) => tokenRequest(t, { ...params, client_id: clientId, client_secret: secret });
  const answer = async (res: Response): Promise<TokenAnswer> => {
    expect({ status: res.status, body: res.status === 200 ? "" : await res.clone().text() }).toEqual({ status: 200, body: "" });
    return json<TokenAnswer>(res);
  };
  const verify = async (token: string) => {
    const jwks = await json<JSONWebKeySet>(await t.request("GET", "/.well-known/jwks"));
    return jwtVerify(token, createLocalJWKSet(jwks), { issuer: ISSUER, audience: AUDIENCE, typ: "at+jwt", currentDate: new Date(t.clock.now()) });
  };

  for (const [method, send] of [
    ["client_secret_basic", () => viaBasic()],
    ["client_secret_post", () => viaPost()],
  ] as const) {
    test(`${method}: 200 {access_token, token_type: "Bearer", expires_in: 3600}, not cached`, async () => {
      const res = await send();
      expect(res.status).toBe(200);
      expect(mediaType(res)).toBe("application/json");
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(res.headers.get("pragma")).toBe("no-cache");
      const body = await answer(res);
      expect(Object.keys(body).sort()).toEqual(["access_token", "expires_in", "token_type"]);
      expect(body.token_type).toBe("Bearer");
      expect(body.expires_in).toBe(3600);
    });

    test(`${method}: the JWT verifies against the served JWKS with the client's claims`, async () => {
      const { access_token, expires_in } = await answer(await send());
      const { payload, protectedHeader } = await verify(access_token);
      expect(protectedHeader).toEqual({ alg: "ES256", kid: t.ctx.keys.ring(t.ctx.projectId).kid, typ: "at+jwt" });
      expect(payload).toEqual({
        iss: ISSUER,
        sub: clientId,
        client_id: clientId,
        aud: AUDIENCE,
        iat: T0 / 1000,
        exp: T0 / 1000 + expires_in,
        jti: expect.stringMatching(UUID_RE),
      });
    });
  }

  test("the token has the same header and claim set as the management route's default token", async () => {
    const rest = await json<{ accessToken: string }>(await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`));
    const { access_token } = await answer(await viaBasic());
    expect(decodeProtectedHeader(access_token)).toEqual(decodeProtectedHeader(rest.accessToken));
    const { jti: a, ...oauthClaims } = decodeJwt(access_token);
    const { jti: b, ...restClaims } = decodeJwt(rest.accessToken);
    expect(oauthClaims).toEqual(restClaims);
    expect(a).not.toBe(b);
  });

  test("iat follows the clock and exp = iat + expires_in", async () => {
    t.clock.advance(42);
    try {
      const { access_token, expires_in } = await answer(await viaPost());
      const claims = decodeJwt(access_token);
      expect(claims.iat).toBe(T0 / 1000 + 42);
      expect(claims.exp).toBe((claims.iat as number) + expires_in);
    } finally {
      t.clock.advance(-42);
    }
  });

  test("Basic: the scheme is case-insensitive and the credentials are form-urlencoded", async () => {
    const lower = `basic ${Buffer.from(`${clientId}:${secret}`).toString("base64")}`;
    await answer(await tokenRequest(t, GRANT, { authorization: lower }));
    // Every character percent-encoded still decodes to the same id and secret.
    const encode = (s: string) => [...s].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`).join("");
    const encoded = `Basic ${Buffer.from(`${encode(clientId)}:${encode(secret)}`).toString("base64")}`;
    await answer(await tokenRequest(t, GRANT, { authorization: encoded }));
  });

  test("Basic with the same client_id repeated in the body is fine; another client_id is invalid_request", async () => {
    await answer(await viaBasic({ ...GRANT, client_id: clientId }));
    const other = await createProviderAndClient(t, AUDIENCE);
    await expectOAuthError(await viaBasic({ ...GRANT, client_id: other.clientId }), 400, "invalid_request", "client_id");
  });

  test("audience equal to the client's → 200; any other → 400 invalid_target; empty counts as absent", async () => {
    const { access_token } = await answer(await viaPost({ ...GRANT, audience: AUDIENCE }));
    expect(decodeJwt(access_token).aud).toBe(AUDIENCE);
    await answer(await viaBasic({ ...GRANT, audience: "" }));
    for (const audience of ["https://other.example.test", `${AUDIENCE}/`, AUDIENCE.toUpperCase(), ` ${AUDIENCE}`]) {
      await expectOAuthError(await viaBasic({ ...GRANT, audience }), 400, "invalid_target", "audience");
      await expectOAuthError(await viaPost({ ...GRANT, audience }), 400, "invalid_target", "audience");
    }
  });

  test("audience and resource may be repeated (RFC 8693, RFC 8707): each value must be the client's audience", async () => {
    const form = (name: string, values: string[]) => `grant_type=client_credentials${values.map((v) => `&${name}=${encodeURIComponent(v)}`).join("")}`;
    for (const name of ["audience", "resource"]) {
      const { access_token } = await answer(await tokenRequest(t, form(name, [AUDIENCE, AUDIENCE]), { authorization: basic(clientId, secret) }));
      expect(decodeJwt(access_token).aud).toBe(AUDIENCE);
      for (const values of [[AUDIENCE, "https://other.example.test"], ["https://other.example.test", AUDIENCE]]) {
        await expectOAuthError(await tokenRequest(t, form(name, values), { authorization: basic(clientId, secret) }), 400, "invalid_target", name);
      }
    }
  });

  test("resource (RFC 8707) must be the client's audience, as audience must; a scope is refused, never ignored", async () => {
    await answer(await viaBasic({ ...GRANT, resource: AUDIENCE }));
    const wrong = await viaBasic({ ...GRANT, resource: "https://evil.example" });
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { error: string; error_description: string }).error).toBe("invalid_target");
    for (const scope of ["read write", "admin"]) {
      const res = await viaBasic({ ...GRANT, scope });
      expect(res.status).toBe(400);
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(((await res.json()) as { error: string }).error).toBe("invalid_scope");
    }
  });

  test("a resource that is not an absolute URI without a fragment is invalid_target (RFC 8707), even where it is the audience; audience takes any text", async () => {
    for (const audience of ["billing service", "https://api.example.test/#part"]) {
      const other = await createProviderAndClient(t, audience);
      const { secret: otherSecret } = await createSecret(t, other.providerId, other.clientId);
      const auth = { authorization: basic(other.clientId, otherSecret) };
      await expectOAuthError(await tokenRequest(t, { ...GRANT, resource: audience }, auth), 400, "invalid_target", "absolute URI");
      expect(decodeJwt((await answer(await tokenRequest(t, { ...GRANT, audience }, auth))).access_token).aud).toBe(audience);
    }
    // A URN is an absolute URI.
    const urn = await createProviderAndClient(t, "urn:billing");
    const { secret: urnSecret } = await createSecret(t, urn.providerId, urn.clientId);
    await answer(await tokenRequest(t, { ...GRANT, resource: "urn:billing" }, { authorization: basic(urn.clientId, urnSecret) }));
  });

  test("a form body with a content coding is invalid_request, and no token is issued", async () => {
    const res = await tokenRequest(t, GRANT, { authorization: basic(clientId, secret), "content-encoding": "x-custom" });
    await expectOAuthError(res, 400, "invalid_request", "Content-Encoding");
  });

  test("unrecognised parameters are ignored, and a charset on the content type is accepted", async () => {
    await answer(await viaBasic({ ...GRANT, foo: "bar" }));
    const res = await t.request("POST", "/oauth/token", "grant_type=client_credentials&foo=1&foo=2&__proto__=x&constructor=y", {
      "content-type": "application/x-www-form-urlencoded; charset=UTF-8",
      authorization: basic(clientId, secret),
    });
    await answer(res);
    expect(({} as Record<string, unknown>).foo).toBeUndefined();
  });

  test("a client of another provider authenticates with its own secret only", async () => {
    const other = await createProviderAndClient(t, "https://other.example.test");
    const otherSecret = await createSecret(t, other.providerId, other.clientId);
    const { access_token } = await answer(await tokenRequest(t, GRANT, { authorization: basic(other.clientId, otherSecret.secret) }));
    expect(decodeJwt(access_token)).toMatchObject({ sub: other.clientId, aud: "https://other.example.test" });
    await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: basic(other.clientId, secret) }));
    await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: basic(clientId, otherSecret.secret) }));
  });

  test("each OAuth token counts in tokenmint_tokens_issued_total{alg}", async () => {
    const count = async () => Number(/^tokenmint_tokens_issued_total\{alg="ES256"\} (\d+)$/m.exec(await t.metrics())?.[1] ?? 0);
    const before = await count();
    await answer(await viaBasic());
    await answer(await viaPost());
    await expectInvalidClient(await tokenRequest(t, GRANT, { authorization: basic(clientId, `${secret}x`) }));
    expect(await count()).toBe(before + 2);
  });

  test("the JSON answer is the same via a form body sent as bytes", async () => {
    const body = new TextEncoder().encode(new URLSearchParams({ ...GRANT, client_id: clientId, client_secret: secret }).toString());
    await answer(await t.app.handle(new Request("http://localhost/oauth/token", { method: "POST", body, headers: FORM })));
  });
});

/** Names of the Store methods that write. */
const WRITES = /^(create|update|delete|swap)|^(init|set)Meta$/;

describe("token endpoint: stateless and quiet", () => {
  test("20 token requests call no write method of the store", async () => {
    const t = await buildTestApp();
    try {
      const { providerId, clientId } = await createProviderAndClient(t, AUDIENCE);
      const { secret } = await createSecret(t, providerId, clientId);
      const calls: string[] = [];
      const store = t.ctx.store as unknown as Record<string, (...args: unknown[]) => unknown>;
      const names = Object.getOwnPropertyNames(Object.getPrototypeOf(t.ctx.store) as object).filter((n) => WRITES.test(n));
      expect(names).toContain("createClientSecret");
      for (const name of names) {
        const original = store[name] as (...args: unknown[]) => unknown;
        store[name] = (...args: unknown[]) => {
          calls.push(name);
          return original.apply(t.ctx.store as Store, args);
        };
      }
      for (let i = 0; i < 20; i++) {
        const res = await tokenRequest(t, { ...GRANT, client_id: clientId, client_secret: secret });
        expect(res.status).toBe(200);
      }
      expect(calls).toEqual([]);
    } finally {
      await t.close();
    }
  });

  test("each request logs method, route pattern, status and duration, and never ids, secrets or tokens", async () => {
    const logLines: string[] = [];
    const t = await buildTestApp({ logLines });
    try {
      const { providerId, clientId } = await createProviderAndClient(t, AUDIENCE);
      const { secret } = await createSecret(t, providerId, clientId);
      // Elysia writes a request's line just after its answer.
      const settle = () => new Promise((resolve) => setImmediate(resolve));
      await settle();
      logLines.length = 0;
      const ok = await json<TokenAnswer>(await tokenRequest(t, GRANT, { authorization: basic(clientId, secret) }));
      expect((await tokenRequest(t, { ...GRANT, client_id: clientId, client_secret: `${secret}x` })).status).toBe(401);
      await settle();
      const entries = logLines.map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(entries.map(({ msg, level, method, route, status }) => ({ msg, level, method, route, status }))).toEqual([
        { msg: "request", level: "info", method: "POST", route: "/oauth/token", status: 200 },
        { msg: "request", level: "info", method: "POST", route: "/oauth/token", status: 401 },
      ]);
      for (const entry of entries) expect(typeof entry.durationMs).toBe("number");
      const text = logLines.join("\n");
      for (const value of [clientId, secret, secret.slice(4), ok.access_token, ...ok.access_token.split("."), "Basic", AUDIENCE]) {
        expect(text).not.toContain(value);
      }
    } finally {
      await t.close();
    }
  });
});
