/**
 * @module http/routes/oauth
 * The OAuth 2.0 token endpoint (RFC 6749 §4.4, client credentials). Public: the client
 * authenticates with its own secret or a signed assertion (private_key_jwt), not an API key. The body is form-encoded (body-parser.ts)
 * and every error is `{error, error_description}` (error-handler.ts), both by the /oauth/ prefix.
 */
import { clientCredentialsToken } from "../../core/oauth/client-credentials.ts";
import type { AppContext } from "../../context.ts";
import { OAuthTokenRequest, OAuthTokenResponse } from "../../schemas/oauth.ts";
import type { RouteDef } from "../route.ts";

/** Path of the token endpoint, below the issuer. */
export const TOKEN_ENDPOINT_PATH = "/oauth/token";

export function oauthRoutes(ctx: AppContext): RouteDef[] {
  return [
    {
      method: "POST",
      path: TOKEN_ENDPOINT_PATH,
      summary: "OAuth 2.0 token endpoint: client credentials grant (client_secret_basic, client_secret_post or private_key_jwt)",
      tag: "oauth",
      auth: false,
      body: OAuthTokenRequest,
      success: { status: 200, schema: OAuthTokenResponse, description: "`{access_token, token_type, expires_in}` (`Cache-Control: no-store`)." },
      errors: [400, 401, 413],
      handler: async ({ body, request, set }) => {
        const answer = await clientCredentialsToken(ctx, ctx.projectId, request.headers.get("authorization"), body as OAuthTokenRequest, {
          assertionAudiences: [ctx.issuer, `${ctx.issuer}${TOKEN_ENDPOINT_PATH}`],
        });
        set.headers["cache-control"] = "no-store";
        set.headers.pragma = "no-cache";
        return answer;
      },
    },
  ];
}
