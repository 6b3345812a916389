/**
 * @module runtime/durable-files
 * Files that are on disk before anyone relies on them: flushing a file or directory, and putting
 * a flushed file in place without ever replacing one that is there (the store's backups, a
 * generated master key).
 */
import { closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync } from "node:fs";
import { dirname } from "node:path";

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
