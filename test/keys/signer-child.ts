/**
 * A child process for signers.test.ts: builds a full RS256 service in a temp directory, issues a
 * token through the API and verifies it against the served JWKS, then prints one JSON line
 * {signer, signersLog, verified}. Run it under conditions the parent sets (e.g. BUN_JSC_useJIT=0).
 * Usage: bun signer-child.ts
 */
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { buildTestApp, createProviderAndClient } from "../helpers/app.ts";

const logLines: string[] = [];
const t = await buildTestApp({ alg: "RS256", logLines });
try {
  const { providerId, clientId } = await createProviderAndClient(t);
  const issued = (await (await t.api("POST", `/v1/providers/${providerId}/clients/${clientId}/tokens`, {})).json()) as { accessToken: string };
  const jwks = (await (await t.request("GET", "/.well-known/jwks")).json()) as JSONWebKeySet;
  const { payload } = await jwtVerify(issued.accessToken, createLocalJWKSet(jwks), { issuer: "https://tokens.example.test", currentDate: new Date(t.clock.now()) });
  const signersLog = logLines.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => entry.msg === "signers");
  console.log(JSON.stringify({ signer: t.ctx.keys.ring(t.ctx.projectId).signerKind, signersLog, verified: payload.sub === clientId }));
} finally {
  await t.close();
}
