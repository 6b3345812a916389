/**
 * @module http/routes/v1/client-secrets
 * A client's secrets for the token endpoint: create (the secret is in that answer only), list
 * (metadata only) and revoke. At most two at once, for rotation.
 */
import * as secrets from "../../../core/client-secrets.ts";
import type { AppContext } from "../../../context.ts";
import { ClientSecretCreate, ClientSecretCreated, ClientSecretList, ClientSecretParams } from "../../../schemas/client-secrets.ts";
import { ClientParams } from "../../../schemas/clients.ts";
import { NO_STORE_HEADERS, type RouteDef } from "../../route.ts";
import { clientSecretView } from "../../views.ts";

export function clientSecretRoutes(ctx: AppContext): RouteDef[] {
  const { store, clock } = ctx;
  const tag = "client secrets";
  const base = "/v1/providers/:providerId/clients/:clientId/secrets";
  return [
    {
      method: "POST",
      path: base,
      operationId: "createClientSecret",
      summary: "Create a client secret (shown once; at most two per client)",
      tag,
      auth: true,
      params: ClientParams,
      body: ClientSecretCreate,
      success: { status: 201, schema: ClientSecretCreated, description: "The new secret, shown only here.", headers: NO_STORE_HEADERS },
      errors: [400, 404, 409, 413, 415],
      handler: async ({ principal, params, set }) => {
        const { record, secret } = await secrets.createClientSecret(store, principal.projectId, params.providerId as string, params.clientId as string, clock.now());
        set.status = 201;
        set.headers["cache-control"] = "no-store";
        set.headers.pragma = "no-cache";
        const view = clientSecretView(record);
        return { id: view.id, secret, lastFour: view.lastFour, createdAt: view.createdAt };
      },
    },
    {
      method: "GET",
      path: base,
      operationId: "listClientSecrets",
      summary: "List a client's secrets (metadata only)",
      tag,
      auth: true,
      params: ClientParams,
      success: { status: 200, schema: ClientSecretList, description: "The client's secrets, oldest first: id, last four characters, creation time." },
      errors: [400, 404],
      handler: async ({ principal, params }) => ({
        items: (await secrets.listClientSecrets(store, principal.projectId, params.providerId as string, params.clientId as string)).map(clientSecretView),
      }),
    },
    {
      method: "DELETE",
      path: `${base}/:secretId`,
      operationId: "deleteClientSecret",
      summary: "Revoke a client secret: it stops working at once",
      tag,
      auth: true,
      params: ClientSecretParams,
      success: { status: 204, description: "The secret was revoked and deleted." },
      errors: [400, 404],
      handler: async ({ principal, params, set }) => {
        await secrets.revokeClientSecret(store, principal.projectId, params.providerId as string, params.clientId as string, params.secretId as string);
        set.status = 204;
        return undefined;
      },
    },
  ];
}
