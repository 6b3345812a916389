/**
 * @module core/clients
 * Clients belong to a provider; a client's id is the `sub` and `client_id` of its tokens and its
 * audience is their `aud`.
 */
import { AppError } from "../errors.ts";
import type { ClientRecord, Page, Store } from "../store/store.ts";
import { uuidv7 } from "./ids.ts";
import { isEmptyPatch } from "./patch.ts";

export interface ClientInput {
  name: string;
  audience: string;
}

export async function createClient(store: Store, projectId: string, providerId: string, input: ClientInput, now: number): Promise<ClientRecord> {
  const client: ClientRecord = { id: uuidv7(now), projectId, providerId, name: input.name, audience: input.audience, createdAt: now, updatedAt: now };
  await store.createClient(client);
  return client;
}

/** The client, or 404 `not_found`. */
export async function getClient(store: Store, projectId: string, providerId: string, id: string): Promise<ClientRecord> {
  const client = await store.getClient(projectId, providerId, id);
  if (client === undefined) throw new AppError("not_found", `Client ${id} does not exist under provider ${providerId}.`);
  return client;
}

/** Lists a provider's clients; 404 when the provider does not exist. */
export async function listClients(store: Store, projectId: string, providerId: string, limit: number, after?: string): Promise<Page<ClientRecord>> {
  if ((await store.getProvider(projectId, providerId)) === undefined) throw new AppError("not_found", `Provider ${providerId} does not exist.`);
  return store.listClients(projectId, providerId, { limit, after });
}

/** Applies `patch` to the client; an empty one writes nothing. 404 `not_found` when it does not exist. */
export function updateClient(store: Store, projectId: string, providerId: string, id: string, patch: Partial<ClientInput>, now: number): Promise<ClientRecord> {
  if (isEmptyPatch(patch)) return getClient(store, projectId, providerId, id);
  return store.updateClient(projectId, providerId, id, (c) => ({ ...c, ...patch, updatedAt: now }));
}

/**
 * Revokes every token the client was issued before `now`: sets `tokensRevokedBefore`, which
 * introspection compares with each token's `iat`. Tokens issued afterwards are not affected. The
 * cut never moves back, so no answered revocation is undone: of two calls whose writes land in
 * the other order than their clocks were read (two workers), the later cut stays; and a cut made
 * while the clock was ahead stays until the clock passes it, since the tokens issued meanwhile
 * carry an `iat` that far ahead too, and cannot be told from the client's later ones.
 */
export function revokeClientTokens(store: Store, projectId: string, providerId: string, id: string, now: number): Promise<ClientRecord> {
  return store.updateClient(projectId, providerId, id, (c) => ({ ...c, tokensRevokedBefore: Math.max(c.tokensRevokedBefore ?? 0, now), updatedAt: now }));
}

export function deleteClient(store: Store, projectId: string, providerId: string, id: string): Promise<void> {
  return store.deleteClient(projectId, providerId, id);
}
