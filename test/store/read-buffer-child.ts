/**
 * A child process for lmdb-read-buffer.test.ts: opens a database in `dir` as the store does,
 * writes values of 100 KiB, 1 MiB and a few bytes, reads each back one by one and all of them
 * in a range (as the store lists), and prints one JSON line: whether each read matched, and the
 * process's array buffer memory after a full collection.
 * Usage: bun read-buffer-child.ts <dir>
 */
import { join } from "node:path";
import { open } from "lmdb";

const dir = process.argv[2] as string;
const db = open({ path: join(dir, "read-buffer.mdb"), encoding: "json", compression: false });
const values: Record<string, { text: string }> = {
  medium: { text: "m".repeat(100 * 1024) },
  large: { text: "l".repeat(1024 * 1024) },
  small: { text: "s" },
};
for (const [key, value] of Object.entries(values)) await db.put(key, value);
const reads: Record<string, boolean> = {};
// Twice in a row: the second read of each goes through a buffer an earlier, larger value grew.
for (let round = 0; round < 2; round++) {
  for (const [key, value] of Object.entries(values)) reads[`${key}${round}`] = (db.get(key) as { text: string } | undefined)?.text === value.text;
}
// In key order, as a listing reads them: large, medium, small.
reads.range = JSON.stringify([...db.getRange({})].map(({ value }) => value)) === JSON.stringify([values.large, values.medium, values.small]);
await db.close();
Bun.gc(true);
console.log(JSON.stringify({ reads, arrayBuffers: process.memoryUsage().arrayBuffers }));
