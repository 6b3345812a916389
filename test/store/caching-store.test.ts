/**
 * The caching store: it passes the whole store contract in front of LMDB (its own writes are
 * seen at once, another instance's once the change counter has been checked), it trusts memory
 * only for `maxStalenessMs` after a check whether or not its timer runs, and its memory stays
 * bounded whatever is probed.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { CachingStore } from "../../src/store/caching-store.ts";
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import type { ApiKeyRecord, ClientJwksRecord, Store } from "../../src/store/store.ts";
import { tempDir } from "../helpers/app.ts";
import { runChangeSeqNowFreshness, runRevocationFreshness } from "./contract-changes.ts";
import { runStoreContract } from "./contract.ts";
import { countingStore } from "./counting-store.ts";
import { T0, apiKeyRecord, clientJwksRecord, clientRecord, clientSecretRecord, newProjectId, providerRecord } from "./fixtures.ts";

const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));
const STALENESS = 500;

/** A monotonic clock the test moves by hand. */
class ManualClock {
  ms = 1_000_000;
  now = () => this.ms;
}

runStoreContract("lmdb behind the cache", async () => {
  const dir = tempDir("tokenmint-cache-");
  const clock = new ManualClock();
  // The clock never moves by itself: everything read stays in memory unless invalidated.
  const store = new CachingStore(openLmdbStore(dir.path), { now: clock.now, maxStalenessMs: STALENESS });
  return {
    store,
    cleanup: async () => {
      await store.close();
      dir.remove();
    },
    other: {
      open: async () => openLmdbStore(dir.path),
      // Another process's write is seen once the staleness window has passed.
      settle: async () => {
        await nextTurn();
        clock.ms += STALENESS + 1;
      },
    },
  };
});

const A = newProjectId(T0);

// Its clock never moves: only the check that changeSeqNow makes lets it see the child's write.
runChangeSeqNowFreshness((dataDir) => new CachingStore(openLmdbStore(dataDir), { now: () => 0, maxStalenessMs: STALENESS }), A);
runRevocationFreshness((dataDir) => new CachingStore(openLmdbStore(dataDir), { now: () => 0, maxStalenessMs: STALENESS }), A);

interface Fixture {
  cache: CachingStore;
  counted: ReturnType<typeof countingStore>;
  /** A plain second instance on the same file: another process, such as the CLI. */
  other: Store;
  clock: ManualClock;
}

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of open.splice(0)) await close();
});

async function fixture(options: { maxEntries?: number; pollIntervalMs?: number } = {}): Promise<Fixture> {
  const dir = tempDir("tokenmint-cache-");
  const clock = new ManualClock();
  const counted = countingStore(openLmdbStore(dir.path));
  const cache = new CachingStore(counted.store, { now: clock.now, maxStalenessMs: STALENESS, ...options });
  const other = openLmdbStore(dir.path);
  open.push(async () => {
    await cache.close();
    await other.close();
    dir.remove();
  });
  return { cache, counted, other, clock };
}

describe("caching store", () => {
  test("repeated reads of cached kinds read the backend once", async () => {
    const { cache, counted } = await fixture();
    const p = providerRecord(A, T0);
    const c = clientRecord(p, T0 + 1);
    await cache.createProvider(p);
    await cache.createClient(c);
    await cache.createClientSecret(clientSecretRecord(c, T0 + 2, "s"), 2);
    await cache.createApiKey(apiKeyRecord(A, T0 + 3, "k"));
    counted.reset();
    for (let i = 0; i < 10; i++) {
      expect(await cache.getProvider(A, p.id)).toEqual(p);
      expect(await cache.getClient(A, p.id, c.id)).toEqual(c);
      expect(await cache.getClientById(A, c.id)).toEqual(c);
      expect(await cache.listClientSecrets(A, c.id)).toHaveLength(1);
      expect((await cache.getApiKeyByHash("k"))?.hash).toBe("k");
    }
    expect(counted.dataReads()).toBe(5);
    // One check of the change counter, at the first read; the clock did not move since.
    expect(counted.calls.get("changeSeq")).toBe(1);
  });

  test("without the timer: memory is trusted for maxStalenessMs, then the next read checks the counter first", async () => {
    const { cache, counted, other, clock } = await fixture();
    const key = apiKeyRecord(A, T0, "k");
    await other.createApiKey(key);
    await nextTurn();
    expect(await cache.getApiKeyByHash("k")).toEqual(key);
    const revoked = await other.updateApiKey(A, key.id, (cur) => ({ ...cur, revokedAt: T0 + 1 }));
    await nextTurn();
    // Within the window the answer comes from memory (the documented staleness)...
    clock.ms += STALENESS;
    counted.reset();
    expect(await cache.getApiKeyByHash("k")).toEqual(key);
    expect(counted.calls.size).toBe(0);
    // ...and never after it: this read checks the counter, sees the write, reads again.
    clock.ms += 1;
    expect(await cache.getApiKeyByHash("k")).toEqual(revoked);
    expect(counted.calls.get("changeSeq")).toBe(1);
    expect(counted.calls.get("getApiKeyByHash")).toBe(1);
  });

  test("an unchanged counter keeps memory: a check after the window costs one counter read and no data read", async () => {
    const { cache, counted, clock } = await fixture();
    await cache.createApiKey(apiKeyRecord(A, T0, "k"));
    await cache.getApiKeyByHash("k");
    // Our own write moved the counter once; the next check takes that in.
    clock.ms += STALENESS + 1;
    await cache.getApiKeyByHash("k");
    counted.reset();
    for (let round = 0; round < 3; round++) {
      clock.ms += STALENESS + 1;
      expect((await cache.getApiKeyByHash("k"))?.hash).toBe("k");
    }
    expect(Object.fromEntries(counted.calls)).toEqual({ changeSeq: 3 });
  });

  test("with the timer: another instance's write is picked up by the poll, without any read waiting for it", async () => {
    const { cache, other } = await fixture({ pollIntervalMs: 10 });
    const p = providerRecord(A, T0);
    await other.createProvider(p);
    await nextTurn();
    expect(await cache.getProvider(A, p.id)).toEqual(p);
    cache.start();
    const renamed = await other.updateProvider(A, p.id, (cur) => ({ ...cur, name: "renamed" }));
    // The manual clock never moves, so only the poll can drop the old record.
    const deadline = Date.now() + 5000;
    while ((await cache.getProvider(A, p.id))?.name !== "renamed" && Date.now() < deadline) await Bun.sleep(5);
    expect(await cache.getProvider(A, p.id)).toEqual(renamed);
    cache.stop();
  });

  test("own writes are seen at once, before any check", async () => {
    const { cache } = await fixture();
    const key = apiKeyRecord(A, T0, "k");
    await cache.createApiKey(key);
    expect(await cache.getApiKeyByHash("k")).toEqual(key);
    await cache.updateApiKey(A, key.id, (cur) => ({ ...cur, revokedAt: T0 + 1 }));
    expect((await cache.getApiKeyByHash("k"))?.revokedAt).toBe(T0 + 1);
    const p = providerRecord(A, T0);
    const c = clientRecord(p, T0 + 1);
    await cache.createProvider(p);
    await cache.createClient(c);
    expect(await cache.listClientSecrets(A, c.id)).toEqual([]);
    await cache.createClientSecret(clientSecretRecord(c, T0 + 2, "s1"), 2);
    expect(await cache.listClientSecrets(A, c.id)).toHaveLength(1);
    const secret2 = clientSecretRecord(c, T0 + 3, "s2");
    await cache.createClientSecret(secret2, 2);
    expect(await cache.listClientSecrets(A, c.id)).toHaveLength(2);
    await cache.deleteClientSecret(A, c.id, secret2.id);
    expect((await cache.listClientSecrets(A, c.id)).map((s) => s.hash)).toEqual(["s1"]);
    await cache.deleteClient(A, p.id, c.id);
    expect(await cache.getClientById(A, c.id)).toBeUndefined();
    expect(await cache.listClientSecrets(A, c.id)).toEqual([]);
  });

  test("a read that races a write of this store does not keep the old record", async () => {
    const dir = tempDir("tokenmint-cache-");
    const lmdb = openLmdbStore(dir.path);
    // The backend answers the raced read only when the test says so.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let gated = true;
    const slow = new Proxy(lmdb, {
      get(target, name) {
        const value = Reflect.get(target, name) as unknown;
        if (typeof value !== "function") return value;
        if (name !== "getApiKeyByHash") return (value as (...a: unknown[]) => unknown).bind(target);
        return async (hash: string) => {
          const record = await lmdb.getApiKeyByHash(hash);
          if (gated) await gate;
          return record;
        };
      },
    });
    const cache = new CachingStore(slow, { now: new ManualClock().now });
    open.push(async () => {
      await cache.close();
      dir.remove();
    });
    const key = apiKeyRecord(A, T0, "k");
    await cache.createApiKey(key);
    const raced = cache.getApiKeyByHash("k");
    await Bun.sleep(5);
    // The read holds the old record; the revocation commits before it answers.
    await cache.updateApiKey(A, key.id, (cur) => ({ ...cur, revokedAt: T0 + 1 }));
    release();
    expect(await raced).toEqual(key);
    gated = false;
    expect((await cache.getApiKeyByHash("k"))?.revokedAt).toBe(T0 + 1);
  });

  test("memory is bounded: at most maxEntries per kind, and misses are never stored", async () => {
    const { cache, counted } = await fixture({ maxEntries: 3 });
    for (let i = 0; i < 5; i++) await cache.createApiKey(apiKeyRecord(A, T0 + i, `k${i}`));
    for (let i = 0; i < 5; i++) await cache.getApiKeyByHash(`k${i}`);
    expect(cache.entryCount).toBe(3);
    // The newest entries stay; the oldest were dropped.
    counted.reset();
    for (let i = 2; i < 5; i++) await cache.getApiKeyByHash(`k${i}`);
    expect(counted.dataReads()).toBe(0);

    // Probing unknown keys and ids stores nothing and evicts nothing.
    for (let i = 0; i < 200; i++) {
      expect(await cache.getApiKeyByHash(`probe-${i}`)).toBeUndefined();
      expect(await cache.getClientById(A, `probe-${i}`)).toBeUndefined();
      expect(await cache.listClientSecrets(A, `probe-${i}`)).toEqual([]);
    }
    expect(counted.dataReads()).toBe(600);
    expect(cache.entryCount).toBe(3);
    counted.reset();
    for (let i = 2; i < 5; i++) await cache.getApiKeyByHash(`k${i}`);
    expect(counted.dataReads()).toBe(0);
  });

  test("cached records are frozen: a caller cannot change what the next caller gets", async () => {
    const { cache } = await fixture();
    await cache.createApiKey(apiKeyRecord(A, T0, "k"));
    const first = (await cache.getApiKeyByHash("k")) as ApiKeyRecord;
    expect(() => {
      (first as { name: string }).name = "changed";
    }).toThrow();
    expect((await cache.getApiKeyByHash("k"))?.name).toBe("key k");
  });

  test("a cached key set is frozen all the way down: neither its list of keys nor a key can be changed", async () => {
    const { cache } = await fixture();
    const provider = providerRecord(A, T0);
    const client = clientRecord(provider, T0);
    await cache.createProvider(provider);
    await cache.createClient(client);
    await cache.putClientJwks(clientJwksRecord(client, T0));
    const first = (await cache.getClientJwks(A, client.id)) as ClientJwksRecord;
    const kept = JSON.stringify(first);
    expect(() => first.keys.push({ kty: "EC" })).toThrow();
    expect(() => {
      (first.keys[0] as Record<string, string>).x = "changed";
    }).toThrow();
    expect(JSON.stringify(await cache.getClientJwks(A, client.id))).toBe(kept);
  });

  test("a failed counter check trusts nothing and caches nothing until a check succeeds", async () => {
    const { cache, counted, clock } = await fixture();
    await cache.createApiKey(apiKeyRecord(A, T0, "k"));
    await cache.getApiKeyByHash("k");
    const inner = counted.store as unknown as { changeSeq: () => Promise<number> };
    inner.changeSeq = () => Promise.reject(new Error("store unavailable"));
    clock.ms += STALENESS + 1;
    counted.reset();
    await cache.getApiKeyByHash("k");
    await cache.getApiKeyByHash("k");
    expect(counted.calls.get("getApiKeyByHash")).toBe(2);
    Reflect.deleteProperty(counted.store, "changeSeq");
  });
});
