/**
 * @module core/providers
 * Providers group clients. Create, read, list, update and delete, always scoped to the caller's
 * project; a provider that still has clients cannot be deleted.
 */
import { AppError } from "../errors.ts";
import type { Page, ProviderRecord, Store } from "../store/store.ts";
import { uuidv7 } from "./ids.ts";
import { isEmptyPatch } from "./patch.ts";

export interface ProviderInput {
  name: string;
  description?: string;
}

export async function createProvider(store: Store, projectId: string, input: ProviderInput, now: number): Promise<ProviderRecord> {
  const provider: ProviderRecord = {
    id: uuidv7(now),
    projectId,
    name: input.name,
    description: input.description ?? "",
    createdAt: now,
    updatedAt: now,
  };
  await store.createProvider(provider);
  return provider;
}

/** The provider, or 404 `not_found`. */
export async function getProvider(store: Store, projectId: string, id: string): Promise<ProviderRecord> {
  const provider = await store.getProvider(projectId, id);
  if (provider === undefined) throw new AppError("not_found", `Provider ${id} does not exist.`);
  return provider;
}

export function listProviders(store: Store, projectId: string, limit: number, after?: string): Promise<Page<ProviderRecord>> {
  return store.listProviders(projectId, { limit, after });
}

/** Applies `patch` to the provider; an empty one writes nothing. 404 `not_found` when it does not exist. */
export function updateProvider(store: Store, projectId: string, id: string, patch: Partial<ProviderInput>, now: number): Promise<ProviderRecord> {
  if (isEmptyPatch(patch)) return getProvider(store, projectId, id);
  return store.updateProvider(projectId, id, (p) => ({ ...p, ...patch, updatedAt: now }));
}

export function deleteProvider(store: Store, projectId: string, id: string): Promise<void> {
  return store.deleteProvider(projectId, id);
}
