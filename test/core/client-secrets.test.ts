/** core/client-secrets: the secret format, and matching a presented secret against the stored hashes. */
import { describe, expect, test } from "bun:test";
import { hashSecret } from "../../src/core/secret-hash.ts";
import { clientSecretMatches, generateClientSecret, MAX_CLIENT_SECRETS } from "../../src/core/client-secrets.ts";
import type { ClientRecord, ClientSecretRecord, Store } from "../../src/store/store.ts";

const CLIENT = { id: "019b76da-a800-7e50-824c-20b312d17a69", projectId: "019b76da-a800-7000-8000-000000000001" } as ClientRecord;

/** A store that holds `hashes` as the client's secrets and records what was asked. */
function storeWith(hashes: string[]): { store: Store; asked: string[][] } {
  const asked: string[][] = [];
  const records = hashes.map((hash, i) => ({ id: `s${i}`, projectId: CLIENT.projectId, clientId: CLIENT.id, hash, lastFour: "xxxx", createdAt: 0 }) as ClientSecretRecord);
  const store = {
    listClientSecrets: async (projectId: string, clientId: string) => {
      asked.push([projectId, clientId]);
      return records;
    },
  } as unknown as Store;
  return { store, asked };
}

describe("client secrets", () => {
  test("a secret is tms_ and 256 bits of base64url, never repeated", () => {
    const secrets = new Set(Array.from({ length: 100 }, generateClientSecret));
    expect(secrets.size).toBe(100);
    for (const secret of secrets) expect(secret).toMatch(/^tms_[A-Za-z0-9_-]{43}$/);
    expect(MAX_CLIENT_SECRETS).toBe(2);
  });

  test("matches when the presented secret hashes to any stored hash of the client", async () => {
    const [one, two] = [generateClientSecret(), generateClientSecret()];
    const { store, asked } = storeWith([hashSecret(one), hashSecret(two)]);
    expect(await clientSecretMatches(store, CLIENT, one)).toBe(true);
    expect(await clientSecretMatches(store, CLIENT, two)).toBe(true);
    expect(await clientSecretMatches(store, CLIENT, generateClientSecret())).toBe(false);
    expect(await clientSecretMatches(store, CLIENT, `${one} `)).toBe(false);
    expect(await clientSecretMatches(store, CLIENT, hashSecret(one))).toBe(false);
    expect(asked.every(([projectId, clientId]) => projectId === CLIENT.projectId && clientId === CLIENT.id)).toBe(true);
  });

  test("a client without secrets matches nothing", async () => {
    expect(await clientSecretMatches(storeWith([]).store, CLIENT, "")).toBe(false);
    expect(await clientSecretMatches(storeWith([]).store, CLIENT, generateClientSecret())).toBe(false);
  });
});
