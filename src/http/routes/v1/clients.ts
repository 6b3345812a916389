/** @module http/routes/v1/clients — CRUD of clients under a provider, and revoking all of a client's tokens. */
import * as clients from "../../../core/clients.ts";
import type { AppContext } from "../../../context.ts";
import { Client, ClientCreate, ClientParams, ClientPatch } from "../../../schemas/clients.ts";
import { EmptyBody, PageOf, PageQuery } from "../../../schemas/common.ts";
import { ProviderParams } from "../../../schemas/providers.ts";
import type { RouteDef } from "../../route.ts";
import { clientView } from "../../views.ts";
import { pageBody, pageRequest } from "./paging.ts";

export function clientRoutes(ctx: AppContext): RouteDef[] {
  const { store, clock } = ctx;
  const tag = "clients";
  const base = "/v1/providers/:providerId/clients";
  return [
    {
      method: "POST",
      path: base,
      operationId: "createClient",
      summary: "Create a client",
      tag,
      auth: true,
      params: ProviderParams,
      body: ClientCreate,
      success: { status: 201, schema: Client, description: "The client was created." },
      errors: [400, 404, 413, 415],
      handler: async ({ principal, params, body, set }) => {
        const client = await clients.createClient(store, principal.projectId, params.providerId as string, body as ClientCreate, clock.now());
        set.status = 201;
        return clientView(client);
      },
    },
    {
      method: "GET",
      path: base,
      operationId: "listClients",
      summary: "List a provider's clients",
      tag,
      auth: true,
      params: ProviderParams,
      query: PageQuery,
      success: { status: 200, schema: PageOf(Client), description: "A page of clients, oldest first." },
      errors: [400, 404],
      handler: async ({ principal, params, query }) => {
        const { limit, after } = pageRequest(query);
        return pageBody(await clients.listClients(store, principal.projectId, params.providerId as string, limit, after), clientView);
      },
    },
    {
      method: "GET",
      path: `${base}/:clientId`,
      operationId: "getClient",
      summary: "Get a client",
      tag,
      auth: true,
      params: ClientParams,
      success: { status: 200, schema: Client, description: "The client." },
      errors: [400, 404],
      handler: async ({ principal, params }) =>
        clientView(await clients.getClient(store, principal.projectId, params.providerId as string, params.clientId as string)),
    },
    {
      method: "PATCH",
      path: `${base}/:clientId`,
      operationId: "updateClient",
      summary: "Update a client",
      tag,
      auth: true,
      params: ClientParams,
      body: ClientPatch,
      success: { status: 200, schema: Client, description: "The updated client." },
      errors: [400, 404, 413, 415],
      handler: async ({ principal, params, body }) =>
        clientView(
          await clients.updateClient(store, principal.projectId, params.providerId as string, params.clientId as string, body as ClientPatch, clock.now()),
        ),
    },
    {
      method: "POST",
      path: `${base}/:clientId/revoke-tokens`,
      operationId: "revokeClientTokens",
      summary: "Revoke every token the client was issued until now",
      tag,
      auth: true,
      params: ClientParams,
      body: EmptyBody,
      success: { status: 200, schema: Client, description: "The client, with `tokensRevokedBefore` set to now: introspection reports its earlier tokens inactive." },
      errors: [400, 404, 413, 415],
      handler: async ({ principal, params }) =>
        clientView(await clients.revokeClientTokens(store, principal.projectId, params.providerId as string, params.clientId as string, clock.now())),
    },
    {
      method: "DELETE",
      path: `${base}/:clientId`,
      operationId: "deleteClient",
      summary: "Delete a client",
      tag,
      auth: true,
      params: ClientParams,
      success: { status: 204, description: "The client was deleted." },
      errors: [400, 404],
      handler: async ({ principal, params, set }) => {
        await clients.deleteClient(store, principal.projectId, params.providerId as string, params.clientId as string);
        set.status = 204;
        return undefined;
      },
    },
  ];
}
