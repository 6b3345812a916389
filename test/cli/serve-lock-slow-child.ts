/**
 * A child process for serve-lock.test.ts: a server taking the lock of DATA_DIR over a stale
 * serve.pid, slowed at one point: holding the takeover file, it says so (SYNC_DIR/b-checked)
 * and waits for SYNC_DIR/c-checked before it looks at serve.pid again. Writes what it got to
 * SYNC_DIR/b-result, then stays alive (a live holder) until killed.
 * Usage: bun serve-lock-slow-child.ts DATA_DIR SYNC_DIR STALE_PID serve
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { acquireServeLock, type ProcessProbe } from "../../src/cli/serve-lock.ts";

const [dir, sync, stale] = process.argv.slice(2) as [string, string, string];
let staleLooks = 0;
const probe: ProcessProbe = {
  signal: (pid) => {
    // Its third look at the stale pid is the one made holding the takeover file.
    if (pid === Number(stale) && ++staleLooks === 3) {
      writeFileSync(join(sync, "b-checked"), "");
      while (!existsSync(join(sync, "c-checked"))) Bun.sleepSync(5);
    }
    process.kill(pid, 0);
  },
  cmdline: (pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8"),
  hasProc: () => true,
};
const lock = acquireServeLock(dir, probe);
writeFileSync(join(sync, "b-result"), "heldBy" in lock ? `refused ${lock.heldBy.pid}` : "held");
setInterval(() => {}, 1_000);
