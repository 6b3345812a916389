/**
 * @module core/tokens
 * Access-token rules as small pure functions: the lifetime a request asks for, and the claims
 * of the token. No clock, no I/O: `now` and `jti` come in as arguments. Signing is keys/'s job.
 */

/** Lifetime when a request omits `expiresIn` or sends 0, in seconds. */
export const DEFAULT_TOKEN_LIFETIME_S = 3600;

/**
 * The lifetime to issue for a requested `expiresIn` (already validated to 0..172800): omitted or
 * 0 means the project's default lifetime.
 */
export const tokenLifetime = (expiresIn: number | undefined, defaultLifetime = DEFAULT_TOKEN_LIFETIME_S): number =>
  expiresIn === undefined || expiresIn === 0 ? defaultLifetime : expiresIn;

export interface AccessTokenInput {
  issuer: string;
  clientId: string;
  audience: string;
  audienceAsArray: boolean;
  /** Issue time, seconds since the epoch. */
  iat: number;
  lifetime: number;
  jti: string;
}

/** The JWT claims set of an access token (RFC 9068 profile). */
export interface AccessTokenClaims {
  [claim: string]: unknown;
  iss: string;
  sub: string;
  client_id: string;
  aud: string | string[];
  iat: number;
  exp: number;
  jti: string;
}

/** Builds the claims of an access token for a client. */
export function buildAccessTokenClaims(input: AccessTokenInput): AccessTokenClaims {
  return {
    iss: input.issuer,
    sub: input.clientId,
    client_id: input.clientId,
    aud: input.audienceAsArray ? [input.audience] : input.audience,
    iat: input.iat,
    exp: input.iat + input.lifetime,
    jti: input.jti,
  };
}

/** Seconds since the epoch for an epoch-ms instant. */
export const epochSeconds = (ms: number) => Math.floor(ms / 1000);
