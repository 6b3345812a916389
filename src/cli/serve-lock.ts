/**
 * @module cli/serve-lock
 * One `serve` per data directory: the server writes `<data-dir>/serve.pid` while it runs, from
 * before it opens the data, and only where no file is (acquireServeLock), so of two servers
 * started together one serves. A second `serve` and `restore` refuse while that process is alive;
 * `restore` holds the file too while it replaces the data, so no server starts on it meanwhile.
 * A file left by a killed process is recognized as stale (its pid is gone, or is no longer a
 * tokenmint server or restore) and replaced. The file also names the directory it was written in
 * (device and inode): a copy of the directory, file and all, is not held by the server of the
 * original.
 */
import { existsSync, linkSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sleepSync } from "../runtime/sleep-sync.ts";
import { StartupError } from "../startup.ts";

export const SERVE_LOCK_FILE = "serve.pid";

/** What `liveServer` asks of the system about a process; tests stand in for it. */
export interface ProcessProbe {
  /** Signals 0 to `pid`: throws as `process.kill` does (ESRCH: gone; EPERM: another user's). */
  signal(pid: number): void;
  /** The process's command line, NUL-separated; throws when it cannot be read. */
  cmdline(pid: number): string;
  /** Whether this system has a /proc at all (this process's own entry can be read). */
  hasProc(): boolean;
}

const SYSTEM: ProcessProbe = {
  signal: (pid) => {
    process.kill(pid, 0);
  },
  cmdline: (pid) => readFileSync(`/proc/${pid}/cmdline`, "utf8"),
  hasProc: () => existsSync("/proc/self/cmdline"),
};

/**
 * The pid of a live server (or restore) holding `dataDir`, or undefined. The pid in the file
 * counts only if that process is alive and, where /proc tells, still a `serve` or `restore`: a
 * killed server's pid reused by another program is not a holder. A process of another user that /proc hides (systemd's
 * `ProtectProc=invisible`, `hidepid`) is not one either: the data directory's own user, whom a
 * server of it runs as, can always see its own processes.
 */
export function liveServer(dataDir: string, probe: ProcessProbe = SYSTEM): number | undefined {
  return holderIn(join(dataDir, SERVE_LOCK_FILE), dataDir, probe)?.pid;
}

/** The live process holding a data directory's lock, and its command: a server, or a restore replacing the data. */
export interface LockHolder {
  pid: number;
  command: "serve" | "restore";
}

/** The live process holding `dataDir` (see liveServer), with its command, or undefined. */
export function lockHolder(dataDir: string, probe: ProcessProbe = SYSTEM): LockHolder | undefined {
  return holderIn(join(dataDir, SERVE_LOCK_FILE), dataDir, probe);
}

/** The live holder named by `file`, a lock file of `dataDir` (see liveServer), or undefined. */
function holderIn(file: string, dataDir: string, probe: ProcessProbe): LockHolder | undefined {
  let pid: number;
  let written: string | undefined;
  try {
    const [first, second] = readFileSync(file, "utf8").split("\n");
    pid = Number.parseInt(first ?? "", 10);
    written = second === "" ? undefined : second;
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return undefined;
  // Written in another directory: this one is a copy (a file of an earlier build names none).
  if (written !== undefined && written !== directoryIdentity(dataDir)) return undefined;
  try {
    probe.signal(pid);
  } catch (error) {
    // EPERM: alive but owned by another user (maybe a holder: see below).
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return undefined;
  }
  let cmdline: string;
  try {
    cmdline = probe.cmdline(pid);
  } catch {
    // Hidden from us: another user's process. No /proc at all (not Linux): trust the liveness check.
    return probe.hasProc() ? undefined : { pid, command: "serve" };
  }
  // A reused pid of some unrelated program is not a holder.
  const words = cmdline.split("\0");
  return words.includes("serve") ? { pid, command: "serve" } : words.includes("restore") ? { pid, command: "restore" } : undefined;
}

/** The device and inode of `dir`, which a copy of it does not share. */
const directoryIdentity = (dir: string): string | undefined => {
  try {
    const { dev, ino } = statSync(dir);
    return `${dev}:${ino}`;
  } catch {
    return undefined;
  }
};

/** How long to wait for another process's replacement of a stale file, in steps of TAKE_STEP_MS. */
const TAKE_WAIT_MS = 2_000;
const TAKE_STEP_MS = 10;

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code;

/** Errors of a file system without hard links (FAT, some network shares). */
const NO_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

/**
 * Puts the file `from` at `to` unless a file is there (EEXIST): a hard link, so it appears whole.
 * Where the file system has no links, an exclusive create written at once: a process starting
 * in the same instant could read it empty, which is the one race left there.
 */
function place(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch (error) {
    if (!NO_LINKS.has(errorCode(error) ?? "")) throw error;
    writeFileSync(to, readFileSync(from), { mode: 0o600, flag: "wx" });
  }
}

/**
 * Takes the lock for this process or returns the live holder. The file is written beside its
 * place and linked there, which fails when a file is there already: two servers starting
 * together cannot both take it, and no one reads it half written. A stale file is replaced in
 * one rename, so the place is never empty for a third process to take, and only by the process
 * holding `serve.pid.takeover` (taken the same way), which looks at the file again first: of
 * processes that found the same stale file, one replaces it and the others find it held. A
 * takeover file left by a process killed in those few milliseconds is stale too, and removed
 * (removeStale).
 */
export function acquireServeLock(dataDir: string, probe: ProcessProbe = SYSTEM): { release: () => void } | { heldBy: LockHolder } {
  const path = join(dataDir, SERVE_LOCK_FILE);
  const takeover = `${path}.takeover`;
  const mine = `${path}.${process.pid}`;
  const cannot = (what: string, error: unknown) => new StartupError(`cannot ${what} ${path}: ${(error as Error).message}`);
  try {
    writeFileSync(mine, `${process.pid}\n${directoryIdentity(dataDir) ?? ""}\n`, { mode: 0o600 });
  } catch (error) {
    throw cannot("write", error);
  }
  try {
    for (let waited = 0; ; waited += TAKE_STEP_MS) {
      try {
        place(mine, path);
        break;
      } catch (error) {
        if (errorCode(error) !== "EEXIST") throw cannot("write", error);
      }
      const holder = holderIn(path, dataDir, probe);
      if (holder !== undefined) return { heldBy: holder };
      // Stale: replaced only under the takeover file.
      let tookOver = false;
      try {
        place(mine, takeover);
        tookOver = true;
      } catch (error) {
        if (errorCode(error) !== "EEXIST") throw cannot("replace", error);
        // Another process is replacing it; one killed meanwhile left its takeover file behind.
        if (holderIn(takeover, dataDir, probe) === undefined) removeStale(takeover, dataDir, probe);
      }
      if (tookOver) {
        try {
          const now = holderIn(path, dataDir, probe);
          if (now !== undefined) return { heldBy: now };
          renameSync(mine, path);
          return lockOf(path);
        } catch (error) {
          throw cannot("replace", error);
        } finally {
          rmSync(takeover, { force: true });
        }
      }
      if (waited >= TAKE_WAIT_MS) throw new StartupError(`cannot take ${path}: another process keeps replacing it`);
      sleepSync(TAKE_STEP_MS);
    }
  } finally {
    rmSync(mine, { force: true });
  }
  return lockOf(path);
}

/**
 * Removes the takeover file `takeover`, found stale, unless another process has put its own there
 * since: set aside in one rename (only one process can make it), looked at again, and put back
 * when it names a live process.
 */
function removeStale(takeover: string, dataDir: string, probe: ProcessProbe): void {
  const aside = `${takeover}.${process.pid}`;
  try {
    renameSync(takeover, aside);
  } catch {
    // Gone already: another process removed it, or finished its takeover.
    return;
  }
  if (holderIn(aside, dataDir, probe) !== undefined) {
    try {
      place(aside, takeover);
    } catch {
      // Yet another process's is there now.
    }
  }
  rmSync(aside, { force: true });
}

/** The lock this process holds at `path`: released by removing the file while it names this process. */
function lockOf(path: string): { release: () => void } {
  return {
    release: () => {
      try {
        if (Number.parseInt(readFileSync(path, "utf8"), 10) === process.pid) unlinkSync(path);
      } catch {
        // Already gone: nothing to release.
      }
    },
  };
}

/**
 * Makes sure the data directory exists and takes its lock for this server, before anything in
 * it is opened: a second server is refused before it could change a key, a setting or an API
 * key. Throws a StartupError naming the live holder.
 */
export function lockDataDir(dataDir: string): { release: () => void } {
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new StartupError(`cannot open the data directory ${dataDir}: ${(error as Error).message}`);
  }
  const lock = acquireServeLock(dataDir);
  if ("heldBy" in lock) {
    const { pid, command } = lock.heldBy;
    throw new StartupError(command === "restore" ? `tokenmint restore (pid ${pid}) is replacing the data in ${dataDir}` : `another tokenmint server (pid ${pid}) is serving the data directory ${dataDir}`);
  }
  return lock;
}
