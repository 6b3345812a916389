/**
 * @module store/lmdb/lmdb-file
 * File-level helpers of the LMDB backend: recognizing an LMDB data file before lmdb opens it
 * (lmdb's native code crashes the process on anything else) and flushing files to disk.
 */
import { closeSync, fstatSync, fsyncSync, openSync, readSync } from "node:fs";

/** LMDB's meta-page stamp and the data-file version of the bundled build. */
const LMDB_MAGIC = 0xbeefc0de;
const LMDB_DATA_VERSION = 2;
/** Byte offsets in a meta page (64-bit little-endian layout): a 24-byte page header, then the meta. */
const META = { flags: 18, magic: 24, version: 28, pageSize: 48 } as const;
const P_META = 0x08;

/**
 * Why `path` is not an LMDB data file of the bundled build ("is not an LMDB data file"), or
 * undefined when both meta pages look right. lmdb's native code crashes the whole process on a
 * file that is not LMDB, so a file from outside is checked before it is opened.
 */
export function lmdbFileProblem(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    return `cannot be read: ${(error as Error).message}`;
  }
  try {
    const head = Buffer.alloc(64);
    const isMeta = (offset: number) =>
      readSync(fd, head, 0, head.length, offset) === head.length &&
      head.readUInt32LE(META.magic) === LMDB_MAGIC &&
      head.readUInt32LE(META.version) === LMDB_DATA_VERSION &&
      (head.readUInt16LE(META.flags) & P_META) !== 0;
    if (!isMeta(0)) return "is not an LMDB data file";
    const pageSize = head.readUInt32LE(META.pageSize);
    const sane = pageSize >= 512 && pageSize <= 65536 && (pageSize & (pageSize - 1)) === 0;
    if (!sane || fstatSync(fd).size < 2 * pageSize || !isMeta(pageSize)) return "is a damaged or incomplete LMDB data file";
    return undefined;
  } catch (error) {
    return `cannot be read: ${(error as Error).message}`;
  } finally {
    closeSync(fd);
  }
}

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

