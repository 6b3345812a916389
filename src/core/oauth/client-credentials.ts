/**
 * @module core/oauth/client-credentials
 * The token endpoint's one grant, client credentials (RFC 6749 §4.4): authenticate the client,
 * check the grant type and the optional `audience`, then issue the same JWT as the management
 * token route, with the default lifetime. Order: client authentication first, so a caller without
 * valid credentials learns nothing else.
 */
import type { AppContext } from "../../context.ts";
import { issueAccessToken } from "../access-tokens.ts";
import type { ResolvedProject } from "../projects.ts";
import { authenticateClient, type ClientAuthOptions, type ClientAuthParams } from "./client-auth.ts";
import { OAuthError } from "./errors.ts";

/** The grant types of the token endpoint, as discovery names them. */
export const GRANT_TYPES = ["client_credentials"] as const;

/** The recognised parameters of a token request (others are ignored, RFC 6749 §3.2). */
export interface TokenEndpointParams extends ClientAuthParams {
  grant_type: string;
  /** One value or several (RFC 8693 lets a request repeat it). */
  audience?: string | string[];
  /** RFC 8707 resource indicators: the audience by its standard name, one or several. */
  resource?: string | string[];
  scope?: string;
}

/** The successful answer (RFC 6749 §5.1). */
export interface TokenEndpointAnswer {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
}

/**
 * Runs a client credentials token request for the project, issuing tokens with `issuer` (the URL
 * of the host the request came to) and the project's default lifetime; throws OAuthError on refusal.
 */
export async function clientCredentialsToken(
  ctx: Pick<AppContext, "store" | "keys" | "metrics" | "clock">,
  project: ResolvedProject,
  issuer: string,
  authorization: string | null,
  params: TokenEndpointParams,
  auth: ClientAuthOptions,
): Promise<TokenEndpointAnswer> {
  const client = await authenticateClient(ctx, project.id, authorization, params, auth);
  if (params.grant_type !== "client_credentials") {
    throw new OAuthError("unsupported_grant_type", "This grant_type is not supported; use grant_type=client_credentials.");
  }
  // RFC 8707 §2: a resource is an absolute URI without a fragment (an audience may be any text).
  const resources = params.resource === undefined ? [] : typeof params.resource === "string" ? [params.resource] : params.resource;
  if (resources.some((value) => !URL.canParse(value) || value.includes("#"))) {
    throw new OAuthError("invalid_target", "A resource parameter must be an absolute URI without a fragment (RFC 8707); for an audience of other text, use the audience parameter.");
  }
  for (const name of ["audience", "resource"] as const) {
    const asked = params[name];
    if (asked !== undefined && (typeof asked === "string" ? asked !== client.audience : asked.some((value) => value !== client.audience))) {
      throw new OAuthError("invalid_target", `Every ${name} parameter must equal the client's audience; or leave it out.`);
    }
  }
  // RFC 6749 §3.3: a scope other than the one granted (tokens carry none) is refused, not ignored.
  if (params.scope !== undefined) throw new OAuthError("invalid_scope", "Tokens of this service carry no scope; leave the scope parameter out.");
  const { token, claims } = await issueAccessToken(ctx, project.id, client, {
    issuer,
    lifetime: project.defaultTokenLifetime,
    audienceAsArray: false,
    typ: "at+jwt",
  });
  return { access_token: token, token_type: "Bearer", expires_in: claims.exp - claims.iat };
}
