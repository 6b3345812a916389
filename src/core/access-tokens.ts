/**
 * @module core/access-tokens
 * Issues a signed access token for a client. This is the one path of both the management token
 * route and the OAuth token endpoint, so their tokens cannot differ in claims, signing or the
 * `tokenmint_tokens_issued_total` count. Stateless: nothing is stored.
 */
import type { AppContext } from "../context.ts";
import type { TokenTyp } from "../keys/key-ring.ts";
import type { ClientRecord } from "../store/store.ts";
import { buildAccessTokenClaims, epochSeconds, type AccessTokenClaims } from "./tokens.ts";

/** What issuing needs from the context: keys, metrics and the clock. */
export type TokenIssuer = Pick<AppContext, "keys" | "metrics" | "clock">;

export interface AccessTokenOptions {
  /** The `iss` claim: the project's URL, custom domain, or the host the request came to. */
  issuer: string;
  /** Lifetime in seconds (see tokenLifetime). */
  lifetime: number;
  audienceAsArray: boolean;
  typ: TokenTyp;
}

export interface IssuedAccessToken {
  /** The compact JWS. */
  token: string;
  claims: AccessTokenClaims;
}

/** Builds, signs and counts an access token for `client` with the project's current key. */
export async function issueAccessToken(
  issuer: TokenIssuer,
  projectId: string,
  client: Pick<ClientRecord, "id" | "audience">,
  options: AccessTokenOptions,
): Promise<IssuedAccessToken> {
  const signer = issuer.keys.ring(projectId);
  const claims = buildAccessTokenClaims({
    issuer: options.issuer,
    clientId: client.id,
    audience: client.audience,
    audienceAsArray: options.audienceAsArray,
    iat: epochSeconds(issuer.clock.now()),
    lifetime: options.lifetime,
    jti: crypto.randomUUID(),
  });
  const token = await signer.sign(options.typ, claims);
  issuer.metrics.tokenIssued(signer.alg);
  return { token, claims };
}
