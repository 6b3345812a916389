/**
 * A child process for the open-guard tests: another process on the same data file.
 *   bun open-guard-child.ts <dataFile> write <ms>   holds a write's shared lock for ms, then lets go
 *   bun open-guard-child.ts <dataFile> open <ms>    holds an open's locks for ms
 * Prints `started` once it holds them and `done <epoch ms>` as it lets go.
 */
import { sleepSync } from "../../src/runtime/sleep-sync.ts";
import { openGuard } from "../../src/store/lmdb/open-guard.ts";

const [file, mode, ms] = process.argv.slice(2) as [string, string, string];
const guard = openGuard(file);
if (guard === undefined) throw new Error("no guard here");
const hold = () => {
  console.log("started");
  sleepSync(Number(ms));
  console.log(`done ${Date.now()}`);
};
if (mode === "write") {
  await guard.beforeWrite();
  hold();
  guard.written();
} else {
  guard.opening(hold);
}
