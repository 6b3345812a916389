/**
 * @module core/client-secrets
 * Client secrets, the credentials of the token endpoint. A new secret is 256 random bits behind
 * the prefix `tms_`, shown once; only its SHA-256 and its last four characters (a hint to tell
 * secrets apart) are stored. A client holds at most two, so a secret rotates without downtime:
 * create the new one, deploy it, revoke the old one. Revoking deletes the secret at once.
 * Checking a presented secret costs one SHA-256 and a constant-time comparison per stored
 * secret: microseconds, not a password hash, which 256-bit secrets do not need.
 */
import { base64url } from "jose";
import { AppError } from "../errors.ts";
import { StoreError, type ClientRecord, type ClientSecretRecord, type Store } from "../store/store.ts";
import { hashSecret, timingSafeEqual } from "./secret-hash.ts";
import { getClient } from "./clients.ts";
import { uuidv7 } from "./ids.ts";

/** How many secrets a client may hold at once: the one in use and its replacement. */
export const MAX_CLIENT_SECRETS = 2;

/** The prefix of every client secret, so a leaked one is easy to scan for. */
export const CLIENT_SECRET_PREFIX = "tms_";

/** A fresh client secret: the prefix and 256 random bits, base64url. */
export const generateClientSecret = () => `${CLIENT_SECRET_PREFIX}${base64url.encode(crypto.getRandomValues(new Uint8Array(32)))}`;

/**
 * Creates a secret for a client of `providerId`; returns the record and the secret (shown once).
 * 404 for an unknown provider or client, 409 when the client already holds MAX_CLIENT_SECRETS.
 */
export async function createClientSecret(
  store: Store,
  projectId: string,
  providerId: string,
  clientId: string,
  now: number,
): Promise<{ record: ClientSecretRecord; secret: string }> {
  await getClient(store, projectId, providerId, clientId);
  const secret = generateClientSecret();
  const record: ClientSecretRecord = { id: uuidv7(now), projectId, clientId, hash: hashSecret(secret), lastFour: secret.slice(-4), createdAt: now };
  try {
    await store.createClientSecret(record, MAX_CLIENT_SECRETS);
  } catch (error) {
    if (error instanceof StoreError && error.kind === "conflict") {
      throw new AppError(
        "conflict",
        `Client ${clientId} already holds ${MAX_CLIENT_SECRETS} secrets; revoke one (DELETE .../secrets/{secretId}) before creating another.`,
      );
    }
    throw error;
  }
  return { record, secret };
}

/** The secrets of a client of `providerId`, oldest first; 404 for an unknown provider or client. */
export async function listClientSecrets(store: Store, projectId: string, providerId: string, clientId: string): Promise<ClientSecretRecord[]> {
  await getClient(store, projectId, providerId, clientId);
  return store.listClientSecrets(projectId, clientId);
}

/** Revokes (deletes) a secret: it stops working with the next request. 404 when it does not exist. */
export async function revokeClientSecret(store: Store, projectId: string, providerId: string, clientId: string, id: string): Promise<void> {
  await getClient(store, projectId, providerId, clientId);
  try {
    await store.deleteClientSecret(projectId, clientId, id);
  } catch (error) {
    if (error instanceof StoreError && error.kind === "not_found") throw new AppError("not_found", `Secret ${id} does not exist for client ${clientId}.`);
    throw error;
  }
}

/** True when `presented` is one of the client's secrets. Every stored hash is compared, in constant time. */
export async function clientSecretMatches(store: Store, client: ClientRecord, presented: string): Promise<boolean> {
  const hash = hashSecret(presented);
  let matched = false;
  for (const stored of await store.listClientSecrets(client.projectId, client.id)) matched = timingSafeEqual(stored.hash, hash) || matched;
  return matched;
}
