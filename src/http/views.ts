/**
 * @module http/views
 * Records to wire shapes: each copies exactly the fields its response schema lists (timestamps
 * as ISO 8601 UTC). With response validation strict, a field added here by mistake fails closed.
 */
import type { ResolvedProject } from "../core/projects.ts";
import type { KeyView } from "../keys/key-service.ts";
import type { ClientJwk, ClientJwks } from "../schemas/client-jwks.ts";
import type { ClientSecretInfo } from "../schemas/client-secrets.ts";
import type { Client } from "../schemas/clients.ts";
import type { KeyInfo } from "../schemas/keys.ts";
import type { Project } from "../schemas/projects.ts";
import type { Provider } from "../schemas/providers.ts";
import type { ClientJwksRecord, ClientRecord, ClientSecretRecord, ProviderRecord } from "../store/store.ts";

export const isoTime = (ms: number) => new Date(ms).toISOString();
export const providerView = (p: ProviderRecord): Provider => ({ id: p.id, name: p.name, description: p.description, createdAt: isoTime(p.createdAt) });

export function clientView(c: ClientRecord): Client {
  const view: Client = { id: c.id, providerId: c.providerId, name: c.name, audience: c.audience, createdAt: isoTime(c.createdAt) };
  if (c.tokensRevokedBefore !== undefined) view.tokensRevokedBefore = isoTime(c.tokensRevokedBefore);
  return view;
}

/** A secret's public metadata: never the secret, never its hash. */
export const clientSecretView = (s: ClientSecretRecord): ClientSecretInfo => ({ id: s.id, lastFour: s.lastFour, createdAt: isoTime(s.createdAt) });

/** The members a client public key may show (schemas/client-jwks.ts ClientJwk). */
const CLIENT_JWK_MEMBERS = ["kty", "kid", "use", "alg", "n", "e", "crv", "x", "y"] as const;

/** A client's public keys as a JWK Set, each key copied member by member (never a private one). */
export const clientJwksView = (r: ClientJwksRecord): ClientJwks => ({
  keys: r.keys.map((key) => Object.fromEntries(CLIENT_JWK_MEMBERS.filter((m) => key[m] !== undefined).map((m) => [m, key[m]])) as ClientJwk),
});

export function keyView(k: KeyView): KeyInfo {
  const view: KeyInfo = { kid: k.kid, alg: k.alg, state: k.state, createdAt: isoTime(k.createdAt) };
  if (k.activatesAt !== undefined) view.activatesAt = isoTime(k.activatesAt);
  if (k.retiredAt !== undefined) view.retiredAt = isoTime(k.retiredAt);
  if (k.removedFromJwksAt !== undefined) view.removedFromJwksAt = isoTime(k.removedFromJwksAt);
  return view;
}

export const projectView = (p: ResolvedProject): Project => ({
  id: p.id,
  name: p.name,
  slug: p.slug,
  url: p.url,
  customDomain: p.customDomain ?? null,
  issuer: p.issuer,
  signingAlg: p.signingAlg,
  keyRotationPeriod: p.keyRotationPeriod,
  defaultTokenLifetime: p.defaultTokenLifetime,
  createdAt: isoTime(p.createdAt),
  updatedAt: isoTime(p.updatedAt),
});
