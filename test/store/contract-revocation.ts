/**
 * The storage contract of token revocation, part of runStoreContract (contract.ts): a revoked
 * jti stays revoked until its token expires, per project; revoking is idempotent; expired
 * entries go, by revokeToken in passing and by pruneExpired, in bounded batches; and a
 * client's `tokensRevokedBefore` round-trips.
 */
import { expect, test } from "bun:test";
import type { Store } from "../../src/store/store.ts";
import { T0, clientRecord, providerRecord } from "./fixtures.ts";

const JTI = "0191d3c0-0000-7000-8000-000000000001";
const OTHER = "0191d3c0-0000-7000-8000-000000000002";

/** Registers the tests; `store` returns the fresh store of the running test. */
export function runRevocationContract(store: () => Store, A: string, B: string): void {
  const projects = async () => {
    await store().createProject({ id: A, name: "a", createdAt: T0 });
    await store().createProject({ id: B, name: "b", createdAt: T0 });
  };

  test("revocation: a revoked jti is revoked until its expiry, in its own project only", async () => {
    expect(await store().isTokenRevoked(A, JTI, T0)).toBe(false);
    await store().revokeToken(A, JTI, T0 + 60_000, T0);
    expect(await store().isTokenRevoked(A, JTI, T0)).toBe(true);
    expect(await store().isTokenRevoked(A, JTI, T0 + 59_999)).toBe(true);
    // At its expiry the token is expired anyway: the entry no longer counts, pruned or not.
    expect(await store().isTokenRevoked(A, JTI, T0 + 60_000)).toBe(false);
    expect(await store().isTokenRevoked(A, OTHER, T0)).toBe(false);
    expect(await store().isTokenRevoked(B, JTI, T0)).toBe(false);
  });

  test("revocation: revoking again is harmless and keeps the later expiry", async () => {
    await store().revokeToken(A, JTI, T0 + 60_000, T0);
    await store().revokeToken(A, JTI, T0 + 60_000, T0 + 1);
    await store().revokeToken(A, JTI, T0 + 30_000, T0 + 2);
    expect(await store().isTokenRevoked(A, JTI, T0 + 45_000)).toBe(true);
    await projects();
    // One entry, not three: exactly one is pruned once it expired.
    expect(await store().pruneExpired(T0 + 60_000, 100)).toBe(1);
    expect(await store().pruneExpired(T0 + 60_000, 100)).toBe(0);
  });

  test("revocation: pruneExpired removes only expired entries, of every project, at most `limit` a call", async () => {
    await projects();
    for (let i = 0; i < 5; i++) await store().revokeToken(A, `a-${i}`, T0 + 1000 * (i + 1), T0);
    await store().revokeToken(B, "b-0", T0 + 1000, T0);
    await store().revokeToken(B, "b-late", T0 + 10_000, T0);
    const now = T0 + 3000;
    // Expired at `now`: a-0, a-1, a-2 (expiry at `now` included) and b-0.
    expect(await store().pruneExpired(now, 3)).toBe(3);
    expect(await store().pruneExpired(now, 3)).toBe(1);
    expect(await store().pruneExpired(now, 3)).toBe(0);
    // Still revoked at an earlier instant means the entry is still stored; pruned ones are gone.
    for (const jti of ["a-0", "a-1", "a-2"]) expect(await store().isTokenRevoked(A, jti, T0)).toBe(false);
    expect(await store().isTokenRevoked(B, "b-0", T0)).toBe(false);
    for (const jti of ["a-3", "a-4"]) expect(await store().isTokenRevoked(A, jti, T0)).toBe(true);
    expect(await store().isTokenRevoked(B, "b-late", T0)).toBe(true);
    expect(await store().pruneExpired(T0 + 10_000, 100)).toBe(3);
  });

  test("revocation: revokeToken removes the project's expired entries in passing", async () => {
    await projects();
    await store().revokeToken(A, "old-1", T0 + 1000, T0);
    await store().revokeToken(A, "old-2", T0 + 2000, T0);
    await store().revokeToken(B, "other-project", T0 + 1000, T0);
    await store().revokeToken(A, JTI, T0 + 60_000, T0 + 5000);
    expect(await store().isTokenRevoked(A, "old-1", T0)).toBe(false);
    expect(await store().isTokenRevoked(A, "old-2", T0)).toBe(false);
    expect(await store().isTokenRevoked(B, "other-project", T0)).toBe(true);
    expect(await store().isTokenRevoked(A, JTI, T0 + 5000)).toBe(true);
    expect(await store().pruneExpired(T0 + 5000, 100)).toBe(1);
  });

  test("clients: tokensRevokedBefore is set by updateClient and round-trips exactly", async () => {
    const p = providerRecord(A, T0);
    await store().createProvider(p);
    const c = clientRecord(p, T0 + 1);
    await store().createClient(c);
    const updated = await store().updateClient(A, p.id, c.id, (cur) => ({ ...cur, tokensRevokedBefore: T0 + 1234, updatedAt: T0 + 1234 }));
    expect(updated.tokensRevokedBefore).toBe(T0 + 1234);
    expect(await store().getClient(A, p.id, c.id)).toEqual(updated);
    expect(await store().getClientById(A, c.id)).toEqual(updated);
  });
}
