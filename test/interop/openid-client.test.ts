/**
 * openid-client (v6), the usual Node.js OAuth client: discovery at the issuer, the client
 * credentials grant with client_secret_basic, client_secret_post and private_key_jwt, what it sends and accepts
 * on the wire (RFC 6749 §2.3.1, §4.4.2, §5.1, §5.2), and the token it gets verified by every
 * verifier library that knows the algorithm.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJwt, generateKeyPair } from "jose";
import * as oidc from "openid-client";
import {
  ALGS,
  type Exchange,
  type InteropServer,
  OPENID_CLIENT_AUTH,
  openidClientConfig,
  startInteropServer,
  type TokenEndpointAnswer,
  VERIFIERS,
} from "./support.ts";

/** The client id and secret of an `Authorization: Basic` header, form-decoded (RFC 6749 §2.3.1). */
function basicCredentials(header: string | null): [string, string] {
  const decoded = atob((header ?? "").replace(/^Basic /, ""));
  const colon = decoded.indexOf(":");
  const form = (value: string) => decodeURIComponent(value.replaceAll("+", " "));
  return [form(decoded.slice(0, colon)), form(decoded.slice(colon + 1))];
}

/** What each method must put on the wire, and must not. */
const SENDS: Record<string, (s: InteropServer, exchange: Exchange, body: URLSearchParams) => void> = {
  client_secret_basic: (s, exchange, body) => {
    expect(basicCredentials(exchange.headers.get("authorization"))).toEqual([s.clientId, s.secret]);
    expect(body.has("client_secret")).toBe(false);
  },
  client_secret_post: (s, exchange, body) => {
    expect(exchange.headers.has("authorization")).toBe(false);
    expect(body.get("client_id")).toBe(s.clientId);
    expect(body.get("client_secret")).toBe(s.secret);
  },
  private_key_jwt: (s, exchange, body) => {
    expect(exchange.headers.has("authorization")).toBe(false);
    expect(body.has("client_secret")).toBe(false);
    expect(body.get("client_assertion_type")).toBe("urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
    const assertion = decodeJwt(body.get("client_assertion") as string);
    expect({ iss: assertion.iss, sub: assertion.sub }).toEqual({ iss: s.clientId, sub: s.clientId });
    expect(typeof assertion.jti).toBe("string");
  },
};

for (const alg of ALGS) {
  describe(`${alg}: openid-client`, () => {
    let s: InteropServer;
    beforeAll(async () => {
      s = await startInteropServer(alg);
    });
    afterAll(() => s.close());

    test("discovery() at the issuer (http on loopback with allowInsecureRequests) finds the token endpoint and both methods", async () => {
      const config = await openidClientConfig(s, "client_secret_basic");
      const metadata = config.serverMetadata();
      expect(metadata.issuer).toBe(s.issuer);
      expect(metadata.token_endpoint).toBe(`${s.issuer}/oauth/token`);
      expect(metadata.jwks_uri).toBe(`${s.issuer}/.well-known/jwks`);
      expect(metadata.grant_types_supported).toContain("client_credentials");
      expect(metadata.token_endpoint_auth_methods_supported).toEqual(expect.arrayContaining(Object.keys(OPENID_CLIENT_AUTH)));
    });

    test("without allowInsecureRequests it refuses the http issuer, so the https note in the README is real", async () => {
      const refused = oidc.discovery(new URL(s.issuer), s.clientId, s.secret);
      await expect(refused).rejects.toThrow("only requests to HTTPS are allowed");
    });

    for (const method of Object.keys(OPENID_CLIENT_AUTH)) {
      describe(method, () => {
        test("clientCredentialsGrant: sends RFC 6749 §4.4.2, gets §5.1 (Bearer, expires_in), and the token verifies everywhere", async () => {
          const exchanges: Exchange[] = [];
          const config = await openidClientConfig(s, method, exchanges);
          const tokens = await oidc.clientCredentialsGrant(config);

          const exchange = exchanges.find((e) => e.url === `${s.issuer}/oauth/token`) as Exchange;
          expect(exchange.method).toBe("POST");
          expect(exchange.headers.get("content-type")).toStartWith("application/x-www-form-urlencoded");
          const body = new URLSearchParams(exchange.body);
          expect(body.get("grant_type")).toBe("client_credentials");
          (SENDS[method] as (typeof SENDS)[string])(s, exchange, body);

          expect(exchange.response.status).toBe(200);
          expect(exchange.response.headers.get("cache-control")).toBe("no-store");
          const raw = (await exchange.response.json()) as TokenEndpointAnswer;
          expect(raw).toEqual({ access_token: tokens.access_token, token_type: "Bearer", expires_in: 3600 });

          // openid-client lower-cases token_type (it compares case-insensitively, RFC 6749 §5.1).
          expect(tokens.token_type).toBe("bearer");
          expect(tokens.expires_in).toBe(3600);

          for (const verifier of VERIFIERS.filter((v) => v.algs.includes(alg))) {
            const { payload } = await verifier.build(s)(tokens.access_token, { issuer: s.issuer, audience: s.audience });
            expect({ verifier: verifier.name, sub: payload.sub, aud: payload.aud }).toEqual({ verifier: verifier.name, sub: s.clientId, aud: s.audience });
          }
        });

        test("tokenIntrospection and tokenRevocation (RFC 7662, RFC 7009) from discovery: active, then revoked, as openid-client reads them", async () => {
          const exchanges: Exchange[] = [];
          const config = await openidClientConfig(s, method, exchanges);
          const metadata = config.serverMetadata();
          expect(metadata.introspection_endpoint).toBe(`${s.issuer}/oauth/introspect`);
          expect(metadata.revocation_endpoint).toBe(`${s.issuer}/oauth/revoke`);
          const { access_token: token } = await oidc.clientCredentialsGrant(config);

          const active = await oidc.tokenIntrospection(config, token);
          expect(active).toMatchObject({ active: true, client_id: s.clientId, sub: s.clientId, aud: s.audience, iss: s.issuer, token_type: "Bearer" });
          expect(typeof active.exp).toBe("number");
          await oidc.tokenRevocation(config, token, { token_type_hint: "access_token" });
          expect((await oidc.tokenIntrospection(config, token)).active).toBe(false);
          const revoke = exchanges.find((e) => e.url === `${s.issuer}/oauth/revoke`) as Exchange;
          expect(new URLSearchParams(revoke.body).get("token")).toBe(token);
          (SENDS[method] as (typeof SENDS)[string])(s, revoke, new URLSearchParams(revoke.body));
          // RFC 7009 §2.2: revoking what is no longer an active token still succeeds.
          await oidc.tokenRevocation(config, token);
          await oidc.tokenRevocation(config, "not-a-token");
          // RFC 7662 §2.2: anything else is just inactive.
          expect(await oidc.tokenIntrospection(config, "not-a-token")).toEqual({ active: false });
        });

        test("the audience parameter, equal to the client's, is accepted", async () => {
          const config = await openidClientConfig(s, method);
          const tokens = await oidc.clientCredentialsGrant(config, { audience: s.audience });
          expect(tokens.token_type).toBe("bearer");
        });

        test("wrong credentials (secret or key): the 401 Basic challenge and the RFC 6749 §5.2 invalid_client body, as openid-client reports them", async () => {
          const foreignKey = (await generateKeyPair("ES256")).privateKey;
          const config = await openidClientConfig({ ...s, secret: `${s.secret}x`, clientKey: foreignKey }, method);
          const error = await oidc.clientCredentialsGrant(config).then(
            () => undefined,
            (e: unknown) => e,
          );
          // openid-client reports a WWW-Authenticate challenge before the body; the body is still there.
          expect(error).toBeInstanceOf(oidc.WWWAuthenticateChallengeError);
          const challenge = error as oidc.WWWAuthenticateChallengeError;
          expect(challenge.status).toBe(401);
          expect(challenge.cause.map((c) => [c.scheme, c.parameters.realm])).toEqual([["basic", "tokenmint"]]);
          const body = (await challenge.response.json()) as Record<string, unknown>;
          expect(body).toEqual({ error: "invalid_client", error_description: expect.any(String) });
        });
      });
    }
  });
}
