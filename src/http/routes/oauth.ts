/**
 * @module http/routes/oauth
 * The OAuth 2.0 endpoints: token (RFC 6749 §4.4, client credentials), introspection (RFC 7662)
 * and revocation (RFC 7009). Public: the client authenticates with its own secret, not an API
 * key, or with a signed assertion (private_key_jwt). The body is form-encoded (body-parser.ts) and every error is `{error, error_description}`
 * (error-handler.ts), both by the /oauth/ prefix. No answer is ever cached.
 * The `Host` header picks the project, like discovery: a token issued here carries the issuer of
 * the host it was asked at, so it matches the discovery document a verifier read there.
 * Introspection and revocation accept the project's tokens of either of its hosts.
 */
import type { ClientAuthOptions } from "../../core/oauth/client-auth.ts";
import { clientCredentialsToken } from "../../core/oauth/client-credentials.ts";
import { introspectToken } from "../../core/oauth/introspection.ts";
import { revokeAccessToken } from "../../core/oauth/revocation.ts";
import { VerificationKeySets, type TokenProject } from "../../core/oauth/token-status.ts";
import type { ResolvedProject } from "../../core/projects.ts";
import type { HostMatch } from "../../core/project-directory.ts";
import type { AppContext } from "../../context.ts";
import { OAuthIntrospectionResponse, OAuthTokenRequest, OAuthTokenResponse, OAuthTokenStatusRequest } from "../../schemas/oauth.ts";
import { NO_STORE_HEADERS, requestHost, type RouteDef } from "../route.ts";

/** Path of the token endpoint, below the issuer. */
export const TOKEN_ENDPOINT_PATH = "/oauth/token";
/** Path of the introspection endpoint (RFC 7662), below the issuer. */
export const INTROSPECTION_ENDPOINT_PATH = "/oauth/introspect";
/** Path of the revocation endpoint (RFC 7009), below the issuer. */
export const REVOCATION_ENDPOINT_PATH = "/oauth/revoke";

const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" };

/** What each OAuth endpoint of a host accepts from a client. */
interface HostAuth {
  token: ClientAuthOptions;
  introspection: ClientAuthOptions;
  revocation: ClientAuthOptions;
}

/**
 * The `aud` a private_key_jwt assertion sent to the endpoints of `url` (the host the request came
 * to) may carry: the issuer or the token endpoint (RFC 7523 §3, OpenID Connect Core §9), and at
 * introspection and revocation also that endpoint's own URL. The token endpoint is accepted
 * there because clients send it for every endpoint; another endpoint's URL is refused, so an
 * assertion made for one is no key to the others.
 */
const hostAuth = (url: string): HostAuth => {
  const base = [url, `${url}${TOKEN_ENDPOINT_PATH}`];
  return {
    token: { assertionAudiences: base },
    introspection: { assertionAudiences: [...base, `${url}${INTROSPECTION_ENDPOINT_PATH}`] },
    revocation: { assertionAudiences: [...base, `${url}${REVOCATION_ENDPOINT_PATH}`] },
  };
};

export function oauthRoutes(ctx: AppContext): RouteDef[] {
  const deps = { store: ctx.store, clock: ctx.clock, keySets: new VerificationKeySets() };
  /** hostAuth per host, built once; gone with the host (a custom domain dropped or changed). */
  const auths = new WeakMap<HostMatch, HostAuth>();
  /** The project a request's Host names, that host's URL (the issuer of tokens asked there) and what its endpoints accept. */
  const at = (request: Request): { project: ResolvedProject; url: string; auth: HostAuth } => {
    const match = ctx.projects.resolveHost(requestHost(request));
    let auth = auths.get(match);
    if (auth === undefined) auths.set(match, (auth = hostAuth(match.url)));
    return { project: match.project, url: match.url, auth };
  };
  /** The tokens a project accepts back: those of its own host and of its custom domain, under its current keys. */
  const accepted = (project: ResolvedProject): TokenProject => ({
    projectId: project.id,
    issuers: project.customUrl === undefined ? [project.url] : [project.url, project.customUrl],
    ring: ctx.keys.ring(project.id),
  });
  return [
    {
      method: "POST",
      path: TOKEN_ENDPOINT_PATH,
      operationId: "oauthToken",
      summary: "OAuth 2.0 token endpoint: client credentials grant (client_secret_basic, client_secret_post or private_key_jwt)",
      tag: "oauth",
      auth: false,
      direct: true,
      body: OAuthTokenRequest,
      success: { status: 200, schema: OAuthTokenResponse, description: "`{access_token, token_type, expires_in}`.", headers: NO_STORE_HEADERS },
      errors: [400, 401, 413],
      handler: async ({ body, request, set }) => {
        const { project, url, auth } = at(request);
        const answer = await clientCredentialsToken(ctx, project, url, request.headers.get("authorization"), body as OAuthTokenRequest, auth.token);
        Object.assign(set.headers, NO_STORE);
        return answer;
      },
    },
    {
      method: "POST",
      path: INTROSPECTION_ENDPOINT_PATH,
      operationId: "oauthIntrospect",
      summary: "OAuth 2.0 token introspection (RFC 7662): is this access token of the project active?",
      tag: "oauth",
      auth: false,
      body: OAuthTokenStatusRequest,
      success: {
        status: 200,
        schema: OAuthIntrospectionResponse,
        description: "`{active: false}` for any token not active now; the token's claims with `active: true` otherwise.",
        headers: NO_STORE_HEADERS,
      },
      errors: [400, 401, 413],
      handler: async ({ body, request, set }) => {
        const { project, auth } = at(request);
        const answer = await introspectToken(deps, accepted(project), request.headers.get("authorization"), body as OAuthTokenStatusRequest, auth.introspection);
        Object.assign(set.headers, NO_STORE);
        return answer;
      },
    },
    {
      method: "POST",
      path: REVOCATION_ENDPOINT_PATH,
      operationId: "oauthRevoke",
      summary: "OAuth 2.0 token revocation (RFC 7009): revoke one of the calling client's access tokens",
      tag: "oauth",
      auth: false,
      body: OAuthTokenStatusRequest,
      success: { status: 200, description: "Empty body: the token is revoked, or was never an active token.", headers: NO_STORE_HEADERS },
      errors: [400, 401, 413],
      handler: async ({ body, request }) => {
        const { project, auth } = at(request);
        await revokeAccessToken(deps, accepted(project), request.headers.get("authorization"), body as OAuthTokenStatusRequest, auth.revocation);
        return new Response(null, { status: 200, headers: NO_STORE });
      },
    },
  ];
}
