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
 * How far ahead of `now` a stored cut may be and still be kept (see revokeClientTokens): two calls
 * race within milliseconds; a cut further ahead was made by a clock that was ahead.
 */
const CUT_RACE_MS = 5_000;

/**
 * Revokes every token the client was issued before `now`: sets `tokensRevokedBefore`, which
 * introspection compares with each token's `iat`. Tokens issued afterwards are not affected. Of
 * two calls whose writes land in the other order than their clocks were read (two workers), the
 * later cut stays, so no answered revocation is undone; a cut far ahead of `now` (made while the
 * clock was ahead, since corrected) is replaced, or it would refuse the client's new tokens.
 */
export function revokeClientTokens(store: Store, projectId: string, providerId: string, id: string, now: number): Promise<ClientRecord> {
  return store.updateClient(projectId, providerId, id, (c) => {
    const stored = c.tokensRevokedBefore;
    const cut = stored !== undefined && stored > now && stored - now <= CUT_RACE_MS ? stored : now;
    return { ...c, tokensRevokedBefore: cut, updatedAt: now };
  });
}

export function deleteClient(store: Store, projectId: string, providerId: string, id: string): Promise<void> {
  return store.deleteClient(projectId, providerId, id);
}
