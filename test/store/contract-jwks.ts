/**
 * The storage contract of client public keys (private_key_jwt) and used assertion ids, part of
 * runStoreContract (contract.ts): a key set belongs to an existing client, is replaced as a
 * whole and goes with its client; a jti is accepted once per client while unexpired, across store
 * instances, and its entry goes once expired (swept by later uses and by pruneExpired) or with
 * its client.
 */
import { expect, test } from "bun:test";
import type { Store } from "../../src/store/store.ts";
import { T0, clientJwksRecord, clientRecord, providerRecord, providerWithTwoClients, storeErrorKind } from "./fixtures.ts";

/** Registers the tests; `store` returns the fresh store of the running test. */
export function runClientJwksContract(store: () => Store, A: string, B: string): void {
  test("client jwks: put replaces, get returns, delete removes; a missing client or set is not_found", async () => {
    const p = providerRecord(A, T0);
    await store().createProvider(p);
    const c = clientRecord(p, T0 + 1);
    await store().createClient(c);
    expect(await store().getClientJwks(A, c.id)).toBeUndefined();
    const first = clientJwksRecord(c, T0 + 2, "one");
    await store().putClientJwks(first);
    expect(await store().getClientJwks(A, c.id)).toEqual(first);
    const second = { ...clientJwksRecord(c, T0 + 3, "two"), keys: [...clientJwksRecord(c, T0, "a").keys, ...clientJwksRecord(c, T0, "b").keys] };
    await store().putClientJwks(second);
    expect(await store().getClientJwks(A, c.id)).toEqual(second);
    expect(await store().getClientJwks(B, c.id)).toBeUndefined();
    await store().deleteClientJwks(A, c.id);
    expect(await store().getClientJwks(A, c.id)).toBeUndefined();
    expect(await storeErrorKind(store().deleteClientJwks(A, c.id))).toBe("not_found");
    const ghost = clientRecord(p, T0 + 4);
    expect(await storeErrorKind(store().putClientJwks(clientJwksRecord(ghost, T0 + 5)))).toBe("not_found");
    expect(await store().getClientJwks(A, ghost.id)).toBeUndefined();
    // Another project's client of the same id is another client.
    expect(await storeErrorKind(store().putClientJwks({ ...first, projectId: B }))).toBe("not_found");
  });

  test("client jwks: deleting the client deletes its keys, and only its own", async () => {
    const { provider: p, first: c, second: keep } = await providerWithTwoClients(store(), A);
    await store().putClientJwks(clientJwksRecord(c, T0 + 3));
    const kept = clientJwksRecord(keep, T0 + 4, "kept");
    await store().putClientJwks(kept);
    await store().deleteClient(A, p.id, c.id);
    expect(await store().getClientJwks(A, c.id)).toBeUndefined();
    expect(await store().getClientJwks(A, keep.id)).toEqual(kept);
    // A client created again with the same id starts without keys.
    await store().createClient(c);
    expect(await store().getClientJwks(A, c.id)).toBeUndefined();
  });

  test("assertion jti: accepted once per client and project until it expires, then again", async () => {
    const exp = T0 + 60_000;
    expect(await store().useAssertionJti(A, "client-1", "jti-1", exp, T0)).toBe(true);
    expect(await store().useAssertionJti(A, "client-1", "jti-1", exp, T0 + 1)).toBe(false);
    expect(await store().useAssertionJti(A, "client-1", "jti-1", exp + 90_000, exp - 1)).toBe(false);
    // Scoped by client and by project.
    expect(await store().useAssertionJti(A, "client-2", "jti-1", exp, T0)).toBe(true);
    expect(await store().useAssertionJti(B, "client-1", "jti-1", exp, T0)).toBe(true);
    // Ids that only differ past a separator stay apart.
    expect(await store().useAssertionJti(A, "client-1", "jti-1:x", exp, T0)).toBe(true);
    // Once expired, the entry no longer blocks (the assertion itself has expired by then).
    expect(await store().useAssertionJti(A, "client-1", "jti-1", exp + 60_000, exp)).toBe(true);
    expect(await store().useAssertionJti(A, "client-1", "jti-1", exp + 60_000, exp + 1)).toBe(false);
  });

  test("assertion jti: racing uses of one jti succeed exactly once", async () => {
    const results = await Promise.all([1, 2, 3, 4, 5].map(() => store().useAssertionJti(A, "client-1", "raced", T0 + 60_000, T0)));
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  test("assertion jti: pruneExpired removes used ids once expired, in bounded batches, with no use to sweep them", async () => {
    await store().createProject({ id: A, name: "a", createdAt: T0 });
    await store().createProject({ id: B, name: "b", createdAt: T0 });
    for (const [project, jti] of [[A, "a-1"], [A, "a-2"], [B, "b-1"]]) expect(await store().useAssertionJti(project, "client-1", jti, T0 + 1000, T0)).toBe(true);
    expect(await store().useAssertionJti(A, "client-1", "young", T0 + 120_000, T0)).toBe(true);
    expect(await store().pruneExpired(T0 + 999, 10)).toBe(0);
    expect(await store().pruneExpired(T0 + 1000, 2)).toBe(2);
    expect(await store().pruneExpired(T0 + 1000, 2)).toBe(1);
    expect(await store().pruneExpired(T0 + 1000, 2)).toBe(0);
    expect(await store().useAssertionJti(A, "client-1", "young", T0 + 120_000, T0 + 2000)).toBe(false);
  });

  test("assertion jti: deleting the client forgets the ids it used, and only its own", async () => {
    const { provider: p, first: c, second: keep } = await providerWithTwoClients(store(), A);
    for (const client of [c, keep]) expect(await store().useAssertionJti(A, client.id, "jti-1", T0 + 60_000, T0)).toBe(true);
    await store().deleteClient(A, p.id, c.id);
    // Nothing of the deleted client's use is left; a client made again with its id starts afresh.
    await store().createClient(c);
    expect(await store().useAssertionJti(A, c.id, "jti-1", T0 + 60_000, T0 + 1)).toBe(true);
    expect(await store().useAssertionJti(A, keep.id, "jti-1", T0 + 60_000, T0 + 1)).toBe(false);
  });

  test("assertion jti: expired entries are swept by later uses, unexpired ones kept", async () => {
    for (let i = 0; i < 40; i++) expect(await store().useAssertionJti(A, "client-1", `old-${i}`, T0 + 1000, T0)).toBe(true);
    expect(await store().useAssertionJti(A, "client-1", "young", T0 + 120_000, T0)).toBe(true);
    // Each use after the expiry removes a bounded batch; a few uses clear all 40.
    for (let i = 0; i < 5; i++) expect(await store().useAssertionJti(A, "client-1", `new-${i}`, T0 + 60_000, T0 + 2000)).toBe(true);
    // The young entry survived the sweeps; the swept ones are usable again, as expired ones are.
    expect(await store().useAssertionJti(A, "client-1", "young", T0 + 120_000, T0 + 3000)).toBe(false);
    for (let i = 0; i < 5; i++) expect(await store().useAssertionJti(A, "client-1", `new-${i}`, T0 + 60_000, T0 + 3000)).toBe(false);
  });
}
