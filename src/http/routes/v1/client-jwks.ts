/**
 * @module http/routes/v1/client-jwks
 * A client's public keys for private_key_jwt at the OAuth endpoints: replace the set, read it,
 * remove it. Public keys only; the answer lists exactly what is stored.
 */
import * as jwks from "../../../core/client-jwks.ts";
import type { AppContext } from "../../../context.ts";
import { ClientJwks, ClientJwksPut } from "../../../schemas/client-jwks.ts";
import { ClientParams } from "../../../schemas/clients.ts";
import type { RouteDef } from "../../route.ts";
import { clientJwksView } from "../../views.ts";

export function clientJwksRoutes(ctx: AppContext): RouteDef[] {
  const { store, clock } = ctx;
  const tag = "client keys";
  const path = "/v1/providers/:providerId/clients/:clientId/jwks";
  return [
    {
      method: "PUT",
      path,
      operationId: "putClientJwks",
      summary: "Register a client's public keys for private_key_jwt (replaces the set)",
      tag,
      auth: true,
      params: ClientParams,
      body: ClientJwksPut,
      success: { status: 200, schema: ClientJwks, description: "The stored set: public members only, every key with its kid." },
      errors: [400, 404, 413, 415],
      handler: async ({ principal, params, body }) =>
        clientJwksView(
          await jwks.putClientJwks(store, principal.projectId, params.providerId as string, params.clientId as string, (body as ClientJwksPut).keys, clock.now()),
        ),
    },
    {
      method: "GET",
      path,
      operationId: "getClientJwks",
      summary: "A client's public keys",
      tag,
      auth: true,
      params: ClientParams,
      success: { status: 200, schema: ClientJwks, description: "The client's public keys (a JWK Set)." },
      errors: [400, 404],
      handler: async ({ principal, params }) =>
        clientJwksView(await jwks.getClientJwks(store, principal.projectId, params.providerId as string, params.clientId as string)),
    },
    {
      method: "DELETE",
      path,
      operationId: "deleteClientJwks",
      summary: "Remove a client's public keys: private_key_jwt stops working for it at once",
      tag,
      auth: true,
      params: ClientParams,
      success: { status: 204, description: "The keys were removed." },
      errors: [400, 404],
      handler: async ({ principal, params, set }) => {
        await jwks.deleteClientJwks(store, principal.projectId, params.providerId as string, params.clientId as string);
        set.status = 204;
        return undefined;
      },
    },
  ];
}
