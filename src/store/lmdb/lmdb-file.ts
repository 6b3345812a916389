/**
 * @module store/lmdb/lmdb-file
 * File-level helpers of the LMDB backend: recognizing an LMDB data file before lmdb opens it
 * (lmdb's native code crashes the process on anything else), telling damage lmdb reports from
 * other failures, and writing a backup file that never appears half-written (and removing the
 * partial copies killed backups left).
 */
import { chmodSync, closeSync, existsSync, fstatSync, openSync, readSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { fsyncPath, partialPathFor, placeFile } from "../../runtime/durable-files.ts";
import { sleepSync } from "../../runtime/sleep-sync.ts";
import { StoreError } from "../store.ts";

/** LMDB's meta-page stamp and the data-file version of the bundled build. */
const LMDB_MAGIC = 0xbeefc0de;
const LMDB_DATA_VERSION = 2;
/** Byte offsets in a meta page (64-bit little-endian layout): a 24-byte page header, then the meta. */
const META = { flags: 18, magic: 24, version: 28, pageSize: 48, lastPage: 144, txnId: 152 } as const;
const P_META = 0x08;

/**
 * Why `path` is not an LMDB data file of the bundled build ("is not an LMDB data file"), or
 * undefined when both meta pages look right. lmdb's native code crashes the whole process on a
 * file that is not LMDB, so a file from outside is checked before it is opened. The data file of
 * a running server is read while it commits: a file that looks damaged is read again, three
 * times 20 ms apart, before it is called so.
 */
export function lmdbFileProblem(path: string): string | undefined {
  let problem = headerProblem(path);
  for (let attempt = 0; attempt < 3 && problem === DAMAGED; attempt++) {
    sleepSync(20);
    problem = headerProblem(path);
  }
  return problem;
}

const DAMAGED = "is a damaged or incomplete LMDB data file";

/** One reading of `path`'s meta pages for lmdbFileProblem. */
function headerProblem(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    return `cannot be read: ${(error as Error).message}`;
  }
  try {
    const head = Buffer.alloc(META.txnId + 8);
    const isMeta = (offset: number) =>
      readSync(fd, head, 0, head.length, offset) === head.length &&
      head.readUInt32LE(META.magic) === LMDB_MAGIC &&
      head.readUInt32LE(META.version) === LMDB_DATA_VERSION &&
      (head.readUInt16LE(META.flags) & P_META) !== 0;
    if (!isMeta(0)) return "is not an LMDB data file";
    const pageSize = head.readUInt32LE(META.pageSize);
    const sane = pageSize >= 512 && pageSize <= 65536 && (pageSize & (pageSize - 1)) === 0;
    const size = fstatSync(fd).size;
    if (!sane || size < 2 * pageSize) return DAMAGED;
    const first = { lastPage: head.readBigUInt64LE(META.lastPage), txnId: head.readBigUInt64LE(META.txnId) };
    if (!isMeta(pageSize)) return DAMAGED;
    const second = { lastPage: head.readBigUInt64LE(META.lastPage), txnId: head.readBigUInt64LE(META.txnId) };
    // Every page up to the current meta's last one must be in the file: LMDB maps the file and
    // reading a page past its end kills the process (SIGBUS), so a truncated copy stops here.
    const current = second.txnId > first.txnId ? second : first;
    if (BigInt(size) < (current.lastPage + 1n) * BigInt(pageSize)) return DAMAGED;
    return undefined;
  } catch (error) {
    return `cannot be read: ${(error as Error).message}`;
  } finally {
    closeSync(fd);
  }
}

/**
 * LMDB's errors for a data file it finds damaged as it reads, by code and by name: a page missing
 * or not what the tree says it is (MDB_PAGE_NOTFOUND, MDB_CORRUPTED), or an environment that
 * failed fatally before (MDB_PANIC). Reads throw them with their `code`; a backup's copy only
 * with the name opening the message.
 */
const DAMAGE = new Map([
  [-30797, "MDB_PAGE_NOTFOUND"],
  [-30796, "MDB_CORRUPTED"],
  [-30795, "MDB_PANIC"],
]);
const DAMAGE_NAMES = [...DAMAGE.values()];

/**
 * What a read that found the data file damaged becomes: `unavailable`, naming the file and the way
 * back (a backup). Anything else stays as it is. (Some damage LMDB does not detect stops the
 * process instead; the way back is the same.)
 */
export function damageFailure(error: unknown, path: string): unknown {
  if (!(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  const damage = typeof code === "number" ? DAMAGE.has(code) : DAMAGE_NAMES.some((name) => error.message.startsWith(`${name}:`));
  if (!damage) return error;
  return new StoreError("unavailable", `${path} is damaged (${error.message}): stop the server and restore a backup (tokenmint restore FILE)`);
}

/** The part of an lmdb environment a backup needs. */
interface BackupSource {
  backup(path: string, compact: boolean): Promise<void>;
}

/**
 * Writes a compacted copy of the whole environment to `path` (mode 0600). It is read in one
 * snapshot, so it is consistent while other processes write. The copy is made under a temporary
 * name beside `path`, flushed, then linked into place: `path` never holds a partial copy, and an
 * existing `path` is `already_exists` and never overwritten. The partial copies of `path` that
 * killed backups left are removed first: as big as the data and holding its sealed keys, they
 * would stay forever.
 */
export async function backupEnvironment(db: BackupSource, path: string, source: string): Promise<void> {
  const target = resolve(path);
  // Those of backups still running (their process is alive) stay.
  const partial = partialPathFor(target);
  if (existsSync(target)) throw new StoreError("already_exists", `${path} already exists`);
  // lmdb creates the copy with the process's umask: the partial copy, readable by others until
  // chmod, and left so by a backup killed meanwhile, is the owner's alone from its first byte.
  const umask = process.umask(0o077);
  try {
    try {
      await db.backup(partial, true);
    } finally {
      process.umask(umask);
    }
    chmodSync(partial, 0o600);
    fsyncPath(partial);
    if (!placeFile(partial, target)) throw new StoreError("already_exists", `${path} already exists`);
  } catch (error) {
    if (error instanceof StoreError) throw error;
    // Damage met while reading `source` is the data's fault, not the backup's.
    const damaged = damageFailure(error, source);
    if (damaged !== error) throw damaged;
    throw new StoreError("unavailable", `cannot write the backup ${path}: ${(error as Error).message}`);
  } finally {
    rmSync(partial, { force: true });
  }
}
