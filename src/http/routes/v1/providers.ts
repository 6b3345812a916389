/** @module http/routes/v1/providers — CRUD of providers in the caller's project. */
import * as providers from "../../../core/providers.ts";
import type { AppContext } from "../../../context.ts";
import { PageOf, PageQuery } from "../../../schemas/common.ts";
import { Provider, ProviderCreate, ProviderParams, ProviderPatch } from "../../../schemas/providers.ts";
import type { RouteDef } from "../../route.ts";
import { providerView } from "../../views.ts";
import { pageBody, pageRequest } from "./paging.ts";

export function providerRoutes(ctx: AppContext): RouteDef[] {
  const { store, clock } = ctx;
  const tag = "providers";
  return [
    {
      method: "POST",
      path: "/v1/providers",
      operationId: "createProvider",
      summary: "Create a provider",
      tag,
      auth: true,
      body: ProviderCreate,
      success: { status: 201, schema: Provider, description: "The provider was created." },
      errors: [400, 413, 415],
      handler: async ({ principal, body, set }) => {
        const provider = await providers.createProvider(store, principal.projectId, body as ProviderCreate, clock.now());
        set.status = 201;
        return providerView(provider);
      },
    },
    {
      method: "GET",
      path: "/v1/providers",
      operationId: "listProviders",
      summary: "List providers",
      tag,
      auth: true,
      query: PageQuery,
      success: { status: 200, schema: PageOf(Provider), description: "A page of providers, oldest first." },
      errors: [400],
      handler: async ({ principal, query }) => {
        const { limit, after } = pageRequest(query);
        return pageBody(await providers.listProviders(store, principal.projectId, limit, after), providerView);
      },
    },
    {
      method: "GET",
      path: "/v1/providers/:providerId",
      operationId: "getProvider",
      summary: "Get a provider",
      tag,
      auth: true,
      params: ProviderParams,
      success: { status: 200, schema: Provider, description: "The provider." },
      errors: [400, 404],
      handler: async ({ principal, params }) => providerView(await providers.getProvider(store, principal.projectId, params.providerId as string)),
    },
    {
      method: "PATCH",
      path: "/v1/providers/:providerId",
      operationId: "updateProvider",
      summary: "Update a provider",
      tag,
      auth: true,
      params: ProviderParams,
      body: ProviderPatch,
      success: { status: 200, schema: Provider, description: "The updated provider." },
      errors: [400, 404, 413, 415],
      handler: async ({ principal, params, body }) =>
        providerView(await providers.updateProvider(store, principal.projectId, params.providerId as string, body as ProviderPatch, clock.now())),
    },
    {
      method: "DELETE",
      path: "/v1/providers/:providerId",
      operationId: "deleteProvider",
      summary: "Delete a provider (it must have no clients)",
      tag,
      auth: true,
      params: ProviderParams,
      success: { status: 204, description: "The provider was deleted." },
      errors: [400, 404, 409],
      handler: async ({ principal, params, set }) => {
        await providers.deleteProvider(store, principal.projectId, params.providerId as string);
        set.status = 204;
        return undefined;
      },
    },
  ];
}
