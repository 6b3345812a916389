/**
 * A child process for the test of a write beside a restore (open-guard.test.ts): a command that
 * opened the data before the restore and writes while it replaces the data.
 *   bun replaced-child.ts <dataDir> <projectId>
 * Opens the store, writes a provider, prints `opened`, waits for a line on stdin, writes another, and prints
 * `written <id>` or `refused <message>`.
 */
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import { providerRecord, T0 } from "./fixtures.ts";

const [dataDir, projectId] = process.argv.slice(2) as [string, string];
const store = openLmdbStore(dataDir);
// A write before the restore: the one after it must find the data file replaced all the same.
await store.createProvider(providerRecord(projectId, T0, "earlier"));
console.log("opened");
for await (const _ of console) break;
const record = providerRecord(projectId, T0, "beside a restore");
try {
  await store.createProvider(record);
  console.log(`written ${record.id}`);
} catch (error) {
  console.log(`refused ${(error as Error).message}`);
}
await store.close();
