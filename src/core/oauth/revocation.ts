/**
 * @module core/oauth/revocation
 * Token revocation (RFC 7009): a client revokes one of its own access tokens. The client
 * authenticates as at the token endpoint. A token that is not active (bad signature, other
 * issuer, expired, garbage, already revoked) is answered as revoked, since the request's purpose
 * is already achieved (§2.2). An active token issued to another client is refused with
 * `unauthorized_client` (400): only the client a token was issued to may revoke it (§2.1), and
 * the refusal tells the caller its request did nothing. An own active token has its jti stored
 * until the token's `exp`, which is all that is ever stored about a token.
 */
import { authenticateClient, type ClientAuthOptions } from "./client-auth.ts";
import { OAuthError } from "./errors.ts";
import type { TokenRequestParams, TokenStatusDeps } from "./introspection.ts";
import { activeAccessToken, type TokenProject } from "./token-status.ts";

/** Authenticates the caller and revokes `params.token` if it is an active token of the caller; throws OAuthError on refusal. */
export async function revokeAccessToken(
  deps: TokenStatusDeps,
  project: TokenProject,
  authorization: string | null,
  params: TokenRequestParams,
  auth: ClientAuthOptions,
): Promise<void> {
  const client = await authenticateClient(deps, project.projectId, authorization, params, auth);
  const now = deps.clock.now();
  const claims = await activeAccessToken(deps, project, params.token, now);
  if (claims === undefined) return;
  if (claims.client_id !== client.id) {
    throw new OAuthError("unauthorized_client", "The token was issued to another client; a client may revoke only its own tokens.");
  }
  await deps.store.revokeToken(project.projectId, claims.jti, claims.exp * 1000, now);
}
