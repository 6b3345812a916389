/**
 * The shared storage contract suite: every backend of src/store/store.ts must pass it unchanged.
 * `factory` returns a fresh, empty store and a cleanup function (dex conformance style).
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Store } from "../../src/store/store.ts";
import {
  T0,
  apiKeyRecord,
  clientRecord,
  clientSecretRecord,
  keySetRecord,
  newProjectId,
  providerRecord,
  storeErrorKind,
} from "./fixtures.ts";
import { runClientJwksContract } from "./contract-jwks.ts";
import { runChangeContract, type OtherInstance } from "./contract-changes.ts";
import { runClientSecretContract } from "./contract-secrets.ts";
import { runRevocationContract } from "./contract-revocation.ts";

/**
 * A fresh, empty store, its cleanup, and (when the backend can have several instances on one
 * data, as processes do) how to open another one beside it.
 */
export type StoreFactory = () => Promise<{ store: Store; cleanup: () => Promise<void>; other?: OtherInstance }>;

export function runStoreContract(name: string, factory: StoreFactory): void {
  describe(`store contract: ${name}`, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    let other: OtherInstance | undefined;
    const A = newProjectId(T0);
    const B = newProjectId(T0 + 1);
    const untouched = () => {
      throw new Error("the updater must not run for a missing record");
    };

    beforeEach(async () => {
      ({ store, cleanup, other } = await factory());
    });
    afterEach(() => cleanup());

    test("meta: initMeta writes only once and returns the stored value", async () => {
      expect(await store.getMeta("format")).toBeUndefined();
      expect(await store.initMeta("format", { v: 1 })).toEqual({ v: 1 });
      expect(await store.initMeta("format", { v: 2 })).toEqual({ v: 1 });
      expect(await store.getMeta<{ v: number }>("format")).toEqual({ v: 1 });
      expect(await store.initMeta("other", "x")).toBe("x");
      expect(await store.getMeta<{ v: number }>("format")).toEqual({ v: 1 });
    });

    test("meta: setMeta writes or replaces a value and leaves the others alone", async () => {
      await store.initMeta("format", 1);
      await store.setMeta("settings", { a: 1 });
      expect(await store.getMeta<{ a: number }>("settings")).toEqual({ a: 1 });
      await store.setMeta("settings", { a: 2 });
      expect(await store.getMeta<{ a: number }>("settings")).toEqual({ a: 2 });
      expect(await store.getMeta<number>("format")).toBe(1);
    });

    test("projects: create, get, list; a duplicate is already_exists", async () => {
      const p1 = { id: A, name: "default", createdAt: T0 };
      const p2 = { id: B, name: "second", createdAt: T0 + 1 };
      expect(await store.listProjects()).toEqual([]);
      await store.createProject(p1);
      await store.createProject(p2);
      expect(await store.getProject(A)).toEqual(p1);
      expect(await store.getProject(newProjectId(T0 + 2))).toBeUndefined();
      expect(await store.listProjects()).toEqual([p1, p2]);
      expect(await storeErrorKind(store.createProject({ ...p1, name: "dup" }))).toBe("already_exists");
      expect(await store.getProject(A)).toEqual(p1);
    });

    test("projects: created with their first key set in one write, or not at all", async () => {
      await store.createProject({ id: A, name: "a", slug: "acme", createdAt: T0 }, keySetRecord(A, 1));
      expect(await store.getKeySet(A)).toEqual(keySetRecord(A, 1));
      // A clash stores neither the project nor its keys.
      expect(await storeErrorKind(store.createProject({ id: B, name: "b", slug: "acme", createdAt: T0 }, keySetRecord(B, 1)))).toBe("already_exists");
      expect(await store.getProject(B)).toBeUndefined();
      expect(await store.getKeySet(B)).toBeUndefined();
      // Only the project's own first set.
      await expect(store.createProject({ id: B, name: "b", slug: "beta", createdAt: T0 }, keySetRecord(A, 1))).rejects.toThrow();
      await expect(store.createProject({ id: B, name: "b", slug: "beta", createdAt: T0 }, keySetRecord(B, 2))).rejects.toThrow();
      expect(await store.getProject(B)).toBeUndefined();
      // Without a set, as the default project is made, the keys come later.
      await store.createProject({ id: B, name: "b", slug: "beta", createdAt: T0 });
      expect(await store.getKeySet(B)).toBeUndefined();
      expect(await store.swapKeySet(keySetRecord(B, 1), 0)).toBe(true);
    });

    test("projects: slugs and custom domains are unique; updates move them atomically", async () => {
      const C = newProjectId(T0 + 2);
      await store.createProject({ id: A, name: "a", slug: "acme", customDomain: "auth.acme.test", createdAt: T0 });
      expect(await storeErrorKind(store.createProject({ id: B, name: "b", slug: "acme", createdAt: T0 }))).toBe("already_exists");
      expect(await storeErrorKind(store.createProject({ id: B, name: "b", slug: "beta", customDomain: "auth.acme.test", createdAt: T0 }))).toBe("already_exists");
      expect(await store.getProject(B)).toBeUndefined();
      await store.createProject({ id: B, name: "b", slug: "beta", createdAt: T0 });

      // Taking another project's domain or slug is a conflict and changes nothing.
      expect(await storeErrorKind(store.updateProject(B, (p) => ({ ...p, customDomain: "auth.acme.test" })))).toBe("conflict");
      expect(await storeErrorKind(store.updateProject(B, (p) => ({ ...p, slug: "acme" })))).toBe("conflict");
      // A domain is one project's on every port.
      expect(await storeErrorKind(store.updateProject(B, (p) => ({ ...p, customDomain: "auth.acme.test:8443" })))).toBe("conflict");
      expect(await storeErrorKind(store.createProject({ id: C, name: "c", slug: "gamma", customDomain: "auth.acme.test:8443", createdAt: T0 }))).toBe("already_exists");
      expect((await store.getProject(B))?.customDomain).toBeUndefined();
      // A longer name that starts alike is another domain; the holder itself may change its port.
      await store.updateProject(B, (p) => ({ ...p, customDomain: "auth.acme.testing:8443" }));
      await store.updateProject(A, (p) => ({ ...p, customDomain: "auth.acme.test:8443" }));
      expect(await storeErrorKind(store.updateProject(B, (p) => ({ ...p, customDomain: "auth.acme.test" })))).toBe("conflict");
      await store.updateProject(A, (p) => ({ ...p, customDomain: "auth.acme.test" }));
      await store.updateProject(B, ({ customDomain: _, ...rest }) => rest);

      // A released domain is free for another project at once.
      const moved = await store.updateProject(A, (p) => ({ ...p, customDomain: "tokens.acme.test", name: "renamed", updatedAt: T0 + 5 }));
      expect(moved).toMatchObject({ name: "renamed", customDomain: "tokens.acme.test", updatedAt: T0 + 5 });
      expect(await store.getProject(A)).toEqual(moved);
      await store.updateProject(B, (p) => ({ ...p, customDomain: "auth.acme.test" }));
      expect((await store.getProject(B))?.customDomain).toBe("auth.acme.test");
      // Clearing a domain releases it too.
      await store.updateProject(B, ({ customDomain: _, ...rest }) => rest);
      await store.createProject({ id: C, name: "c", slug: "gamma", customDomain: "auth.acme.test", createdAt: T0 });
      expect(await store.listProjects()).toHaveLength(3);

      expect(await storeErrorKind(store.updateProject(newProjectId(T0 + 9), untouched))).toBe("not_found");
      const same = await store.getProject(C);
      expect(await store.updateProject(C, () => undefined)).toEqual(same as never);
    });

    test("providers: create and get round-trip exactly; a duplicate is already_exists and changes nothing", async () => {
      const p = providerRecord(A, T0 + 123);
      expect(await store.getProvider(A, p.id)).toBeUndefined();
      await store.createProvider(p);
      expect(await store.getProvider(A, p.id)).toEqual(p);
      expect(await storeErrorKind(store.createProvider({ ...p, name: "other" }))).toBe("already_exists");
      expect(await store.getProvider(A, p.id)).toEqual(p);
    });

    test("providers: update stores and returns the updater's record; undefined leaves it untouched", async () => {
      const p = providerRecord(A, T0);
      await store.createProvider(p);
      const seen: unknown[] = [];
      const updated = await store.updateProvider(A, p.id, (cur) => {
        seen.push(cur);
        return { ...cur, name: "renamed", updatedAt: T0 + 5000 };
      });
      expect(seen.at(-1)).toEqual(p);
      expect(updated).toEqual({ ...p, name: "renamed", updatedAt: T0 + 5000 });
      expect(await store.getProvider(A, p.id)).toEqual(updated);
      expect(await store.updateProvider(A, p.id, () => undefined)).toEqual(updated);
      expect(await store.getProvider(A, p.id)).toEqual(updated);
      expect(await storeErrorKind(store.updateProvider(A, providerRecord(A, T0 + 9).id, untouched))).toBe("not_found");
    });

    test("providers: delete removes; missing is not_found; with clients it is conflict", async () => {
      const p = providerRecord(A, T0);
      const c = clientRecord(p, T0 + 1);
      await store.createProvider(p);
      await store.createClient(c);
      expect(await storeErrorKind(store.deleteProvider(A, p.id))).toBe("conflict");
      expect(await store.getProvider(A, p.id)).toEqual(p);
      expect(await store.getClient(A, p.id, c.id)).toEqual(c);
      await store.deleteClient(A, p.id, c.id);
      await store.deleteProvider(A, p.id);
      expect(await store.getProvider(A, p.id)).toBeUndefined();
      expect((await store.listProviders(A, { limit: 10 })).items).toEqual([]);
      expect(await storeErrorKind(store.deleteProvider(A, p.id))).toBe("not_found");
    });

    test("clients: create, get, update, delete; missing records are not_found", async () => {
      const p = providerRecord(A, T0);
      await store.createProvider(p);
      const c = clientRecord(p, T0 + 1);
      await store.createClient(c);
      expect(await store.getClient(A, p.id, c.id)).toEqual(c);
      expect(await storeErrorKind(store.createClient({ ...c, name: "dup" }))).toBe("already_exists");
      expect(await store.getClient(A, p.id, c.id)).toEqual(c);
      const updated = await store.updateClient(A, p.id, c.id, (cur) => ({ ...cur, audience: "urn:new", updatedAt: T0 + 7 }));
      expect(updated).toEqual({ ...c, audience: "urn:new", updatedAt: T0 + 7 });
      expect(await store.getClient(A, p.id, c.id)).toEqual(updated);
      expect(await store.updateClient(A, p.id, c.id, () => undefined)).toEqual(updated);
      expect(await store.getClient(A, p.id, c.id)).toEqual(updated);
      await store.deleteClient(A, p.id, c.id);
      expect(await store.getClient(A, p.id, c.id)).toBeUndefined();
      expect(await storeErrorKind(store.deleteClient(A, p.id, c.id))).toBe("not_found");
      expect(await storeErrorKind(store.updateClient(A, p.id, c.id, untouched))).toBe("not_found");
    });

    test("clients: createClient under a missing provider is not_found and writes nothing", async () => {
      const ghost = providerRecord(A, T0);
      const c = clientRecord(ghost, T0 + 1);
      expect(await storeErrorKind(store.createClient(c))).toBe("not_found");
      expect(await store.getClient(A, ghost.id, c.id)).toBeUndefined();
      const other = providerRecord(A, T0 + 2);
      await store.createProvider(other);
      // A client is addressed by its provider too: another provider's id does not find it.
      const c2 = clientRecord(other, T0 + 3);
      await store.createClient(c2);
      expect(await store.getClient(A, ghost.id, c2.id)).toBeUndefined();
      expect(await storeErrorKind(store.deleteClient(A, ghost.id, c2.id))).toBe("not_found");
    });

    // Client-id lookups and client secrets: contract-secrets.ts.
    runClientSecretContract(() => store, A, B);
    runRevocationContract(() => store, A, B);
    runClientJwksContract(() => store, A, B);

    // The change counter, also across instances: contract-changes.ts.
    runChangeContract(() => store, A, () => other);

    test("paging: providers list in creation order, `last` is undefined on the last page", async () => {
      expect(await store.listProviders(A, { limit: 2 })).toEqual({ items: [], last: undefined });
      const ps = [0, 1, 2, 3, 4].map((i) => providerRecord(A, T0 + i * 1000, `p${i}`));
      // Insert out of order: the listing follows the ids (creation instants), not insertion.
      for (const i of [3, 0, 4, 1, 2]) await store.createProvider(ps[i]!);
      const page1 = await store.listProviders(A, { limit: 2 });
      expect(page1).toEqual({ items: [ps[0]!, ps[1]!], last: ps[1]!.id });
      const page2 = await store.listProviders(A, { limit: 2, after: page1.last });
      expect(page2).toEqual({ items: [ps[2]!, ps[3]!], last: ps[3]!.id });
      const page3 = await store.listProviders(A, { limit: 2, after: page2.last });
      expect(page3.items).toEqual([ps[4]!]);
      expect(page3.last).toBeUndefined();
      expect((await store.listProviders(A, { limit: 5 })).last).toBeUndefined();
      expect((await store.listProviders(A, { limit: 4 })).last).toBe(ps[3]!.id);
      expect((await store.listProviders(A, { limit: 100 })).items.map((p) => p.name)).toEqual(["p0", "p1", "p2", "p3", "p4"]);
      expect(await store.listProviders(A, { limit: 3, after: ps[4]!.id })).toEqual({ items: [], last: undefined });
    });

    test("paging: clients list per provider in creation order", async () => {
      const p = providerRecord(A, T0);
      const q = providerRecord(A, T0 + 1);
      await store.createProvider(p);
      await store.createProvider(q);
      const cs = [0, 1, 2].map((i) => clientRecord(p, T0 + 10 + i * 1000, `c${i}`));
      for (const i of [2, 0, 1]) await store.createClient(cs[i]!);
      await store.createClient(clientRecord(q, T0 + 5, "of-q"));
      const page1 = await store.listClients(A, p.id, { limit: 2 });
      expect(page1).toEqual({ items: [cs[0]!, cs[1]!], last: cs[1]!.id });
      expect(await store.listClients(A, p.id, { limit: 2, after: page1.last })).toEqual({ items: [cs[2]!], last: undefined });
      expect((await store.listClients(A, q.id, { limit: 10 })).items.map((c) => c.name)).toEqual(["of-q"]);
    });

    test("project isolation: A's records are invisible through B's id", async () => {
      const pa = providerRecord(A, T0);
      const ca = clientRecord(pa, T0 + 1);
      const ka = apiKeyRecord(A, T0 + 2, "hash-a");
      const pb = providerRecord(B, T0 + 3);
      const kb = apiKeyRecord(B, T0 + 4, "hash-b");
      await store.createProvider(pa);
      await store.createClient(ca);
      await store.createApiKey(ka);
      await store.createProvider(pb);
      await store.createApiKey(kb);
      expect(await store.swapKeySet(keySetRecord(A, 1), 0)).toBe(true);

      expect(await store.getProvider(B, pa.id)).toBeUndefined();
      expect((await store.listProviders(B, { limit: 10 })).items).toEqual([pb]);
      expect(await storeErrorKind(store.updateProvider(B, pa.id, untouched))).toBe("not_found");
      expect(await storeErrorKind(store.deleteProvider(B, pa.id))).toBe("not_found");
      expect(await storeErrorKind(store.createClient({ ...clientRecord(pa, T0 + 5), projectId: B }))).toBe("not_found");

      expect(await store.getClient(B, pa.id, ca.id)).toBeUndefined();
      expect((await store.listClients(B, pa.id, { limit: 10 })).items).toEqual([]);
      expect(await storeErrorKind(store.updateClient(B, pa.id, ca.id, untouched))).toBe("not_found");
      expect(await storeErrorKind(store.deleteClient(B, pa.id, ca.id))).toBe("not_found");

      const sa = clientSecretRecord(ca, T0 + 6, "secret-a");
      await store.createClientSecret(sa, 2);
      expect(await store.getClientById(B, ca.id)).toBeUndefined();
      expect(await store.listClientSecrets(B, ca.id)).toEqual([]);
      expect(await storeErrorKind(store.deleteClientSecret(B, ca.id, sa.id))).toBe("not_found");
      expect(await storeErrorKind(store.createClientSecret({ ...clientSecretRecord(ca, T0 + 7, "x"), projectId: B }, 2))).toBe("not_found");

      expect(await store.listApiKeys(B)).toEqual([kb]);
      expect(await storeErrorKind(store.updateApiKey(B, ka.id, untouched))).toBe("not_found");
      expect(await store.getKeySet(B)).toBeUndefined();
      expect(await store.swapKeySet(keySetRecord(B, 1, T0 + 9), 0)).toBe(true);

      // Nothing of A changed.
      expect(await store.getProvider(A, pa.id)).toEqual(pa);
      expect(await store.getClient(A, pa.id, ca.id)).toEqual(ca);
      expect(await store.getClientById(A, ca.id)).toEqual(ca);
      expect(await store.listClientSecrets(A, ca.id)).toEqual([sa]);
      expect(await store.listApiKeys(A)).toEqual([ka]);
      expect(await store.getKeySet(A)).toEqual(keySetRecord(A, 1));
      expect(await store.getKeySet(B)).toEqual(keySetRecord(B, 1, T0 + 9));
    });

    test("API keys: found by hash, listed per project in creation order, updated", async () => {
      const k1 = apiKeyRecord(A, T0 + 1000, "h1");
      const k2 = { ...apiKeyRecord(A, T0 + 2000, "h2"), expiresAt: T0 + 86_400_000 };
      await store.createApiKey(k2);
      await store.createApiKey(k1);
      expect(await store.getApiKeyByHash("h1")).toEqual(k1);
      expect(await store.getApiKeyByHash("h2")).toEqual(k2);
      expect(await store.getApiKeyByHash("h3")).toBeUndefined();
      expect(await store.listApiKeys(A)).toEqual([k1, k2]);
      const revoked = await store.updateApiKey(A, k1.id, (cur) => ({ ...cur, revokedAt: T0 + 3000 }));
      expect(revoked).toEqual({ ...k1, revokedAt: T0 + 3000 });
      expect(await store.getApiKeyByHash("h1")).toEqual(revoked);
      expect(await store.updateApiKey(A, k1.id, () => undefined)).toEqual(revoked);
      expect(await store.listApiKeys(A)).toEqual([revoked, k2]);
      expect(await storeErrorKind(store.updateApiKey(A, apiKeyRecord(A, T0 + 5, "x").id, untouched))).toBe("not_found");
    });

    test("API keys: a duplicate hash or id is already_exists and indexes nothing", async () => {
      const k1 = apiKeyRecord(A, T0, "same");
      await store.createApiKey(k1);
      const dupHash = apiKeyRecord(A, T0 + 1, "same");
      expect(await storeErrorKind(store.createApiKey(dupHash))).toBe("already_exists");
      const dupId = { ...apiKeyRecord(A, T0 + 2, "fresh"), id: k1.id };
      expect(await storeErrorKind(store.createApiKey(dupId))).toBe("already_exists");
      expect(await store.getApiKeyByHash("fresh")).toBeUndefined();
      expect(await store.getApiKeyByHash("same")).toEqual(k1);
      expect(await store.listApiKeys(A)).toEqual([k1]);
    });

    test("key sets: swap with version 0 creates; a stale version returns false and changes nothing", async () => {
      expect(await store.getKeySet(A)).toBeUndefined();
      expect(await store.swapKeySet(keySetRecord(A, 1), 1)).toBe(false);
      expect(await store.getKeySet(A)).toBeUndefined();
      expect(await store.swapKeySet(keySetRecord(A, 1), 0)).toBe(true);
      expect(await store.getKeySet(A)).toEqual(keySetRecord(A, 1));
      expect(await store.swapKeySet(keySetRecord(A, 1, T0 + 5), 0)).toBe(false);
      expect(await store.getKeySet(A)).toEqual(keySetRecord(A, 1));
      expect(await store.swapKeySet(keySetRecord(A, 2, T0 + 3_600_000), 1)).toBe(true);
      expect(await store.getKeySet(A)).toEqual(keySetRecord(A, 2, T0 + 3_600_000));
      expect(await store.swapKeySet(keySetRecord(A, 3), 1)).toBe(false);
      expect(await store.swapKeySet(keySetRecord(A, 3), 3)).toBe(false);
      expect(await store.getKeySet(A)).toEqual(keySetRecord(A, 2, T0 + 3_600_000));
    });

    test("backup: writes a new private file, never overwrites, leaves nothing partial, changes no data", async () => {
      const p = providerRecord(A, T0);
      await store.createProvider(p);
      const dir = mkdtempSync(join(tmpdir(), "tokenmint-backup-"));
      try {
        const path = join(dir, "backup.mdb");
        await store.backup(path);
        expect(statSync(path).size).toBeGreaterThan(0);
        expect(statSync(path).mode & 0o077).toBe(0);
        const existing = join(dir, "existing");
        writeFileSync(existing, "keep me");
        expect(await storeErrorKind(store.backup(existing))).toBe("already_exists");
        expect(readFileSync(existing, "utf8")).toBe("keep me");
        const before = readFileSync(path);
        expect(await storeErrorKind(store.backup(path))).toBe("already_exists");
        expect(readFileSync(path).equals(before)).toBe(true);
        expect(readdirSync(dir).sort()).toEqual(["backup.mdb", "existing"]);
        expect(await store.getProvider(A, p.id)).toEqual(p);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    test("timestamps (epoch ms) round-trip exactly", async () => {
      const instants = [0, 1, T0 + 789, Date.UTC(2099, 11, 31, 23, 59, 59, 999), 8_640_000_000_000_000];
      for (const [i, at] of instants.entries()) {
        const p = { ...providerRecord(A, T0 + i), createdAt: at, updatedAt: at + 1 };
        await store.createProvider(p);
        const got = await store.getProvider(A, p.id);
        expect(got?.createdAt).toBe(at);
        expect(got?.updatedAt).toBe(at + 1);
      }
      const p = providerRecord(A, T0 + 50);
      const c = clientRecord(p, T0 + 51);
      await store.createProvider(p);
      await store.createClient(c);
      const secret = { ...clientSecretRecord(c, T0 + 52, "ts"), createdAt: Date.UTC(2099, 11, 31, 23, 59, 59, 999) };
      await store.createClientSecret(secret, 2);
      expect((await store.listClientSecrets(A, c.id))[0]?.createdAt).toBe(secret.createdAt);
      const k = { ...apiKeyRecord(A, T0, "t"), createdAt: T0 + 1, expiresAt: T0 + 172_800_123, revokedAt: T0 + 999 };
      await store.createApiKey(k);
      expect(await store.getApiKeyByHash("t")).toEqual(k);
      const set = keySetRecord(A, 1, T0 + 456);
      set.keys[0] = { ...set.keys[0]!, state: "retired", retiredAt: T0 + 457, removedFromJwksAt: T0 + 173_100_457 };
      await store.swapKeySet(set, 0);
      expect(await store.getKeySet(A)).toEqual(set);
      const reread = await store.getKeySet(A);
      expect([reread?.rotatedAt, reread?.keys[0]?.retiredAt, reread?.keys[0]?.removedFromJwksAt]).toEqual([T0 + 456, T0 + 457, T0 + 173_100_457]);
    });
  });
}
