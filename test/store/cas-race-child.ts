/**
 * A child process for the cross-process compare-and-swap race in lmdb.test.ts. It opens the store,
 * reads the key set version, prints "ready <version>", waits for one line on stdin, then tries
 * swapKeySet(its own set, that version) and prints "swapped true|false".
 * Usage: bun cas-race-child.ts <dataDir> <projectId> <label>
 */
import { openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import { keySetRecord } from "./fixtures.ts";

const [dataDir, projectId, label] = process.argv.slice(2) as [string, string, string];
const store = openLmdbStore(dataDir);
const version = (await store.getKeySet(projectId))?.version ?? 0;
process.stdout.write(`ready ${version}\n`);
await new Promise((resolve) => process.stdin.once("data", resolve));
const next = { ...keySetRecord(projectId, version + 1), rotatedAt: Number(label) };
const swapped = await store.swapKeySet(next, version);
process.stdout.write(`swapped ${swapped}\n`);
await store.close();
process.exit(0);
