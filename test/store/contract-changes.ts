/**
 * The storage contract of the change counter, part of runStoreContract (contract.ts): every kind
 * of write of data a server keeps in memory moves `changeSeq` (used assertion jtis and revoked
 * tokens, read through every time, do not), and a write made by another instance on the same
 * data (another process, the CLI) moves it too and is seen by this store's reads once `settle`
 * has run.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { Store } from "../../src/store/store.ts";
import { tempDir } from "../helpers/app.ts";
import { T0, apiKeyRecord, clientRecord, clientSecretRecord, keySetRecord, newProjectId, providerRecord } from "./fixtures.ts";

/** A second instance on the same data, and how to wait until the first one sees its writes. */
export interface OtherInstance {
  open(): Promise<Store>;
  /** Resolves once writes already committed by another instance are visible to the store under test. */
  settle(): Promise<void>;
}

/** Makes `writes` in order; returns the names of those after which `counter` had moved forward. */
async function movedBy(counter: () => Promise<number>, writes: readonly [string, () => Promise<unknown>][]): Promise<string[]> {
  let last = await counter();
  const moved: string[] = [];
  for (const [what, write] of writes) {
    await write();
    const now = await counter();
    if (now > last) moved.push(what);
    last = now;
  }
  return moved;
}

/** Registers the tests; `store` returns the fresh store of the running test, `other` its sibling opener. */
export function runChangeContract(store: () => Store, A: string, other: () => OtherInstance | undefined): void {
  test("changeSeq: every kind of write moves it forward", async () => {
    const s = store();
    const p = providerRecord(A, T0);
    const c = clientRecord(p, T0 + 1);
    const secret = clientSecretRecord(c, T0 + 2, "h-secret");
    const key = apiKeyRecord(A, T0 + 3, "h-key");
    const writes: [string, () => Promise<unknown>][] = [
      ["initMeta", () => s.initMeta("changes", 1)],
      ["setMeta", () => s.setMeta("changes", 2)],
      ["createProject", () => s.createProject({ id: A, name: "default", createdAt: T0 })],
      ["createProvider", () => s.createProvider(p)],
      ["updateProvider", () => s.updateProvider(A, p.id, (cur) => ({ ...cur, name: "renamed" }))],
      ["createClient", () => s.createClient(c)],
      ["updateClient", () => s.updateClient(A, p.id, c.id, (cur) => ({ ...cur, audience: "urn:new" }))],
      ["createClientSecret", () => s.createClientSecret(secret, 2)],
      ["deleteClientSecret", () => s.deleteClientSecret(A, c.id, secret.id)],
      ["deleteClient", () => s.deleteClient(A, p.id, c.id)],
      ["deleteProvider", () => s.deleteProvider(A, p.id)],
      ["createApiKey", () => s.createApiKey(key)],
      ["updateApiKey", () => s.updateApiKey(A, key.id, (cur) => ({ ...cur, revokedAt: T0 + 4 }))],
      ["swapKeySet", () => s.swapKeySet(keySetRecord(A, 1), 0)],
    ];
    expect(await movedBy(() => s.changeSeq(), writes)).toEqual(writes.map(([what]) => what));
  });

  test("keysChangeSeq: moved by every write of a project or a key set, and by no other write", async () => {
    const s = store();
    const p = providerRecord(A, T0);
    const c = clientRecord(p, T0 + 1);
    const writes: [string, () => Promise<unknown>][] = [
      ["setMeta", () => s.setMeta("changes", 2)],
      ["createProject", () => s.createProject({ id: A, name: "default", createdAt: T0 })],
      ["updateProject", () => s.updateProject(A, (cur) => ({ ...cur, name: "renamed" }))],
      ["createProvider", () => s.createProvider(p)],
      ["createClient", () => s.createClient(c)],
      ["createApiKey", () => s.createApiKey(apiKeyRecord(A, T0 + 3, "h-key"))],
      ["swapKeySet", () => s.swapKeySet(keySetRecord(A, 1), 0)],
      ["swapKeySet refused", () => s.swapKeySet(keySetRecord(A, 2), 0)],
      ["deleteClient", () => s.deleteClient(A, p.id, c.id)],
    ];
    expect(await movedBy(() => s.keysChangeSeq(), writes)).toEqual(["createProject", "updateProject", "swapKeySet"]);
  });

  test("keysChangedSince: names each project whose record or key set was written since, once, with the counter as of the read", async () => {
    const s = store();
    const B = newProjectId(T0 + 7);
    const start = await s.keysChangeSeq();
    expect(await s.keysChangedSince(start)).toEqual({ seq: start, projects: [], keySets: [] });
    await s.createProject({ id: A, name: "default", createdAt: T0 }, keySetRecord(A, 1));
    const created = await s.keysChangeSeq();
    expect(await s.keysChangedSince(start)).toEqual({ seq: created, projects: [A], keySets: [A] });

    // Writes of other data, and a refused swap, name nothing.
    const p = providerRecord(A, T0);
    await s.createProvider(p);
    await s.createClient(clientRecord(p, T0 + 1));
    await s.createApiKey(apiKeyRecord(A, T0 + 2, "h-key"));
    await s.setMeta("changes", 1);
    expect(await s.swapKeySet(keySetRecord(A, 3), 2)).toBe(false);
    expect(await s.keysChangedSince(created)).toEqual({ seq: created, projects: [], keySets: [] });

    await s.updateProject(A, (cur) => ({ ...cur, name: "renamed" }));
    await s.createProject({ id: B, name: "second", createdAt: T0 });
    await s.swapKeySet(keySetRecord(B, 1), 0);
    await s.swapKeySet(keySetRecord(A, 2), 1);
    await s.swapKeySet(keySetRecord(A, 3), 2);
    const changes = await s.keysChangedSince(created);
    expect(changes?.seq).toBe(await s.keysChangeSeq());
    expect(changes?.projects.sort()).toEqual([A, B].sort());
    expect(changes?.keySets.sort()).toEqual([A, B].sort());
    // From a later point only what came after it.
    expect(await s.keysChangedSince((changes?.seq ?? 0) - 1)).toEqual({ seq: changes?.seq ?? 0, projects: [], keySets: [A] });
    // A counter it never reached cannot be told.
    expect(await s.keysChangedSince((changes?.seq ?? 0) + 1)).toBeUndefined();
  });

  test("changeSeq: recording a used assertion jti or a revoked token does not move it", async () => {
    const s = store();
    await s.createProject({ id: A, name: "default", createdAt: T0 });
    const before = await s.changeSeq();
    expect(await s.useAssertionJti(A, "client", "jti-1", T0 + 60_000, T0)).toBe(true);
    await s.revokeToken(A, "token-1", T0 + 60_000, T0);
    await s.pruneExpired(T0 + 120_000, 10);
    expect(await s.changeSeq()).toBe(before);
    expect(s.changeSeqNow?.() ?? before).toBe(before);
  });

  test("changeSeq: a write by another instance on the same data moves it, and reads see the write", async () => {
    const sibling = other();
    if (sibling === undefined) return;
    const s = store();
    const p = providerRecord(A, T0);
    const c = clientRecord(p, T0 + 1);
    const key = apiKeyRecord(A, T0 + 2, "h-other");
    await s.createProvider(p);
    await s.createClient(c);
    await s.createApiKey(key);
    await s.createClientSecret(clientSecretRecord(c, T0 + 3, "h-s1"), 2);
    // Read once, so a caching store holds every record the other instance is about to change.
    expect(await s.getProvider(A, p.id)).toEqual(p);
    expect(await s.getClient(A, p.id, c.id)).toEqual(c);
    expect(await s.getClientById(A, c.id)).toEqual(c);
    expect(await s.getApiKeyByHash("h-other")).toEqual(key);
    expect(await s.listClientSecrets(A, c.id)).toHaveLength(1);
    const before = await s.changeSeq();

    const o = await sibling.open();
    try {
      const renamed = await o.updateProvider(A, p.id, (cur) => ({ ...cur, name: "renamed elsewhere" }));
      const moved = await o.updateClient(A, p.id, c.id, (cur) => ({ ...cur, audience: "urn:elsewhere" }));
      const revoked = await o.updateApiKey(A, key.id, (cur) => ({ ...cur, revokedAt: T0 + 9 }));
      await o.createClientSecret(clientSecretRecord(c, T0 + 4, "h-s2"), 2);
      await sibling.settle();
      expect(await s.changeSeq()).toBeGreaterThan(before);
      expect(await s.getProvider(A, p.id)).toEqual(renamed);
      expect(await s.getClient(A, p.id, c.id)).toEqual(moved);
      expect(await s.getClientById(A, c.id)).toEqual(moved);
      expect(await s.getApiKeyByHash("h-other")).toEqual(revoked);
      expect((await s.listClientSecrets(A, c.id)).map((x) => x.hash)).toEqual(["h-s1", "h-s2"]);

      await o.deleteClient(A, p.id, c.id);
      await sibling.settle();
      expect(await s.getClient(A, p.id, c.id)).toBeUndefined();
      expect(await s.getClientById(A, c.id)).toBeUndefined();
      expect(await s.listClientSecrets(A, c.id)).toEqual([]);
    } finally {
      await o.close();
    }
  });
}

/**
 * `changeSeqNow` of a store that `open` makes on a data directory: another process's commit,
 * made while this process holds the read snapshot of its event-loop turn (the child runs
 * synchronously, so the turn cannot end), is seen by it at once, and by every read after it.
 */
export function runChangeSeqNowFreshness(open: (dataDir: string) => Store, A: string): void {
  test("changeSeqNow: another process's commit is seen at once, within the same event-loop turn, and by the reads after it", async () => {
    const dir = tempDir("tokenmint-fresh-");
    const s = open(dir.path);
    try {
      const p = providerRecord(A, T0);
      await s.createProvider(p);
      const before = (s.changeSeqNow as () => number)();
      // This turn's snapshot now predates what the child is about to commit.
      expect(await s.getProvider(A, p.id)).toEqual(p);
      const child = Bun.spawnSync([process.execPath, join(import.meta.dir, "rename-child.ts"), dir.path, A, p.id, "renamed by the child"], { stderr: "inherit" });
      expect(child.exitCode).toBe(0);
      expect((s.changeSeqNow as () => number)()).toBe(before + 1);
      expect((await s.getProvider(A, p.id))?.name).toBe("renamed by the child");
    } finally {
      await s.close();
      dir.remove();
    }
  });
}

/**
 * `isTokenRevoked` of a store that `open` makes: a revocation another process committed while
 * this process holds the read snapshot of its event-loop turn is seen at once. A revocation is a
 * write no cache depends on, so it moves no change counter: the read itself must be fresh.
 */
export function runRevocationFreshness(open: (dataDir: string) => Store, A: string): void {
  test("isTokenRevoked: a revocation another process committed is seen at once, within the same event-loop turn", async () => {
    const dir = tempDir("tokenmint-fresh-");
    const s = open(dir.path);
    try {
      // A write first, so the data exists for the child; then this turn's snapshot, taken before the child's commit.
      await s.createProvider(providerRecord(A, T0));
      expect(await s.isTokenRevoked(A, "jti-1", T0)).toBe(false);
      const child = Bun.spawnSync([process.execPath, join(import.meta.dir, "revoke-child.ts"), dir.path, A, "jti-1", String(T0 + 3_600_000), String(T0)], { stderr: "inherit" });
      expect(child.exitCode).toBe(0);
      expect(await s.isTokenRevoked(A, "jti-1", T0)).toBe(true);
    } finally {
      await s.close();
      dir.remove();
    }
  });
}
