/**
 * @module core/api-keys
 * Management API keys: creation (the secret is shown once, only its SHA-256 is stored),
 * verification of a bearer value, listing and revocation. A presented key is hashed and looked up
 * by hash; the stored and computed hashes are then compared in constant time.
 */
import { base64url } from "jose";
import { AppError } from "../errors.ts";
import type { ApiKeyRecord, Store } from "../store/store.ts";
import { uuidv7 } from "./ids.ts";
import { hashSecret, timingSafeEqual } from "./secret-hash.ts";

/** A fresh API key string: a fixed prefix (so leaked keys are easy to scan for) and 256 random bits. */
export const generateApiKeySecret = () => `tm_${base64url.encode(crypto.getRandomValues(new Uint8Array(32)))}`;

/** Who a valid API key speaks for. */
export interface Principal {
  projectId: string;
  apiKeyId: string;
}

/** The caller of a route that takes no API key (discovery, the OAuth endpoints). */
export const NO_PRINCIPAL: Principal = Object.freeze({ projectId: "", apiKeyId: "" });

/** Resolves an Authorization header to a principal, or throws 401 `unauthorized`. */
export async function authenticate(store: Store, authorization: string | null, now: number): Promise<Principal> {
  const challenge = { "www-authenticate": 'Bearer realm="tokenmint"' };
  const match = authorization === null ? null : /^Bearer +([\x21-\x7e]+) *$/i.exec(authorization);
  if (authorization === null || authorization === "") {
    throw new AppError("unauthorized", "Missing API key: send 'Authorization: Bearer <API key>'.", challenge);
  }
  if (match === null) throw new AppError("unauthorized", "Malformed Authorization header: expected 'Bearer <API key>'.", challenge);
  const hash = hashSecret(match[1] as string);
  const record = await store.getApiKeyByHash(hash);
  const invalid = { ...challenge, "www-authenticate": 'Bearer realm="tokenmint", error="invalid_token"' };
  if (record === undefined || !timingSafeEqual(record.hash, hash) || record.revokedAt !== undefined) {
    throw new AppError("unauthorized", "The API key is invalid or has been revoked.", invalid);
  }
  if (record.expiresAt !== undefined && record.expiresAt <= now) {
    throw new AppError("unauthorized", "The API key has expired; create a new one.", {
      "www-authenticate": 'Bearer realm="tokenmint", error="invalid_token", error_description="The API key has expired"',
    });
  }
  return { projectId: record.projectId, apiKeyId: record.id };
}

/** Creates an API key for `projectId`; returns the record and the secret (shown once). */
export async function createApiKey(
  store: Store,
  projectId: string,
  name: string,
  now: number,
  expiresIn?: number,
  secret: string = generateApiKeySecret(),
): Promise<{ record: ApiKeyRecord; secret: string }> {
  const record: ApiKeyRecord = {
    id: uuidv7(now),
    projectId,
    name,
    hash: hashSecret(secret),
    createdAt: now,
    ...(expiresIn !== undefined ? { expiresAt: now + expiresIn * 1000 } : {}),
  };
  await store.createApiKey(record);
  return { record, secret };
}

/** Registers the bootstrap key if its hash is not known yet; true when it was added. */
export async function ensureBootstrapApiKey(store: Store, projectId: string, secret: string, now: number): Promise<boolean> {
  if ((await store.getApiKeyByHash(hashSecret(secret))) !== undefined) return false;
  try {
    await createApiKey(store, projectId, "bootstrap", now, undefined, secret);
    return true;
  } catch (error) {
    if ((error as { kind?: string }).kind === "already_exists") return false;
    throw error;
  }
}

/** Revokes an API key of `projectId` by id. */
export async function revokeApiKey(store: Store, projectId: string, id: string, now: number): Promise<ApiKeyRecord> {
  return store.updateApiKey(projectId, id, (key) => (key.revokedAt === undefined ? { ...key, revokedAt: now } : undefined));
}
