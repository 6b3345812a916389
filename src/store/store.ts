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

/**
 * A project's own settings. An absent field means "the instance default" (the configured signing
 * algorithm and rotation period, the contract's 3600 s token lifetime, no custom domain).
 */
export interface ProjectSettings {
  signingAlg?: SigningAlg;
  /** Seconds between automatic rotations; 0 = off. */
  keyRotationPeriod?: number;
  /** Lifetime in seconds of a token requested without `expiresIn`. */
  defaultTokenLifetime?: number;
  /** Host name (lowercase, optional `:port`) that serves the project besides its own host. */
  customDomain?: string;
}

export interface ProjectRecord extends ProjectSettings {
  id: string;
  name: string;
  /**
   * DNS label of the project's own host, `<slug>.<base domain>`; unique on the instance. The
   * default project, created before projects had slugs, may lack it (it is served at the public URL).
   */
  slug?: string;
  createdAt: number;
  updatedAt?: number;
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
  /**
   * Set by "revoke all tokens of the client": a token of this client issued before this instant
   * (epoch ms; compared with the token's `iat` in seconds) is no longer active.
   */
  tokensRevokedBefore?: number;
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

/**
 * The public keys a client authenticates with by `private_key_jwt` (RFC 7523): one record per
 * client, replaced as a whole. Kept apart from the client record so that reading a client (every
 * token request, every listing) does not carry its keys, like its secrets.
 */
export interface ClientJwksRecord {
  projectId: string;
  clientId: string;
  /** Public JWK members only (kty, kid, use, alg, n, e, crv, x, y); every key has a unique kid. */
  keys: Record<string, string>[];
  updatedAt: number;
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

/**
 * One signing key. The private half is sealed with the master key (AES-256-GCM) while the key may
 * sign (next, current); it is dropped when the key retires, which keeps only its public half.
 */
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
  /** base64url(iv || ciphertext || tag) of the private JWK JSON; absent once the key retired. */
  sealedPrivateJwk?: string;
}

/** All signing keys of one project, changed only as a whole by compare-and-swap. */
export interface KeySetRecord {
  projectId: string;
  /** Incremented on every change; the compare-and-swap token. */
  version: number;
  /** When a key last became current (drives the rotation timer). */
  rotatedAt: number;
  keys: SigningKeyRecord[];
  /** The JWKS max-age (s) the set is served with, as key maintenance last recorded it; absent: the bound, 300 (keys/lifecycle.ts recordMaxAge). */
  servedMaxAge?: number;
  /** Until when (epoch ms) a JWKS served under a longer max-age than the present one may be held: no next key signs before then. */
  cachedUntil?: number;
  /** When (epoch ms, after it) the set's instants were last moved with a clock that jumped forward (keys/lifecycle.ts shiftKeySet). */
  clockStepAt?: number;
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

/** The projects and key sets written after a reader last caught up (Store#keysChangedSince). */
export interface KeysChanges {
  /** The counter of project and key-set writes as of the read (Store#keysChangeSeq). */
  seq: number;
  /** Ids of the projects whose record was written (created or updated), each once. */
  projects: string[];
  /** Ids of the projects whose key set was written, each once. */
  keySets: string[];
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
   * A counter that grows with every committed write, by this or any other process, of the data a
   * server keeps in memory: everything but used assertion jtis and revoked tokens, which are read
   * from the data every time (a write that ends up changing nothing may bump it too). A cache
   * that saw it unchanged knows none of its data was written meanwhile (store/caching-store.ts).
   */
  changeSeq(): Promise<number>;

  /**
   * The same counter, read synchronously and as of the latest commit (reads made after it see
   * at least that commit). Offered only where that is a local read of well under a microsecond's
   * work (LMDB), so a server can check it on every request and serve every write, of any
   * process, from the next request on (keys/key-service.ts follow). Stores without it are polled.
   */
  changeSeqNow?(): number;

  /**
   * A counter that grows with every committed write of a project or a key set (in the same
   * transaction), by any process: what a server's project directory and key rings are made of.
   * A server that saw it unchanged since it last caught up skips re-reading every project and
   * key set after a write of other data (a client, an API key).
   */
  keysChangeSeq(): Promise<number>;

  /**
   * What the writes counted by `keysChangeSeq` after it stood at `since` wrote, read in one
   * snapshot with the counter: a server brings only those projects and key sets up to date
   * instead of re-reading them all. Undefined when the store cannot tell (it remembers the latest
   * writes only, and a process of an earlier build writes without telling): the caller then
   * re-reads everything.
   */
  keysChangedSince(since: number): Promise<KeysChanges | undefined>;

  getMeta<T>(name: string): Promise<T | undefined>;
  /** Writes a meta value only if it is not set yet; returns the value now stored. */
  initMeta<T>(name: string, value: T): Promise<T>;
  /** Writes a meta value, replacing the one stored. */
  setMeta<T>(name: string, value: T): Promise<void>;

  /**
   * Throws already_exists when the id, the slug or the custom domain is taken (checked in one
   * transaction). With `keySet` (the project's first, of version 1), the project and its keys are
   * written in that one transaction: no reader ever finds the project without keys.
   */
  createProject(project: ProjectRecord, keySet?: KeySetRecord): Promise<void>;
  getProject(id: string): Promise<ProjectRecord | undefined>;
  listProjects(): Promise<ProjectRecord[]>;
  /**
   * Throws not_found when absent, conflict when the updated slug or custom domain belongs to
   * another project (checked in the same transaction as the write).
   */
  updateProject(id: string, update: Updater<ProjectRecord>): Promise<ProjectRecord>;

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
  /** Deletes the client, all its secrets, its public keys and the assertion ids it used, in one transaction; not_found when absent. */
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

  /** Replaces the client's public keys; not_found when the client does not exist (same transaction). */
  putClientJwks(jwks: ClientJwksRecord): Promise<void>;
  /** The client's public keys, or undefined when it has none (or does not exist). */
  getClientJwks(projectId: string, clientId: string): Promise<ClientJwksRecord | undefined>;
  /** Removes the client's public keys; not_found when it has none. */
  deleteClientJwks(projectId: string, clientId: string): Promise<void>;

  /**
   * Records the use of a client assertion's `jti` until `expiresAt`, atomically across processes:
   * true the first time, false while an earlier use of the same (client, jti) is unexpired at
   * `now`. Each call also removes a bounded number of the project's entries expired at `now`, so
   * the records never outgrow the assertions used within their (short) lifetime; `pruneExpired`
   * removes the rest once they expired, and `deleteClient` those of the client.
   */
  useAssertionJti(projectId: string, clientId: string, jti: string, expiresAt: number, now: number): Promise<boolean>;

  /** Throws already_exists when a key with the same hash exists. */
  createApiKey(key: ApiKeyRecord): Promise<void>;
  getApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  listApiKeys(projectId: string): Promise<ApiKeyRecord[]>;
  updateApiKey(projectId: string, id: string, update: Updater<ApiKeyRecord>): Promise<ApiKeyRecord>;

  /**
   * Records that the token `jti` of the project is revoked until `expiresAt` (epoch ms: the
   * token's `exp`), after which it is expired anyway and the entry may go. Idempotent: revoking
   * again keeps the later `expiresAt`. Removes a few entries of the project expired at `now` in
   * the same transaction, so the list stays bounded even without `pruneExpired`.
   */
  revokeToken(projectId: string, jti: string, expiresAt: number, now: number): Promise<void>;
  /** Whether `jti` is revoked at `now`: an entry whose `expiresAt` is past counts as gone, pruned or not. */
  isTokenRevoked(projectId: string, jti: string, now: number): Promise<boolean>;
  /**
   * Removes up to `limit` entries (of any project) whose expiry is at or before `now`, revocations
   * and used assertion ids alike, in one transaction; returns how many it removed (fewer than
   * `limit`: none are left).
   */
  pruneExpired(now: number, limit: number): Promise<number>;

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
