/**
 * A child process for the freshness tests of changeSeqNow (lmdb.test.ts, caching-store.test.ts):
 * opens the store, renames one provider, and exits once the write is committed.
 * Usage: bun rename-child.ts <dataDir> <projectId> <providerId> <name>
 */
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";

const [dataDir, projectId, providerId, name] = process.argv.slice(2) as [string, string, string, string];
const store = openLmdbStore(dataDir);
await store.updateProvider(projectId, providerId, (cur) => ({ ...cur, name }));
await store.close();
process.exit(0);
