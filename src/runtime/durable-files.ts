/**
 * @module runtime/durable-files
 * Files that are on disk before anyone relies on them: flushing a file or directory, and putting
 * a flushed file in place without ever replacing one that is there (the store's backups, a
 * generated master key). Also removing the files a killed process left under its temporary
 * names (a backup's partial copy, a restore's staged data), which nothing else ever would.
 */
import { closeSync, existsSync, fsyncSync, linkSync, openSync, readdirSync, renameSync, rmSync, unlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** Flushes a file or directory to disk; a platform that cannot sync a directory is skipped. */
export function fsyncPath(path: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    fsyncSync(fd);
  } catch (error) {
    if (fd === undefined || !["EISDIR", "EINVAL", "EPERM"].includes((error as NodeJS.ErrnoException).code ?? "")) throw error;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Filesystems without hard links: a file is renamed into place instead, after a check. */
const NO_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EXDEV"]);

/**
 * The temporary name this process writes `target` under before placeFile puts it in place,
 * `.<name>.<pid>.partial` beside it, cleared of this process's own; the partial copies killed
 * processes left of the same `target` are removed first (removeLeftovers), those of live ones kept.
 */
export function partialPathFor(target: string): string {
  const prefix = `.${basename(target)}.`;
  removeLeftovers(dirname(target), prefix, [PARTIAL_SUFFIX]);
  const partial = join(dirname(target), `${prefix}${process.pid}${PARTIAL_SUFFIX}`);
  rmSync(partial, { force: true });
  return partial;
}

/** The end of a partial file's name (partialPathFor). */
const PARTIAL_SUFFIX = ".partial";

/**
 * Puts the flushed file `partial` in place at `target` unless something is there already (then
 * false, and `target` is left as it is), and flushes the directory. A hard link never replaces
 * `target`; where links are not supported, a rename after a check does.
 */
export function placeFile(partial: string, target: string): boolean {
  try {
    linkSync(partial, target);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "";
    if (code === "EEXIST" || (NO_LINKS.has(code) && existsSync(target))) return false;
    if (!NO_LINKS.has(code)) throw error;
    renameSync(partial, target);
  }
  fsyncPath(dirname(target));
  return true;
}

/** The largest pid `process.kill` takes (a signed 32-bit number); no system hands out more. */
const MAX_PID = 2 ** 31 - 1;

/**
 * Whether no process `pid` exists (signal 0 finds none: ESRCH). One of another user (EPERM) is
 * alive, and so is whatever process has that pid now, even one that reused it: its file is kept,
 * which only leaves a leftover a while longer. Only this pid namespace is seen: on a directory
 * shared with another container or machine, a file of a process running there counts as left
 * (that process then fails its command; nothing of the data is lost).
 */
export function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * Removes the files of `dir` named `<prefix><pid><suffix>` (the pid in decimal digits as a process
 * writes it, one of `suffixes`) whose process is gone: what a process killed (kill -9, a power
 * loss) left under its temporary names, which it would have removed itself. Any other name is
 * never touched, nor a file of a live process, which may still be writing it. Nothing here fails
 * the caller: a directory that cannot be read, or a file that cannot be removed, is left as it is.
 */
export function removeLeftovers(dir: string, prefix: string, suffixes: readonly string[]): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = suffixes.map((suffix) => pidNamed(name.slice(prefix.length), suffix)).find((found) => found !== undefined);
    if (pid === undefined || !processGone(pid)) continue;
    try {
      unlinkSync(join(dir, name));
    } catch {
      // Removed meanwhile, or not ours to remove (another user's directory): left as it is.
    }
  }
}

/** The pid `rest` names when it is exactly `<pid><suffix>` (no sign, no leading zero), else undefined. */
function pidNamed(rest: string, suffix: string): number | undefined {
  if (!rest.endsWith(suffix)) return undefined;
  const digits = rest.slice(0, rest.length - suffix.length);
  if (!/^[1-9][0-9]{0,9}$/.test(digits)) return undefined;
  const pid = Number(digits);
  return pid <= MAX_PID ? pid : undefined;
}
