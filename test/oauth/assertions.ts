/**
 * Helpers of the private_key_jwt tests: client key pairs, client assertions signed with jose (the
 * claims a client sends by default, any of them replaced or left out), key registration through
 * the API and token requests that carry an assertion.
 */
import { expect } from "bun:test";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from "jose";
import type { TestApp } from "../helpers/app.ts";
import { tokenRequest } from "./support.ts";

export const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/** The issuer of buildTestApp. */
export const ISSUER = "https://tokens.example.test";
export const TOKEN_ENDPOINT = `${ISSUER}/oauth/token`;

/** A client's key pair: the private key signs assertions, the public JWK is registered. */
export interface ClientKey {
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

/** A fresh key pair for `alg`, its public JWK with `kid` when given. */
export async function clientKey(alg: string, kid?: string): Promise<ClientKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  return { alg, privateKey, publicJwk: kid === undefined ? publicJwk : { ...publicJwk, kid } };
}

export interface AssertionOptions {
  /** Claims to replace; `undefined` leaves a claim out. */
  claims?: Record<string, unknown>;
  /** Header parameters to replace (alg included); `kid: undefined` leaves it out. */
  header?: Record<string, unknown>;
}

/**
 * A client assertion as a client sends it: iss = sub = client id, aud the token endpoint,
 * iat = now, exp = now + 60 s, a fresh jti, and the key's kid in the header.
 */
export function signAssertion(t: TestApp, key: ClientKey, clientId: string, options: AssertionOptions = {}): Promise<string> {
  const now = Math.floor(t.clock.now() / 1000);
  const claims: Record<string, unknown> = { iss: clientId, sub: clientId, aud: TOKEN_ENDPOINT, iat: now, exp: now + 60, jti: crypto.randomUUID(), ...options.claims };
  const header: Record<string, unknown> = { alg: key.alg, kid: key.publicJwk.kid, ...options.header };
  const defined = (record: Record<string, unknown>) => Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined));
  return new SignJWT(defined(claims) as JWTPayload).setProtectedHeader(defined(header) as { alg: string }).sign(key.privateKey);
}

/** PUT .../jwks through the API; expects 200 and returns the stored set. */
export async function registerKeys(t: TestApp, providerId: string, clientId: string, keys: unknown[]): Promise<{ keys: Record<string, string>[] }> {
  const res = await t.api("PUT", `/v1/providers/${providerId}/clients/${clientId}/jwks`, { keys });
  expect({ status: res.status, body: res.status === 200 ? "" : await res.clone().text() }).toEqual({ status: 200, body: "" });
  return (await res.json()) as { keys: Record<string, string>[] };
}

/** POST /oauth/token, client credentials, authenticated by `assertion` (plus any `extra` parameters). */
export const assertionRequest = (t: TestApp, assertion: string, extra: Record<string, string> = {}, headers: Record<string, string> = {}) =>
  tokenRequest(t, { grant_type: "client_credentials", client_assertion_type: JWT_BEARER, client_assertion: assertion, ...extra }, headers);
