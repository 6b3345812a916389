/**
 * Hand-made store records for the contract suite and the backend tests. Ids are UUIDv7 of the
 * record's creation instant, so records created at increasing instants list in creation order.
 */
import { uuidv7 } from "../../src/core/ids.ts";
import {
  StoreError,
  type ApiKeyRecord,
  type ClientJwksRecord,
  type ClientRecord,
  type ClientSecretRecord,
  type KeySetRecord,
  type ProviderRecord,
  type SigningKeyRecord,
  type Store,
  type StoreErrorKind,
} from "../../src/store/store.ts";

/** 2026-01-01T00:00:00Z, the fixed clock of these tests. */
export const T0 = Date.UTC(2026, 0, 1);

export const newProjectId = (at = T0) => uuidv7(at);

export function providerRecord(projectId: string, at: number, name = "payments"): ProviderRecord {
  return { id: uuidv7(at), projectId, name, description: `${name} provider`, createdAt: at, updatedAt: at };
}

export function clientRecord(provider: ProviderRecord, at: number, name = "billing-worker"): ClientRecord {
  return {
    id: uuidv7(at),
    projectId: provider.projectId,
    providerId: provider.id,
    name,
    audience: "https://api.example.test",
    createdAt: at,
    updatedAt: at,
  };
}

/** A provider of `projectId` (created at T0) with two clients (T0 + 1 and T0 + 2), created in `store`. */
export async function providerWithTwoClients(store: Store, projectId: string): Promise<{ provider: ProviderRecord; first: ClientRecord; second: ClientRecord }> {
  const provider = providerRecord(projectId, T0);
  await store.createProvider(provider);
  const first = clientRecord(provider, T0 + 1);
  const second = clientRecord(provider, T0 + 2);
  await store.createClient(first);
  await store.createClient(second);
  return { provider, first, second };
}

export function clientSecretRecord(client: ClientRecord, at: number, hash: string): ClientSecretRecord {
  return { id: uuidv7(at), projectId: client.projectId, clientId: client.id, hash, lastFour: hash.slice(-4), createdAt: at };
}

export function apiKeyRecord(projectId: string, at: number, hash: string): ApiKeyRecord {
  return { id: uuidv7(at), projectId, name: `key ${hash}`, hash, createdAt: at };
}

export function signingKeyRecord(kid: string, state: SigningKeyRecord["state"], createdAt: number): SigningKeyRecord {
  return {
    kid,
    alg: "ES256",
    state,
    createdAt,
    ...(state === "current" ? { activatesAt: createdAt } : {}),
    publicJwk: { kty: "EC", crv: "P-256", x: `x-${kid}`, y: `y-${kid}`, kid, alg: "ES256", use: "sig" },
    sealedPrivateJwk: `sealed-${kid}`,
  };
}

/** A key set of `version` with a current and a next key named after the version. */
export function keySetRecord(projectId: string, version: number, rotatedAt = T0): KeySetRecord {
  return {
    projectId,
    version,
    rotatedAt,
    keys: [signingKeyRecord(`cur-${version}`, "current", rotatedAt), signingKeyRecord(`next-${version}`, "next", rotatedAt + 1)],
  };
}

/** Awaits `promise`, which must reject with a StoreError, and returns its kind. */
export async function storeErrorKind(promise: Promise<unknown>): Promise<StoreErrorKind> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StoreError) return error.kind;
    throw error;
  }
  throw new Error("expected a StoreError, but the operation succeeded");
}

/** A client's public key set with one EC key named `kid` (the values need not be a real key here). */
export function clientJwksRecord(client: ClientRecord, at: number, kid = "k1"): ClientJwksRecord {
  return {
    projectId: client.projectId,
    clientId: client.id,
    keys: [{ kty: "EC", crv: "P-256", x: `x-${kid}`, y: `y-${kid}`, kid }],
    updatedAt: at,
  };
}
