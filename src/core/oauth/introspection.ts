/**
 * @module core/oauth/introspection
 * Token introspection (RFC 7662): an authenticated client of the project asks whether a token is
 * active. Any client may ask about any token of the project (resource servers are clients too).
 * Client authentication is the token endpoint's; an unauthenticated request learns nothing. Every
 * token that is not active now, whatever the reason, is just `{active: false}` (§2.2).
 */
import type { Clock } from "../../context.ts";
import type { Store } from "../../store/store.ts";
import { authenticateClient, type ClientAuthOptions, type ClientAuthParams } from "./client-auth.ts";
import { activeAccessToken, type TokenProject, type VerificationKeySets } from "./token-status.ts";

/** The recognised parameters of an introspection or revocation request (others are ignored). */
export interface TokenRequestParams extends ClientAuthParams {
  token: string;
  /** A hint about the token's type; every token here is an access token, so it is ignored (RFC 7009 §2.1, RFC 7662 §2.1). */
  token_type_hint?: string;
}

/** The introspection answer (RFC 7662 §2.2): only `active` for an inactive token. */
export type IntrospectionAnswer =
  | { active: false }
  | {
      active: true;
      client_id: string;
      sub: string;
      aud: string | string[];
      iss: string;
      exp: number;
      iat: number;
      jti: string;
      token_type: "Bearer";
    };

/** What introspection and revocation need: the store, the clock and the cached verification keys. */
export interface TokenStatusDeps {
  store: Store;
  clock: Clock;
  keySets: VerificationKeySets;
}

/** Authenticates the caller, then answers whether `params.token` is active in `project`. */
export async function introspectToken(
  deps: TokenStatusDeps,
  project: TokenProject,
  authorization: string | null,
  params: TokenRequestParams,
  auth: ClientAuthOptions,
): Promise<IntrospectionAnswer> {
  await authenticateClient(deps, project.projectId, authorization, params, auth);
  const claims = await activeAccessToken(deps, project, params.token, deps.clock.now());
  if (claims === undefined) return { active: false };
  const { client_id, sub, aud, iss, exp, iat, jti } = claims;
  return { active: true, client_id, sub, aud, iss, exp, iat, jti, token_type: "Bearer" };
}
