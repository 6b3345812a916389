/**
 * A child process for the test of writes beside readers (lmdb.test.ts): opens the data file
 * read-only as `tokenmint check` and `backup` do, reads the projects and the format, and closes it.
 * Usage: bun reader-child.ts <dataFile>
 */
import { openLmdbFileReadOnly } from "../../src/store/lmdb/lmdb-store.ts";

const store = openLmdbFileReadOnly(process.argv[2] as string);
await store.listProjects();
await store.getMeta("format");
await store.close();
process.exit(0);
