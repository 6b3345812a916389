/** core/access-tokens: the one issuing path builds the claims, signs with the project's key and counts the token. */
import { expect, test } from "bun:test";
import { issueAccessToken, type TokenIssuer } from "../../src/core/access-tokens.ts";

const T0 = Date.UTC(2026, 0, 1);

test("signs the claims of the client with the requested typ, and counts one token by alg", async () => {
  const signed: unknown[] = [];
  const counted: string[] = [];
  const rings: string[] = [];
  const issuer = {
    clock: { now: () => T0 + 1500 },
    keys: {
      ring: (projectId: string) => {
        rings.push(projectId);
        return { alg: "EdDSA", sign: async (typ: string, claims: unknown) => (signed.push({ typ, claims }), "signed.jwt.value") };
      },
    },
    metrics: { tokenIssued: (alg: string) => counted.push(alg) },
  } as unknown as TokenIssuer;

  const issued = await issueAccessToken(issuer, "project-1", { id: "client-1", audience: "urn:api" }, { issuer: "https://tokens.example.test", lifetime: 900, audienceAsArray: true, typ: "JWT" });
  const claims = { iss: "https://tokens.example.test", sub: "client-1", client_id: "client-1", aud: ["urn:api"], iat: T0 / 1000 + 1, exp: T0 / 1000 + 901, jti: expect.any(String) };
  expect(issued).toEqual({ token: "signed.jwt.value", claims });
  expect(signed).toEqual([{ typ: "JWT", claims }]);
  expect(rings).toEqual(["project-1"]);
  expect(counted).toEqual(["EdDSA"]);
});
