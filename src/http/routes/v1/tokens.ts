/**
 * @module http/routes/v1/tokens — issue an access token for a client. Stateless: nothing is stored.
 * The `iss` is the project's custom domain URL when it has one (unless `forceDefaultDomain`), else its own URL.
 */
import { issueAccessToken } from "../../../core/access-tokens.ts";
import { getClient } from "../../../core/clients.ts";
import { tokenIssuer } from "../../../core/projects.ts";
import { tokenLifetime } from "../../../core/tokens.ts";
import type { AppContext } from "../../../context.ts";
import { ClientParams } from "../../../schemas/clients.ts";
import { AccessToken, TokenRequest } from "../../../schemas/tokens.ts";
import { NO_STORE_HEADERS, type RouteDef } from "../../route.ts";

export function tokenRoutes(ctx: AppContext): RouteDef[] {
  return [
    {
      method: "POST",
      path: "/v1/providers/:providerId/clients/:clientId/tokens",
      operationId: "createToken",
      summary: "Create an access token for a client",
      tag: "tokens",
      auth: true,
      direct: true,
      params: ClientParams,
      body: TokenRequest,
      success: { status: 201, schema: AccessToken, description: "A signed JWT access token.", headers: NO_STORE_HEADERS },
      errors: [400, 404, 413, 415],
      handler: async ({ principal, params, body, set }) => {
        const request = body as TokenRequest;
        const client = await getClient(ctx.store, principal.projectId, params.providerId as string, params.clientId as string);
        const project = ctx.projects.get(principal.projectId);
        const { token: accessToken, claims } = await issueAccessToken(ctx, principal.projectId, client, {
          issuer: tokenIssuer(project, request.forceDefaultDomain === true),
          lifetime: tokenLifetime(request.expiresIn, project.defaultTokenLifetime),
          audienceAsArray: request.audienceAsArray === true,
          typ: request.useJwtType === true ? "JWT" : "at+jwt",
        });
        set.status = 201;
        set.headers["cache-control"] = "no-store";
        set.headers.pragma = "no-cache";
        return { accessToken, expiresAt: new Date(claims.exp * 1000).toISOString(), type: "Bearer" as const };
      },
    },
  ];
}
