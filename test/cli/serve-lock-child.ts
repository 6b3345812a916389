/**
 * A child process for serve-lock.test.ts: a server (or a restore) taking the lock of a data
 * directory. Prints `ready`, takes the lock when a line arrives on stdin, prints `held` or
 * `refused PID`, and releases it and exits when stdin ends. The `serve` (or `restore`) in its
 * command line makes it count as one to the others.
 * Usage: bun serve-lock-child.ts DATA_DIR serve|restore
 */
import { acquireServeLock } from "../../src/cli/serve-lock.ts";

const dataDir = process.argv[2] as string;
const lines = (async function* () {
  const decoder = new TextDecoder();
  for await (const chunk of Bun.stdin.stream()) yield decoder.decode(chunk);
})();
process.stdout.write("ready\n");
await lines.next();
const lock = acquireServeLock(dataDir);
process.stdout.write("heldBy" in lock ? `refused ${lock.heldBy.pid}\n` : "held\n");
while (!(await lines.next()).done);
if ("release" in lock) lock.release();
process.exit(0);
