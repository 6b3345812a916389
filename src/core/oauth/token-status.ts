/**
 * @module core/oauth/token-status
 * Whether an access token of a project is active now, for introspection (RFC 7662) and
 * revocation (RFC 7009). Two steps: the token must verify against the project's published keys
 * (the key ring's JWKS, so a retired key still verifies until it leaves the JWKS, and a revoked
 * key no longer does), carry an acceptable issuer and not be expired; then it must not be revoked:
 * not by its jti, not by its client's deletion, and not by the client's `tokensRevokedBefore`.
 */
import { createLocalJWKSet, errors, jwtVerify, type JSONWebKeySet, type JWSAlgorithm } from "jose";
import type { KeyRing } from "../../keys/key-ring.ts";
import type { Store } from "../../store/store.ts";
import type { AccessTokenClaims } from "../tokens.ts";

/** The project a token must belong to: its id, the issuers its tokens may carry, and its keys. */
export interface TokenProject {
  projectId: string;
  issuers: readonly string[];
  ring: Pick<KeyRing, "version" | "jwksBody" | "algs">;
}

type LocalJwks = ReturnType<typeof createLocalJWKSet>;

/**
 * The verification key set of each project, built once per key-ring version: a key rotation or
 * revocation makes a new ring version, and the next verification uses the new JWKS.
 */
export class VerificationKeySets {
  readonly #sets = new Map<string, { version: number; jwks: LocalJwks }>();

  /** The key set verifying the tokens of `projectId` under `ring`. */
  of(projectId: string, ring: TokenProject["ring"]): LocalJwks {
    const cached = this.#sets.get(projectId);
    if (cached?.version === ring.version) return cached.jwks;
    const jwks = createLocalJWKSet(JSON.parse(ring.jwksBody) as JSONWebKeySet);
    this.#sets.set(projectId, { version: ring.version, jwks });
    return jwks;
  }
}

const isString = (value: unknown): value is string => typeof value === "string";

/**
 * The claims of `token` if it is a well-formed access token of the project, signed by one of its
 * published keys, from an acceptable issuer and not expired at `now` (epoch ms); otherwise
 * undefined. Says nothing about revocation.
 */
export async function verifiedAccessToken(keySets: VerificationKeySets, project: TokenProject, token: string, now: number): Promise<AccessTokenClaims | undefined> {
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(token, keySets.of(project.projectId, project.ring), {
      issuer: [...project.issuers],
      algorithms: [...project.ring.algs] as JWSAlgorithm[],
      currentDate: new Date(now),
      requiredClaims: ["iss", "sub", "client_id", "aud", "iat", "exp", "jti"],
    }));
  } catch (error) {
    if (error instanceof errors.JOSEError) return undefined;
    throw error;
  }
  const { sub, client_id, aud, jti } = payload;
  if (!isString(sub) || !isString(client_id) || !isString(jti)) return undefined;
  if (!isString(aud) && !(Array.isArray(aud) && aud.every(isString))) return undefined;
  return payload as AccessTokenClaims;
}

/**
 * The claims of `token` if it is active at `now`: verified (verifiedAccessToken), its jti not
 * revoked, its client still in the project, and issued no earlier than the client's
 * `tokensRevokedBefore`. `iat` has second precision, so a token counts as revoked when
 * `iat * 1000 <= tokensRevokedBefore`: every token issued before the cut is caught, and so is one
 * issued later within the same second (a cut on the second's first millisecond included).
 */
export async function activeAccessToken(
  deps: { store: Store; keySets: VerificationKeySets },
  project: TokenProject,
  token: string,
  now: number,
): Promise<AccessTokenClaims | undefined> {
  const claims = await verifiedAccessToken(deps.keySets, project, token, now);
  if (claims === undefined) return undefined;
  if (await deps.store.isTokenRevoked(project.projectId, claims.jti, now)) return undefined;
  const client = await deps.store.getClientById(project.projectId, claims.client_id);
  if (client === undefined) return undefined;
  if (client.tokensRevokedBefore !== undefined && claims.iat * 1000 <= client.tokensRevokedBefore) return undefined;
  return claims;
}
