/**
 * @module store
 * The only storage contract of the service. Core code talks to this interface; each backend
 * (store/lmdb today) lives in its own folder and passes the same contract suite
 * (test/store/contract.ts). Every record carries its project id, and every lookup is scoped by
 * it, so one project never reads another's records. Times are epoch milliseconds (UTC).
 * A resolved write promise means the write is committed durably.
 */
import type { SigningAlg } from "../config/schema.ts";

/** Why a store operation failed; every backend reports these the same way. */
export type StoreErrorKind = "not_found" | "already_exists" | "conflict" | "unavailable";

export class StoreError extends Error {
  readonly kind: StoreErrorKind;
  constructor(kind: StoreErrorKind, message: string) {
    super(message);
    this.name = "StoreError";
    this.kind = kind;
  }
}

export interface ProjectRecord {
  id: string;
  name: string;
  createdAt: number;
}

export interface ProviderRecord {
  id: string;
  projectId: string;
  name: string;
  description: string;
  createdAt: number;
  updatedAt: number;
}

export interface ClientRecord {
  id: string;
  projectId: string;
  providerId: string;
  name: string;
  audience: string;
  createdAt: number;
  updatedAt: number;
}

/**
 * A client secret: what a client presents at the token endpoint (client_secret_basic or
 * client_secret_post). Only the SHA-256 of the secret is kept, plus its last four characters as a
 * hint to tell secrets apart. Revoking a secret deletes its record.
 */
export interface ClientSecretRecord {
  id: string;
  projectId: string;
  clientId: string;
  /** base64url SHA-256 of the full secret string. */
  hash: string;
  /** The last four characters of the secret: enough to recognise it, far too few to use it. */
  lastFour: string;
  createdAt: number;
}

/** A management API key. Only the SHA-256 of the secret is kept. */
export interface ApiKeyRecord {
  id: string;
  projectId: string;
  name: string;
  /** base64url SHA-256 of the full key string. */
  hash: string;
  createdAt: number;
  expiresAt?: number;
  revokedAt?: number;
}

/** Lifecycle state of a signing key (see keys/lifecycle.ts). */
export type KeyState = "next" | "current" | "retired";

/** One signing key. The private half is sealed with the master key (AES-256-GCM). */
export interface SigningKeyRecord {
  kid: string;
  alg: SigningAlg;
  state: KeyState;
  createdAt: number;
  /** When the key became (or becomes) the signing key. */
  activatesAt?: number;
  retiredAt?: number;
  /** After this instant the key is dropped from the JWKS and the store. */
  removedFromJwksAt?: number;
  /** Public JWK members only. */
  publicJwk: Record<string, string>;
  /** base64url(iv || ciphertext || tag) of the private JWK JSON. */
  sealedPrivateJwk: string;
}

/** All signing keys of one project, changed only as a whole by compare-and-swap. */
export interface KeySetRecord {
  projectId: string;
  /** Incremented on every change; the compare-and-swap token. */
  version: number;
  /** When a key last became current (drives the rotation timer). */
  rotatedAt: number;
  keys: SigningKeyRecord[];
}

/** A page of a listing: `after` is the last id of the previous page. */
export interface PageRequest {
  limit: number;
  after?: string;
}

export interface Page<T> {
  items: T[];
  /** The id to pass as `after` for the next page; undefined on the last page. */
  last?: string;
}

/** Returns the new record, or undefined to leave the stored one untouched. */
export type Updater<T> = (current: T) => T | undefined;

/**
 * The store. Implementations must be safe to use from several processes on the same data
 * (the CLI works beside a running server).
 */
export interface Store {
  /** A short backend description for logs ("lmdb <path>"). */
  readonly description: string;

  /**
   * A counter that grows with every committed write to the data, by this or any other process
   * (a write that ends up changing nothing may bump it too). A cache that saw it unchanged knows
   * nothing was written meanwhile (store/caching-store.ts).
   */
  changeSeq(): Promise<number>;

  getMeta<T>(name: string): Promise<T | undefined>;
  /** Writes a meta value only if it is not set yet; returns the value now stored. */
  initMeta<T>(name: string, value: T): Promise<T>;

  createProject(project: ProjectRecord): Promise<void>;
  getProject(id: string): Promise<ProjectRecord | undefined>;
  listProjects(): Promise<ProjectRecord[]>;

  createProvider(provider: ProviderRecord): Promise<void>;
  getProvider(projectId: string, id: string): Promise<ProviderRecord | undefined>;
  listProviders(projectId: string, page: PageRequest): Promise<Page<ProviderRecord>>;
  /** Throws not_found when absent. */
  updateProvider(projectId: string, id: string, update: Updater<ProviderRecord>): Promise<ProviderRecord>;
  /** Throws not_found when absent and conflict while it still has clients. */
  deleteProvider(projectId: string, id: string): Promise<void>;

  /**
   * Throws not_found when the provider does not exist, already_exists when a client with the same
   * id exists under any provider of the project (both checked in the same transaction).
   */
  createClient(client: ClientRecord): Promise<void>;
  getClient(projectId: string, providerId: string, id: string): Promise<ClientRecord | undefined>;
  /** The client with `id` under whichever provider of the project holds it (the token endpoint names no provider). */
  getClientById(projectId: string, id: string): Promise<ClientRecord | undefined>;
  listClients(projectId: string, providerId: string, page: PageRequest): Promise<Page<ClientRecord>>;
  updateClient(projectId: string, providerId: string, id: string, update: Updater<ClientRecord>): Promise<ClientRecord>;
  /** Deletes the client and all its secrets in one transaction; not_found when absent. */
  deleteClient(projectId: string, providerId: string, id: string): Promise<void>;

  /**
   * Stores a new secret of `secret.clientId`. In one transaction: not_found when the client does
   * not exist, conflict when it already holds `maxSecrets` secrets, already_exists when the id is
   * taken. Two racing creates can therefore never leave more than `maxSecrets`.
   */
  createClientSecret(secret: ClientSecretRecord, maxSecrets: number): Promise<void>;
  /** The client's secrets in creation order; empty for an unknown client. */
  listClientSecrets(projectId: string, clientId: string): Promise<ClientSecretRecord[]>;
  /** Deletes (revokes) one secret; not_found when absent. */
  deleteClientSecret(projectId: string, clientId: string, id: string): Promise<void>;

  /** Throws already_exists when a key with the same hash exists. */
  createApiKey(key: ApiKeyRecord): Promise<void>;
  getApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  listApiKeys(projectId: string): Promise<ApiKeyRecord[]>;
  updateApiKey(projectId: string, id: string, update: Updater<ApiKeyRecord>): Promise<ApiKeyRecord>;

  getKeySet(projectId: string): Promise<KeySetRecord | undefined>;
  /**
   * Compare-and-swap on the key set: writes `next` only if the stored version is still
   * `expectedVersion` (0 = no key set yet). Returns false when another writer got there first.
   */
  swapKeySet(next: KeySetRecord, expectedVersion: number): Promise<boolean>;

  /**
   * Writes a consistent snapshot of all data to the new file `path`, safe while other processes
   * write. Signing keys stay sealed under the master key, which the snapshot does not contain.
   * Throws already_exists when `path` exists (it is never overwritten); a resolved promise means
   * the file is complete and flushed to disk.
   */
  backup(path: string): Promise<void>;

  close(): Promise<void>;
}
