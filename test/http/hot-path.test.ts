/**
 * The token path in the steady state reads nothing from the data: with the server's caching
 * store in front of a store that counts every call, the first tokens fill the cache and every
 * later one (management route and OAuth token endpoint alike) is answered from memory. A change
 * made by another process (the CLI) is still honoured once the cache has checked the counter.
 * As `serve` runs it, every request checks the counter once (KeyService#follow), so such a change
 * is honoured from the very next request, and the check is the only read.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { revokeApiKey } from "../../src/core/api-keys.ts";
import { deleteClient } from "../../src/core/clients.ts";
import { CachingStore } from "../../src/store/caching-store.ts";
import { LmdbStore, openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import type { ApiKeyRecord, Store } from "../../src/store/store.ts";
import { buildTestApp, createProviderAndClient, type TestApp } from "../helpers/app.ts";
import { basic, createSecret, tokenRequest } from "../oauth/support.ts";
import { countingStore, type CountingStore } from "../store/counting-store.ts";

const STALENESS = 500;

describe("token hot path", () => {
  let t: TestApp;
  let counted: CountingStore;
  let monotonic = 0;
  let tokenPath: string;
  let oauth: () => Promise<Response>;
  let original: Store;

  beforeAll(async () => {
    t = await buildTestApp();
    original = t.ctx.store;
    counted = countingStore(original);
    // What `serve` runs: the caching store in front of the data. Its clock moves only by hand.
    t.ctx.store = new CachingStore(counted.store, { now: () => monotonic, maxStalenessMs: STALENESS });
    const { providerId, clientId } = await createProviderAndClient(t);
    const { secret } = await createSecret(t, providerId, clientId);
    tokenPath = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
    oauth = () => tokenRequest(t, { grant_type: "client_credentials" }, { authorization: basic(clientId, secret) });
    // The writes above moved the change counter: the first token's check takes them in.
    monotonic += STALENESS + 1;
  });
  afterAll(async () => {
    t.ctx.store = original;
    await t.close();
  });

  test("after the first token of each route, 100 more read nothing from the store", async () => {
    expect((await t.api("POST", tokenPath)).status).toBe(201);
    expect((await oauth()).status).toBe(200);
    counted.reset();
    for (let i = 0; i < 50; i++) {
      expect((await t.api("POST", tokenPath, { expiresIn: 60 + i })).status).toBe(201);
      expect((await oauth()).status).toBe(200);
    }
    expect(Object.fromEntries(counted.calls)).toEqual({});
  });

  test("after the staleness window, one check of the change counter and still no data read", async () => {
    monotonic += STALENESS + 1;
    counted.reset();
    for (let i = 0; i < 10; i++) {
      expect((await t.api("POST", tokenPath)).status).toBe(201);
      expect((await oauth()).status).toBe(200);
    }
    expect(Object.fromEntries(counted.calls)).toEqual({ changeSeq: 1 });
  });

  test("an API key revoked by another process is refused once the window has passed", async () => {
    const hash = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(t.apiKey));
    const record = (await original.getApiKeyByHash(Buffer.from(hash).toString("base64url"))) as ApiKeyRecord;
    const cli = openLmdbStore(t.dataDir);
    try {
      await revokeApiKey(cli, record.projectId, record.id, t.clock.now());
    } finally {
      await cli.close();
    }
    await Bun.sleep(0);
    monotonic += STALENESS + 1;
    expect((await t.api("POST", tokenPath)).status).toBe(401);
  });
});

describe("token hot path as served: the counter checked on every request", () => {
  let t: TestApp;
  let providerId: string;
  let clientId: string;
  let tokenPath: string;
  let oauth: () => Promise<Response>;
  /** Calls of LmdbStore methods (of every instance) while counting, by name. */
  const calls = new Map<string, number>();
  const originals = new Map<string, (...args: unknown[]) => unknown>();
  const count = () => {
    calls.clear();
    for (const name of Object.getOwnPropertyNames(LmdbStore.prototype)) {
      const method = (LmdbStore.prototype as unknown as Record<string, unknown>)[name];
      if (name === "constructor" || typeof method !== "function") continue;
      originals.set(name, method as (...args: unknown[]) => unknown);
      (LmdbStore.prototype as unknown as Record<string, unknown>)[name] = function (this: unknown, ...args: unknown[]) {
        calls.set(name, (calls.get(name) ?? 0) + 1);
        return (method as (...a: unknown[]) => unknown).apply(this, args);
      };
    }
  };
  const stopCounting = () => {
    for (const [name, method] of originals) (LmdbStore.prototype as unknown as Record<string, unknown>)[name] = method;
    originals.clear();
  };
  /** A write by another process on the same data: the CLI's store. */
  const asCli = async (write: (store: LmdbStore) => Promise<unknown>) => {
    const cli = openLmdbStore(t.dataDir);
    try {
      await write(cli);
    } finally {
      await cli.close();
    }
  };

  beforeAll(async () => {
    t = await buildTestApp({ cache: true });
    ({ providerId, clientId } = await createProviderAndClient(t));
    const { secret } = await createSecret(t, providerId, clientId);
    tokenPath = `/v1/providers/${providerId}/clients/${clientId}/tokens`;
    oauth = () => tokenRequest(t, { grant_type: "client_credentials" }, { authorization: basic(clientId, secret) });
  });
  afterAll(async () => {
    stopCounting();
    await t.close();
  });

  test("after the first tokens, each request reads the counter once and nothing else", async () => {
    expect((await t.api("POST", tokenPath)).status).toBe(201);
    expect((await oauth()).status).toBe(200);
    count();
    try {
      for (let i = 0; i < 50; i++) {
        expect((await t.api("POST", tokenPath, { expiresIn: 60 + i })).status).toBe(201);
        expect((await oauth()).status).toBe(200);
        expect((await t.request("GET", "/.well-known/jwks")).status).toBe(200);
      }
    } finally {
      stopCounting();
    }
    expect(Object.fromEntries(calls)).toEqual({ changeSeqNow: 150 });
  });

  test("an API key revoked and a client deleted by another process are refused by the very next request", async () => {
    const hash = Buffer.from(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(t.apiKey))).toString("base64url");
    const other = await createProviderAndClient(t);
    const otherPath = `/v1/providers/${other.providerId}/clients/${other.clientId}/tokens`;
    expect((await t.api("POST", otherPath)).status).toBe(201);
    await asCli((cli) => deleteClient(cli, t.ctx.projectId, other.providerId, other.clientId));
    expect((await t.api("POST", otherPath)).status).toBe(404);
    expect((await t.api("POST", tokenPath)).status).toBe(201);
    await asCli(async (cli) => {
      const record = (await cli.getApiKeyByHash(hash)) as ApiKeyRecord;
      await revokeApiKey(cli, record.projectId, record.id, t.clock.now());
    });
    expect((await t.api("POST", tokenPath)).status).toBe(401);
  });
});

