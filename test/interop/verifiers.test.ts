/**
 * CONTRACT §2/§4 with the libraries users bring: for every signing algorithm, tokens from the
 * management route and from /oauth/token (each client authentication method) verify with jose,
 * jsonwebtoken + jwks-rsa and fast-jwt + get-jwks, each fetching discovery and the JWKS over HTTP;
 * and each library refuses a tampered token, a token signed by a foreign key under the real kid,
 * the wrong audience, the wrong issuer and an expired token. Where a library cannot verify an
 * algorithm, the test pins how it refuses.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { decodeJwt } from "jose";
import jsonwebtoken from "jsonwebtoken";
import { JwksClient } from "jwks-rsa";
import { UUID_RE } from "../http/support.ts";
import {
  ALGS,
  type Expectations,
  foreignToken,
  managementToken,
  refusal,
  startInteropServer,
  tamperedToken,
  TOKEN_SOURCES,
  type VerifiedToken,
  VERIFIERS,
  type InteropServer,
} from "./support.ts";

for (const alg of ALGS) {
  describe(`${alg}: tokens verify with the libraries users bring`, () => {
    let s: InteropServer;
    let expected: Expectations;
    const verifyWith = new Map<string, (token: string, expectations: Expectations) => Promise<VerifiedToken>>();
    beforeAll(async () => {
      s = await startInteropServer(alg);
      expected = { issuer: s.issuer, audience: s.audience };
      for (const verifier of VERIFIERS) verifyWith.set(verifier.name, verifier.build(s));
    });
    afterAll(() => s.close());
    const verify = (name: string, token: string, expectations: Partial<Expectations> = {}) =>
      (verifyWith.get(name) as (token: string, expectations: Expectations) => Promise<VerifiedToken>)(token, { ...expected, ...expectations });

    test("discovery names this server as issuer, its JWKS and the signing algorithm", async () => {
      const doc = (await (await fetch(`${s.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
      expect(doc.issuer).toBe(s.issuer);
      expect(doc.jwks_uri).toBe(`${s.issuer}/.well-known/jwks`);
      expect(doc.token_endpoint).toBe(`${s.issuer}/oauth/token`);
      // RS256 is listed whatever the keys: OpenID Connect Discovery 1.0 §3 requires it.
      expect(doc.id_token_signing_alg_values_supported).toEqual(alg === "RS256" ? ["RS256"] : [alg, "RS256"]);
    });

    for (const source of TOKEN_SOURCES) {
      for (const verifier of VERIFIERS.filter((v) => v.algs.includes(alg))) {
        test(`${source.name} → ${verifier.name}`, async () => {
          const token = await source.issue(s);
          const { header, payload } = await verify(verifier.name, token);
          expect(header).toEqual({ alg, kid: s.t.ctx.keys.ring(s.t.ctx.projectId).kid, typ: "at+jwt" });
          const iat = Math.floor(s.t.clock.now() / 1000);
          expect(payload).toEqual({
            iss: s.issuer,
            sub: s.clientId,
            client_id: s.clientId,
            aud: s.audience,
            iat,
            exp: iat + 3600,
            jti: expect.stringMatching(UUID_RE),
          });
        });
      }
    }

    for (const verifier of VERIFIERS.filter((v) => v.algs.includes(alg))) {
      describe(`${verifier.name} refuses`, () => {
        let token: string;
        beforeAll(async () => {
          token = await managementToken(s);
          // The controls below only mean something if the genuine token passes.
          await verify(verifier.name, token);
        });

        test("a tampered payload (signature kept)", async () => {
          const forged = tamperedToken(token, { sub: "00000000-0000-7000-8000-000000000000", client_id: "00000000-0000-7000-8000-000000000000" });
          expect(await refusal(verifier, verify(verifier.name, forged))).toBe("signature");
        });

        test("a token signed by a foreign key under the real kid and alg", async () => {
          const forged = await foreignToken(token);
          expect(await refusal(verifier, verify(verifier.name, forged))).toBe("signature");
        });

        test("the wrong audience", async () => {
          expect(await refusal(verifier, verify(verifier.name, token, { audience: "https://other.example.test" }))).toBe("audience");
        });

        test("the wrong issuer", async () => {
          expect(await refusal(verifier, verify(verifier.name, token, { issuer: "https://evil.example.test" }))).toBe("issuer");
        });

        test("an expired token (the verifier's clock one second past its exp)", async () => {
          // Past exp, not at it: fast-jwt still accepts a token in the very millisecond of its exp
          // (RFC 7519 has it expire then), which an hour on from a whole-second clock would hit.
          const now = new Date((decodeJwt(token).exp as number) * 1000 + 1000);
          expect(await refusal(verifier, verify(verifier.name, token, { now }))).toBe("expired");
        });
      });
    }

    for (const verifier of VERIFIERS.filter((v) => !v.algs.includes(alg))) {
      test(`${verifier.name} cannot verify ${alg}: it refuses a genuine token as unsupported`, async () => {
        const token = await managementToken(s);
        expect(await refusal(verifier, verify(verifier.name, token))).toBe("unsupported");
      });
    }

    if (alg === "EdDSA") {
      test("jsonwebtoken has no EdDSA at all: jwks-rsa finds the Ed25519 key, jsonwebtoken refuses it even with allowInvalidAsymmetricKeyTypes", async () => {
        const token = await managementToken(s);
        const jwks = (await (await fetch(`${s.issuer}/.well-known/jwks`)).json()) as { keys: { kid: string; kty: string; crv: string }[] };
        const kid = jwks.keys[0]?.kid as string;
        const key = await new JwksClient({ jwksUri: `${s.issuer}/.well-known/jwks` }).getSigningKey(kid);
        expect(key.getPublicKey()).toContain("BEGIN PUBLIC KEY");
        const options = { algorithms: ["EdDSA" as jsonwebtoken.Algorithm], issuer: s.issuer, audience: s.audience };
        expect(() => jsonwebtoken.verify(token, key.getPublicKey(), options)).toThrow('Unknown key type "ed25519".');
        expect(() => jsonwebtoken.verify(token, key.getPublicKey(), { ...options, allowInvalidAsymmetricKeyTypes: true })).toThrow(
          '"EdDSA" is not a valid algorithm.',
        );
      });
    }
  });
}
