/**
 * The storage contract of client-id lookups and client secrets, part of runStoreContract
 * (contract.ts): the client-id index follows the client, at most `maxSecrets` secrets per client
 * even under racing creates, and deleting a client deletes its secrets.
 */
import { expect, test } from "bun:test";
import type { Store } from "../../src/store/store.ts";
import { T0, clientRecord, clientSecretRecord, providerRecord, providerWithTwoClients, storeErrorKind } from "./fixtures.ts";

/** Registers the tests; `store` returns the fresh store of the running test. */
export function runClientSecretContract(store: () => Store, A: string, B: string): void {
    test("clients: getClientById finds a client under any provider of the project, and forgets it on delete", async () => {
      const p = providerRecord(A, T0);
      const q = providerRecord(A, T0 + 1);
      await store().createProvider(p);
      await store().createProvider(q);
      const cp = clientRecord(p, T0 + 2);
      const cq = clientRecord(q, T0 + 3);
      expect(await store().getClientById(A, cp.id)).toBeUndefined();
      await store().createClient(cp);
      await store().createClient(cq);
      expect(await store().getClientById(A, cp.id)).toEqual(cp);
      expect(await store().getClientById(A, cq.id)).toEqual(cq);
      const updated = await store().updateClient(A, q.id, cq.id, (cur) => ({ ...cur, audience: "urn:moved", updatedAt: T0 + 9 }));
      expect(await store().getClientById(A, cq.id)).toEqual(updated);
      expect(await store().getClientById(B, cp.id)).toBeUndefined();
      await store().deleteClient(A, p.id, cp.id);
      expect(await store().getClientById(A, cp.id)).toBeUndefined();
      expect(await store().getClientById(A, cq.id)).toEqual(updated);
      // A failed create (missing provider) indexes nothing.
      const ghost = clientRecord(providerRecord(A, T0 + 4), T0 + 5);
      expect(await storeErrorKind(store().createClient(ghost))).toBe("not_found");
      expect(await store().getClientById(A, ghost.id)).toBeUndefined();
    });

    test("clients: the same client id under another provider of the project is already_exists", async () => {
      const p = providerRecord(A, T0);
      const q = providerRecord(A, T0 + 1);
      await store().createProvider(p);
      await store().createProvider(q);
      const c = clientRecord(p, T0 + 2);
      await store().createClient(c);
      expect(await storeErrorKind(store().createClient({ ...c, providerId: q.id, name: "twin" }))).toBe("already_exists");
      expect(await store().getClient(A, q.id, c.id)).toBeUndefined();
      expect(await store().getClientById(A, c.id)).toEqual(c);
    });

    test("client secrets: create, list in creation order, delete; missing records are not_found", async () => {
      const p = providerRecord(A, T0);
      await store().createProvider(p);
      const c = clientRecord(p, T0 + 1);
      await store().createClient(c);
      expect(await store().listClientSecrets(A, c.id)).toEqual([]);
      const s1 = clientSecretRecord(c, T0 + 2000, "hash-one");
      const s2 = clientSecretRecord(c, T0 + 3000, "hash-two");
      await store().createClientSecret(s2, 2);
      await store().createClientSecret(s1, 2);
      expect(await store().listClientSecrets(A, c.id)).toEqual([s1, s2]);
      await store().deleteClientSecret(A, c.id, s1.id);
      expect(await store().listClientSecrets(A, c.id)).toEqual([s2]);
      expect(await storeErrorKind(store().deleteClientSecret(A, c.id, s1.id))).toBe("not_found");
      expect(await storeErrorKind(store().createClientSecret({ ...s1, id: s2.id }, 2))).toBe("already_exists");
      expect(await store().listClientSecrets(A, c.id)).toEqual([s2]);
      const ghost = clientRecord(p, T0 + 4);
      expect(await storeErrorKind(store().createClientSecret(clientSecretRecord(ghost, T0 + 5, "h"), 2))).toBe("not_found");
      expect(await store().listClientSecrets(A, ghost.id)).toEqual([]);
    });

    test("client secrets: a create beyond maxSecrets is conflict and writes nothing; a delete makes room", async () => {
      const { first: c, second: other } = await providerWithTwoClients(store(), A);
      const s1 = clientSecretRecord(c, T0 + 1000, "h1");
      const s2 = clientSecretRecord(c, T0 + 2000, "h2");
      const s3 = clientSecretRecord(c, T0 + 3000, "h3");
      await store().createClientSecret(s1, 2);
      await store().createClientSecret(s2, 2);
      expect(await storeErrorKind(store().createClientSecret(s3, 2))).toBe("conflict");
      expect(await store().listClientSecrets(A, c.id)).toEqual([s1, s2]);
      // The limit is per client.
      await store().createClientSecret(clientSecretRecord(other, T0 + 4000, "o1"), 2);
      await store().deleteClientSecret(A, c.id, s1.id);
      await store().createClientSecret(s3, 2);
      expect(await store().listClientSecrets(A, c.id)).toEqual([s2, s3]);
      // Racing creates never exceed the limit.
      const racers = [5, 6, 7, 8].map((i) => clientSecretRecord(other, T0 + i * 1000, `r${i}`));
      const results = await Promise.allSettled(racers.map((s) => store().createClientSecret(s, 2)));
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect(await store().listClientSecrets(A, other.id)).toHaveLength(2);
    });

    test("client secrets: deleting the client deletes its secrets, and only its own", async () => {
      const { provider: p, first: c, second: keep } = await providerWithTwoClients(store(), A);
      await store().createClientSecret(clientSecretRecord(c, T0 + 3, "c1"), 2);
      await store().createClientSecret(clientSecretRecord(c, T0 + 4, "c2"), 2);
      const kept = clientSecretRecord(keep, T0 + 5, "k1");
      await store().createClientSecret(kept, 2);
      await store().deleteClient(A, p.id, c.id);
      expect(await store().listClientSecrets(A, c.id)).toEqual([]);
      expect(await store().listClientSecrets(A, keep.id)).toEqual([kept]);
      // A client created again with the same id starts without secrets.
      await store().createClient(c);
      expect(await store().listClientSecrets(A, c.id)).toEqual([]);
    });
}
