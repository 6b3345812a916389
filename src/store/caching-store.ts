/**
 * @module store/caching-store
 * A Store in front of another one that keeps the reads of the token path in memory: API keys by
 * hash, providers, clients (by provider and id, and by id alone) and a client's secrets. Every
 * other call goes straight through. `serve` uses it, so issuing a token reads nothing from the
 * data in the steady state.
 *
 * Invalidation:
 * - a write made through this store drops the entries it touches at once;
 * - a write made anywhere else (another worker, the CLI) moves the backend's change counter
 *   (`Store#changeSeq`); when a check sees it moved, everything is dropped.
 * Answers are served from memory only while the last check of the counter is at most
 * `maxStalenessMs` old. Where the store behind offers `changeSeqNow`, so does this one, and a
 * call of it is a check: the server makes one at the start of every request
 * (keys/key-service.ts follow), so what a request reads from memory is never older than the data
 * was when the request began. `start()` checks every `pollIntervalMs`, so with the timer running the
 * token path never waits for a check; without it (or while the event loop is stalled), the next
 * read checks the counter itself before it trusts memory. So an outside change is served after
 * `maxStalenessMs` at the latest, whether or not the timer runs.
 *
 * Memory is bounded: each kind holds at most `maxEntries` entries (the oldest go first), and a
 * miss (an unknown API key, client or provider, a client without secrets) is never stored, so
 * probing random keys or ids neither grows memory nor evicts real entries. Client public keys
 * (private_key_jwt) are cached like secrets; used assertion jtis and revocations never are.
 */
import type {
  ApiKeyRecord,
  ClientJwksRecord,
  ClientRecord,
  ClientSecretRecord,
  KeySetRecord,
  KeysChanges,
  Page,
  PageRequest,
  ProjectRecord,
  ProviderRecord,
  Store,
  Updater,
} from "./store.ts";

export interface CachingStoreOptions {
  /** Longest time memory is trusted after the last check of the change counter (ms). */
  maxStalenessMs?: number;
  /** How often `start()` checks the change counter (ms). */
  pollIntervalMs?: number;
  /** Most entries held per kind (API keys, providers, clients, clients by id, secret lists). */
  maxEntries?: number;
  /** Monotonic milliseconds; tests pin it. */
  now?: () => number;
}

export const CACHE_DEFAULTS = { maxStalenessMs: 500, pollIntervalMs: 250, maxEntries: 10_000 } as const;

/** A map that keeps at most `max` entries, dropping the oldest insertion first. */
class BoundedMap<V> {
  readonly #max: number;
  readonly #map = new Map<string, V>();

  constructor(max: number) {
    this.#max = max;
  }

  get size(): number {
    return this.#map.size;
  }

  get(key: string): V | undefined {
    return this.#map.get(key);
  }

  set(key: string, value: V): void {
    this.#map.delete(key);
    if (this.#map.size >= this.#max) {
      const oldest = this.#map.keys().next();
      if (oldest.done !== true) this.#map.delete(oldest.value);
    }
    this.#map.set(key, value);
  }

  delete(key: string): void {
    this.#map.delete(key);
  }

  /** Drops every entry whose value matches. */
  deleteWhere(match: (value: V) => boolean): void {
    for (const [key, value] of this.#map) if (match(value)) this.#map.delete(key);
  }

  clear(): void {
    this.#map.clear();
  }
}

/**
 * Cached records are shared between callers: frozen all the way down (a client's key set holds an
 * array of keys), so no caller can change another's view, and what callers keep per object (the
 * parsed key of each registered key, core/oauth/client-assertion.ts) stays true to it.
 */
function frozen<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const member of Object.values(value)) frozen(member);
    Object.freeze(value);
  }
  return value;
}

const k2 = (a: string, b: string) => `${a}\u0000${b}`;
const k3 = (a: string, b: string, c: string) => `${a}\u0000${b}\u0000${c}`;

export class CachingStore implements Store {
  readonly description: string;
  readonly #inner: Store;
  readonly #maxStalenessMs: number;
  readonly #pollIntervalMs: number;
  readonly #now: () => number;

  readonly #apiKeys: BoundedMap<ApiKeyRecord>;
  readonly #providers: BoundedMap<ProviderRecord>;
  readonly #clients: BoundedMap<ClientRecord>;
  readonly #clientsById: BoundedMap<ClientRecord>;
  readonly #secrets: BoundedMap<ClientSecretRecord[]>;
  readonly #jwks: BoundedMap<ClientJwksRecord>;

  /** The change counter at the last check; undefined before the first (or after a failed) one. */
  #seq: number | undefined;
  /** When the last successful check started (its answer is at least that fresh). */
  #checkedAt = Number.NEGATIVE_INFINITY;
  #checking: Promise<void> | undefined;
  /** Grows on every invalidation: a read that began before one must not store what it read. */
  #generation = 0;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(inner: Store, options: CachingStoreOptions = {}) {
    this.#inner = inner;
    this.description = inner.description;
    this.#maxStalenessMs = options.maxStalenessMs ?? CACHE_DEFAULTS.maxStalenessMs;
    this.#pollIntervalMs = options.pollIntervalMs ?? CACHE_DEFAULTS.pollIntervalMs;
    this.#now = options.now ?? (() => performance.now());
    const max = options.maxEntries ?? CACHE_DEFAULTS.maxEntries;
    this.#apiKeys = new BoundedMap(max);
    this.#providers = new BoundedMap(max);
    this.#clients = new BoundedMap(max);
    this.#clientsById = new BoundedMap(max);
    this.#secrets = new BoundedMap(max);
    this.#jwks = new BoundedMap(max);
    if (inner.changeSeqNow !== undefined) this.changeSeqNow = () => this.#observe(() => (inner.changeSeqNow as () => number).call(inner));
  }

  /** Entries held now, all kinds together. */
  get entryCount(): number {
    return this.#apiKeys.size + this.#providers.size + this.#clients.size + this.#clientsById.size + this.#secrets.size + this.#jwks.size;
  }

  /** Starts checking the change counter every `pollIntervalMs` (the server does, while it runs). */
  start(): void {
    this.#timer ??= setInterval(() => void this.#check(), this.#pollIntervalMs);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #fresh(): boolean {
    return this.#now() - this.#checkedAt <= this.#maxStalenessMs;
  }

  #invalidateAll(): void {
    this.#generation++;
    this.#apiKeys.clear();
    this.#providers.clear();
    this.#clients.clear();
    this.#clientsById.clear();
    this.#secrets.clear();
    this.#jwks.clear();
  }

  /** Reads the change counter (one read at a time); drops everything when it moved. */
  #check(): Promise<void> {
    this.#checking ??= (async () => {
      const startedAt = this.#now();
      try {
        const seq = await this.#inner.changeSeq();
        if (seq !== this.#seq) {
          this.#invalidateAll();
          this.#seq = seq;
        }
        this.#checkedAt = startedAt;
      } catch {
        // Nothing is known: trust nothing until a check succeeds again.
        this.#invalidateAll();
        this.#seq = undefined;
        this.#checkedAt = Number.NEGATIVE_INFINITY;
      } finally {
        this.#checking = undefined;
      }
    })();
    return this.#checking;
  }

  /**
   * The entry at `key`, or what `load` reads: stored unless it is a miss, or an invalidation
   * happened while it was read (it may predate the write that caused it).
   */
  async #read<V>(map: BoundedMap<V>, key: string, load: () => Promise<V | undefined>, isHit: (value: V) => boolean): Promise<V | undefined> {
    if (!this.#fresh()) await this.#check();
    const cached = map.get(key);
    if (cached !== undefined) return cached;
    const generation = this.#generation;
    const value = await load();
    if (value === undefined || !isHit(value)) return value;
    if (generation === this.#generation) {
      const shared = frozen(value);
      map.set(key, shared);
      return shared;
    }
    return value;
  }

  /** Runs a write, then drops what it may have changed (also when it failed: nothing is guessed). */
  async #write<T>(write: Promise<T>, drop: () => void): Promise<T> {
    try {
      return await write;
    } finally {
      this.#generation++;
      drop();
    }
  }

  #dropClient(projectId: string, providerId: string, id: string): void {
    this.#clients.delete(k3(projectId, providerId, id));
    this.#clientsById.delete(k2(projectId, id));
    this.#secrets.delete(k2(projectId, id));
    this.#jwks.delete(k2(projectId, id));
  }

  changeSeq(): Promise<number> {
    return this.#inner.changeSeq();
  }

  keysChangeSeq(): Promise<number> {
    return this.#inner.keysChangeSeq();
  }

  keysChangedSince(since: number): Promise<KeysChanges | undefined> {
    return this.#inner.keysChangedSince(since);
  }

  /** The store behind's `changeSeqNow`, where it has one, as a check of the counter (drops everything if it moved). */
  readonly changeSeqNow?: () => number;

  #observe(read: () => number): number {
    const startedAt = this.#now();
    let seq: number;
    try {
      seq = read();
    } catch (error) {
      this.#invalidateAll();
      this.#seq = undefined;
      this.#checkedAt = Number.NEGATIVE_INFINITY;
      throw error;
    }
    if (seq !== this.#seq) {
      this.#invalidateAll();
      this.#seq = seq;
    }
    if (startedAt > this.#checkedAt) this.#checkedAt = startedAt;
    return seq;
  }

  getMeta<T>(name: string): Promise<T | undefined> {
    return this.#inner.getMeta<T>(name);
  }

  initMeta<T>(name: string, value: T): Promise<T> {
    return this.#write(this.#inner.initMeta(name, value), () => {});
  }

  setMeta<T>(name: string, value: T): Promise<void> {
    return this.#write(this.#inner.setMeta(name, value), () => {});
  }

  createProject(project: ProjectRecord, keySet?: KeySetRecord): Promise<void> {
    return this.#write(this.#inner.createProject(project, keySet), () => {});
  }

  getProject(id: string): Promise<ProjectRecord | undefined> {
    return this.#inner.getProject(id);
  }

  updateProject(id: string, update: Updater<ProjectRecord>): Promise<ProjectRecord> {
    return this.#write(this.#inner.updateProject(id, update), () => {});
  }

  listProjects(): Promise<ProjectRecord[]> {
    return this.#inner.listProjects();
  }

  createProvider(provider: ProviderRecord): Promise<void> {
    return this.#write(this.#inner.createProvider(provider), () => this.#providers.delete(k2(provider.projectId, provider.id)));
  }

  getProvider(projectId: string, id: string): Promise<ProviderRecord | undefined> {
    return this.#read(this.#providers, k2(projectId, id), () => this.#inner.getProvider(projectId, id), () => true);
  }

  listProviders(projectId: string, page: PageRequest): Promise<Page<ProviderRecord>> {
    return this.#inner.listProviders(projectId, page);
  }

  updateProvider(projectId: string, id: string, update: Updater<ProviderRecord>): Promise<ProviderRecord> {
    return this.#write(this.#inner.updateProvider(projectId, id, update), () => this.#providers.delete(k2(projectId, id)));
  }

  deleteProvider(projectId: string, id: string): Promise<void> {
    return this.#write(this.#inner.deleteProvider(projectId, id), () => this.#providers.delete(k2(projectId, id)));
  }

  createClient(client: ClientRecord): Promise<void> {
    return this.#write(this.#inner.createClient(client), () => this.#dropClient(client.projectId, client.providerId, client.id));
  }

  getClient(projectId: string, providerId: string, id: string): Promise<ClientRecord | undefined> {
    return this.#read(this.#clients, k3(projectId, providerId, id), () => this.#inner.getClient(projectId, providerId, id), () => true);
  }

  getClientById(projectId: string, id: string): Promise<ClientRecord | undefined> {
    return this.#read(this.#clientsById, k2(projectId, id), () => this.#inner.getClientById(projectId, id), () => true);
  }

  listClients(projectId: string, providerId: string, page: PageRequest): Promise<Page<ClientRecord>> {
    return this.#inner.listClients(projectId, providerId, page);
  }

  updateClient(projectId: string, providerId: string, id: string, update: Updater<ClientRecord>): Promise<ClientRecord> {
    return this.#write(this.#inner.updateClient(projectId, providerId, id, update), () => this.#dropClient(projectId, providerId, id));
  }

  deleteClient(projectId: string, providerId: string, id: string): Promise<void> {
    return this.#write(this.#inner.deleteClient(projectId, providerId, id), () => this.#dropClient(projectId, providerId, id));
  }

  createClientSecret(secret: ClientSecretRecord, maxSecrets: number): Promise<void> {
    return this.#write(this.#inner.createClientSecret(secret, maxSecrets), () => this.#secrets.delete(k2(secret.projectId, secret.clientId)));
  }

  listClientSecrets(projectId: string, clientId: string): Promise<ClientSecretRecord[]> {
    return this.#read(this.#secrets, k2(projectId, clientId), () => this.#inner.listClientSecrets(projectId, clientId), (list) => list.length > 0).then(
      (list) => list ?? [],
    );
  }

  deleteClientSecret(projectId: string, clientId: string, id: string): Promise<void> {
    return this.#write(this.#inner.deleteClientSecret(projectId, clientId, id), () => this.#secrets.delete(k2(projectId, clientId)));
  }

  putClientJwks(jwks: ClientJwksRecord): Promise<void> {
    return this.#write(this.#inner.putClientJwks(jwks), () => this.#jwks.delete(k2(jwks.projectId, jwks.clientId)));
  }

  getClientJwks(projectId: string, clientId: string): Promise<ClientJwksRecord | undefined> {
    return this.#read(this.#jwks, k2(projectId, clientId), () => this.#inner.getClientJwks(projectId, clientId), () => true);
  }

  deleteClientJwks(projectId: string, clientId: string): Promise<void> {
    return this.#write(this.#inner.deleteClientJwks(projectId, clientId), () => this.#jwks.delete(k2(projectId, clientId)));
  }

  /** A write on every call (single use across processes): never cached. */
  useAssertionJti(projectId: string, clientId: string, jti: string, expiresAt: number, now: number): Promise<boolean> {
    return this.#write(this.#inner.useAssertionJti(projectId, clientId, jti, expiresAt, now), () => {});
  }

  revokeToken(projectId: string, jti: string, expiresAt: number, now: number): Promise<void> {
    return this.#write(this.#inner.revokeToken(projectId, jti, expiresAt, now), () => {});
  }

  /** Introspection must see a revocation by any process at once: never cached. */
  isTokenRevoked(projectId: string, jti: string, now: number): Promise<boolean> {
    return this.#inner.isTokenRevoked(projectId, jti, now);
  }

  pruneExpired(now: number, limit: number): Promise<number> {
    return this.#write(this.#inner.pruneExpired(now, limit), () => {});
  }

  createApiKey(key: ApiKeyRecord): Promise<void> {
    return this.#write(this.#inner.createApiKey(key), () => this.#apiKeys.delete(key.hash));
  }

  getApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    return this.#read(this.#apiKeys, hash, () => this.#inner.getApiKeyByHash(hash), () => true);
  }

  listApiKeys(projectId: string): Promise<ApiKeyRecord[]> {
    return this.#inner.listApiKeys(projectId);
  }

  updateApiKey(projectId: string, id: string, update: Updater<ApiKeyRecord>): Promise<ApiKeyRecord> {
    return this.#write(this.#inner.updateApiKey(projectId, id, update), () =>
      this.#apiKeys.deleteWhere((key) => key.projectId === projectId && key.id === id),
    );
  }

  getKeySet(projectId: string): Promise<KeySetRecord | undefined> {
    return this.#inner.getKeySet(projectId);
  }

  swapKeySet(next: KeySetRecord, expectedVersion: number): Promise<boolean> {
    return this.#write(this.#inner.swapKeySet(next, expectedVersion), () => {});
  }

  backup(path: string): Promise<void> {
    return this.#inner.backup(path);
  }

  async close(): Promise<void> {
    this.stop();
    this.#invalidateAll();
    await this.#inner.close();
  }
}
