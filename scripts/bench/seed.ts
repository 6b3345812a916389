/**
 * Fills a data directory with many providers and clients for the scale variant of the benchmark.
 * Writes go straight into the LMDB file in large synchronous transactions, with the store's own
 * key layout (store/lmdb/lmdb-keys.ts) and records shaped as the store writes them, client-id
 * index included: a million clients in well under a minute, where one store call per record
 * would take minutes. Run it while no server uses the directory.
 *
 *   bun scripts/bench/seed.ts DATA_DIR PROVIDERS CLIENTS
 *
 * The data directory must already hold the default project (run any CLI command first). Clients
 * are spread evenly over the providers. Prints one JSON line {providers, clients, seconds}.
 */
import { join } from "node:path";
import { open, type RootDatabase } from "lmdb";
import { uuidv7 } from "../../src/core/ids.ts";
import { LMDB_FILE, openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import { key } from "../../src/store/lmdb/lmdb-keys.ts";
import type { ClientRecord, ProviderRecord } from "../../src/store/store.ts";

/** Records per write transaction. */
const BATCH = 50_000;

/** Adds `providers` providers and `clients` clients to the only project in `dataDir`. */
export async function seed(dataDir: string, providers: number, clients: number, progress?: (done: string) => void): Promise<void> {
  const store = openLmdbStore(dataDir);
  const [project] = await store.listProjects();
  await store.close();
  if (project === undefined) throw new Error("the data directory holds no project yet");
  // The same environment options as the store (lmdb-store.ts openLmdbStore).
  const db = open({ path: join(dataDir, LMDB_FILE), encoding: "json", compression: false }) as RootDatabase<unknown, string>;
  try {
    // Every record gets its own millisecond, counting up to now, so ids (UUIDv7) and keys grow
    // in insertion order: LMDB appends instead of splitting pages all over the tree.
    let ms = Date.now() - providers - clients;
    const providerIds: string[] = new Array(providers);
    for (let start = 0; start < providers; start += BATCH) {
      db.transactionSync(() => {
        for (let i = start; i < Math.min(providers, start + BATCH); i++) {
          const at = ms++;
          const record: ProviderRecord = { id: uuidv7(at), projectId: project.id, name: `provider ${i}`, description: "bench", createdAt: at, updatedAt: at };
          providerIds[i] = record.id;
          db.putSync(key.provider(project.id, record.id), record);
        }
      });
    }
    progress?.(`${providers} providers`);
    // Provider by provider: client keys (provider id first) then grow too.
    for (let start = 0; start < clients; start += BATCH) {
      db.transactionSync(() => {
        for (let i = start; i < Math.min(clients, start + BATCH); i++) {
          const at = ms++;
          const record: ClientRecord = {
            id: uuidv7(at),
            projectId: project.id,
            providerId: providerIds[Math.floor((i * providers) / clients)] as string,
            name: `client ${i}`,
            audience: `https://service-${i % 1000}.bench.example`,
            createdAt: at,
            updatedAt: at,
          };
          db.putSync(key.client(project.id, record.providerId, record.id), record);
          db.putSync(key.clientIndex(project.id, record.id), record.providerId);
        }
      });
      if ((start + BATCH) % 200_000 === 0) progress?.(`${start + BATCH} clients`);
    }
    await db.flushed;
  } finally {
    await db.close();
  }
}

if (import.meta.main) {
  const [dataDir, providers, clients] = process.argv.slice(2);
  const started = performance.now();
  await seed(dataDir as string, Number(providers), Number(clients), (done) => console.error(`seed: ${done}`));
  console.log(JSON.stringify({ providers: Number(providers), clients: Number(clients), seconds: Math.round((performance.now() - started) / 100) / 10 }));
}
