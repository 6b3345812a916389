/** @module http/routes/v1/keys — signing-key metadata, manual rotation and revocation. */
import type { AppContext } from "../../../context.ts";
import { EmptyBody } from "../../../schemas/common.ts";
import { KeyList, KeyParams } from "../../../schemas/keys.ts";
import type { RouteDef } from "../../route.ts";
import { keyView } from "../../views.ts";

export function keyRoutes(ctx: AppContext): RouteDef[] {
  const tag = "keys";
  const success = { status: 200, schema: KeyList, description: "Every signing key of the project: public metadata only." };
  return [
    {
      method: "GET",
      path: "/v1/keys",
      operationId: "listKeys",
      summary: "List signing keys",
      tag,
      auth: true,
      success,
      errors: [],
      handler: async ({ principal }) => ({ items: (await ctx.keys.list(principal.projectId)).map(keyView) }),
    },
    {
      method: "POST",
      path: "/v1/keys/rotate",
      operationId: "rotateKeys",
      summary: "Rotate now: the next key starts signing, the current key retires",
      tag,
      auth: true,
      body: EmptyBody,
      success,
      errors: [400, 409, 413, 415],
      handler: async ({ principal }) => ({ items: (await ctx.keys.rotate(principal.projectId)).map(keyView) }),
    },
    {
      method: "POST",
      path: "/v1/keys/:kid/revoke",
      operationId: "revokeKey",
      summary: "Revoke a key: it leaves the JWKS at once and never signs again",
      tag,
      auth: true,
      params: KeyParams,
      body: EmptyBody,
      success,
      errors: [400, 404, 413, 415],
      handler: async ({ principal, params }) => ({ items: (await ctx.keys.revoke(principal.projectId, params.kid as string)).map(keyView) }),
    },
  ];
}
