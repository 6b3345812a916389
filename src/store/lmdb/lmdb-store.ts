/**
 * @module store/lmdb
 * The embedded default store: one LMDB environment, one file (`tokenmint.mdb`) in the data
 * directory. Every record kind has its own key prefix with the project first (lmdb-keys.ts), so
 * a listing is one range scan and never crosses projects. Writes run in lmdb transactions and
 * resolve only once their commit is flushed to disk, so a resolved write is durable. Several
 * processes (the server and the CLI) may use the file at once; LMDB serializes their writers.
 * A client, its client-id index, its secrets and its public keys change together, in one
 * transaction. A revoked token and a used assertion jti are each kept twice (by id, and by
 * expiry so that pruning is a bounded range scan), written and removed together.
 * Every write transaction of data that servers keep in memory also bumps one change counter
 * (`changeSeq`), so a process can tell cheaply that some other process wrote; recording a used
 * assertion jti or a revoked token (read through every time) does not.
 * Each write first makes sure the disk has room for lmdb's commit (ROOM_NEEDED), and is refused
 * before lmdb writes anything where it has not.
 * `backup` copies the environment from one read snapshot; `openLmdbFileReadOnly` reads a data
 * file or a backup without changing it.
 */
import { accessSync, chmodSync, closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, statSync, statfsSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { open, type RootDatabase } from "lmdb";
import {
  StoreError,
  type ApiKeyRecord,
  type ClientJwksRecord,
  type ClientRecord,
  type ClientSecretRecord,
  type KeySetRecord,
  type KeysChanges,
  type Page,
  type PageRequest,
  type ProjectRecord,
  type ProviderRecord,
  type Store,
  type Updater,
} from "../store.ts";
import { finishesWithin } from "../../runtime/finishes-within.ts";
import { backupEnvironment, damageFailure, lmdbFileProblem } from "./lmdb-file.ts";
import { EXPIRING_KINDS, key, rangeEnd, type ExpiringKind } from "./lmdb-keys.ts";
import { openGuard, type OpenGuard } from "./open-guard.ts";

/** How long `close` waits for lmdb to finish (LmdbStore#close). */
const CLOSE_TIMEOUT_MS = 5_000;

/** How many expired entries `revokeToken` and `useAssertionJti` remove in passing: bounded work per call. */
const PRUNE_IN_PASSING = 16;

/**
 * How many of the latest project and key-set writes the store remembers for `keysChangedSince`
 * (an entry takes some 100 bytes with its key). A reader further behind re-reads everything.
 */
export const KEYS_LOG_LENGTH = 10_000;

/**
 * What one write counted by keysChangeSeq wrote (key.keysLog); `unknown`: writes of a process
 * that keeps no log (an earlier build) were found, which may have written any project or key set.
 */
type KeysLogEntry = { projectId: string; project: boolean; keySet: boolean } | { unknown: true };

/** File name of the LMDB environment inside the data directory. */
export const LMDB_FILE = "tokenmint.mdb";

/**
 * Room on disk for lmdb's commits. When a write of its file fails, lmdb 3.5 formats the reason
 * into a buffer too small for it, which corrupts the process's memory (it may crash then or at
 * any time after), and a commit that failed never lets the data close. So each write transaction
 * first makes sure, under lmdb's write lock, that the disk has ROOM_NEEDED bytes free beyond its
 * last ROOM_SPARE (which the files beside the data need: lmdb's lock file is mapped into memory,
 * where a page the disk cannot give kills the process); where it has not, the write is
 * `unavailable` before lmdb writes anything, and the process goes on unharmed. A commit takes
 * far less than ROOM_NEEDED, so only another program filling the disk in the moment between the
 * check and the commit makes lmdb meet a full disk.
 *
 * Nothing is written to the data file but by lmdb: an earlier build kept that room as zeros
 * written beyond the data's last page, and with another process reading the data (a command
 * beside the server) commits failed (`MDB_BAD_TXN`) or were lost.
 */
export const ROOM_NEEDED = 1 << 20;
export const ROOM_SPARE = 256 << 10;

/**
 * Options every process opens the data with. lmdb's overlapping sync (its default, a commit
 * flushed after the write lock is released) loses commits another process made once a process
 * opens or reads the data beside it: each commit is flushed before the lock is released.
 */
const LMDB_OPTIONS = { encoding: "json", compression: false, overlappingSync: false } as const;

/**
 * File beside the data file where each counted commit announces its change counter, for
 * `changeSeqNow`: eight bytes, mapped shared by every process on the data. Only a hint: the
 * counter itself is in the data.
 */
export const CHANGES_FILE = "tokenmint.mdb-changes";

type MMap = (path: string, options: { shared: boolean }) => Uint8Array;

/**
 * The announcement slot in `path`, created if missing, mapped shared; undefined where the runtime
 * cannot map files (Bun can) or the file cannot be mapped: then `changeSeqNow` reads the data.
 */
function openAnnouncements(path: string): Float64Array | undefined {
  const mmap = (globalThis as { Bun?: { mmap?: MMap } }).Bun?.mmap;
  if (mmap === undefined) return undefined;
  try {
    // Written, not truncated to size: a page of a file with a hole is only found missing on a
    // full disk when the map is written, which kills the process (SIGBUS).
    const fd = openSync(path, "a", 0o600);
    try {
      const size = fstatSync(fd).size;
      if (size < 8) writeSync(fd, new Uint8Array(8 - size));
    } finally {
      closeSync(fd);
    }
    const bytes = mmap(path, { shared: true });
    return new Float64Array(bytes.buffer, bytes.byteOffset, 1);
  } catch {
    return undefined;
  }
}

/**
 * What a failed commit becomes: `unavailable`, with the reason. lmdb rejects each write of a
 * failed commit with a generic error whose `commitError`, a promise, rejects with the reason
 * (`No space left on device: ...` when the disk is full); reading it here also handles that
 * promise. A body that found the data damaged is `unavailable` too (damageFailure); anything else
 * it threw stays as it is.
 */
async function commitFailure(error: unknown, path: string): Promise<never> {
  const pending = (error as { commitError?: unknown } | undefined)?.commitError;
  if (!(pending instanceof Promise)) throw damageFailure(error, path);
  let reason: unknown;
  // lmdb rejects it in the same callback as the writes; the bound only matters should it not.
  await finishesWithin(
    pending.then(
      () => undefined,
      (cause: unknown) => void (reason = cause),
    ),
    1000,
  );
  const text = reason instanceof Error ? reason.message : "the commit failed";
  const cut = text.indexOf(": ");
  throw new StoreError("unavailable", `cannot write ${path}: ${cut === -1 ? text : text.slice(0, cut)}`);
}

/**
 * Whether `path` exists. Only a missing file or directory is false: anything else that keeps it
 * from being read (not a directory on the way, no permission) is `unavailable` with the reason,
 * never taken for "no data yet".
 */
export function dataFileExists(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false }) !== undefined;
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    const why = code === "ENOTDIR" ? "a part of the path is not a directory" : code === "EACCES" ? "permission denied" : (error as Error).message;
    throw new StoreError("unavailable", `cannot read ${path}: ${why}`);
  }
}

/** Bytes free to this process on the disk of `path`; Infinity where the system does not tell (the writes then do). */
function freeBytes(path: string): number {
  try {
    const disk = statfsSync(path);
    return disk.bavail * disk.bsize;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * Refuses to let lmdb create `path` (its data or lock file) on a disk without ROOM_SPARE bytes
 * free: lmdb maps its new lock file into memory, where a page the disk cannot give kills the
 * process (SIGBUS), and a failed write of a new data file's first pages corrupts its memory.
 */
function needSpareFor(path: string): void {
  const free = freeBytes(dirname(path));
  if (free < ROOM_SPARE) throw new StoreError("unavailable", `cannot write ${path}: no space left on device (${free} bytes free)`);
}

/**
 * Why this user could not open the data of `dataDir` for writing, or undefined: its data file,
 * LMDB's lock file (the reader table, which readers write too) or a file of the open guard exists
 * but cannot be both read and written here, as when a command run once as root left a lock file
 * of its own. lmdb, given such a lock file, crashes the process rather than failing.
 */
export function dataFilesProblem(dataDir: string): string | undefined {
  // The open guard's files too: without them a server would write unguarded (open-guard.ts).
  const files = ["", "-lock", "-open", "-open-intent"].map((suffix) => join(dataDir, `${LMDB_FILE}${suffix}`));
  for (const file of files) {
    try {
      accessSync(file, constants.R_OK | constants.W_OK);
    } catch (error) {
      const { code } = error as NodeJS.ErrnoException;
      if (code === "ENOENT") continue;
      if (code === "EACCES" || code === "EPERM") return `${file} cannot be read and written by this user (give it to the service's user)`;
      return `${file} cannot be written: ${code === "EROFS" ? "the file system is read-only" : (error as Error).message}`;
    }
  }
  return undefined;
}

/** Runs lmdb's `open` under `guard` (no commit of any process finishes meanwhile), if there is one. */
function guarded<T>(guard: OpenGuard | undefined, open: () => T): T {
  return guard === undefined ? open() : guard.opening(open);
}

/**
 * Opens (creating if needed) the LMDB store in `dataDir`. An existing data file is checked first
 * (lmdb-file.ts lmdbFileProblem): a damaged one is `unavailable`, never a crash of the process.
 */
export function openLmdbStore(dataDir: string): LmdbStore {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, LMDB_FILE);
  const access = dataFilesProblem(dataDir);
  if (access !== undefined) throw new StoreError("unavailable", access);
  if (existsSync(path) && statSync(path).size > 0) {
    const problem = lmdbFileProblem(path);
    if (problem !== undefined) throw new StoreError("unavailable", `${path} ${problem}`);
  }
  if (!existsSync(path) || !existsSync(`${path}-lock`)) needSpareFor(path);
  const guard = openGuard(path);
  const db = guarded(guard, () => open({ path, ...LMDB_OPTIONS }) as RootDatabase<unknown, string>);
  // LMDB creates its files 0644: the data (names, audiences, sealed keys) is the owner's alone,
  // even in a data directory others may list.
  for (const file of [path, `${path}-lock`]) {
    try {
      chmodSync(file, 0o600);
    } catch {
      // Not ours to change (another user's file): left as it is.
    }
  }
  return new LmdbStore(db, path, false, openAnnouncements(join(dataDir, CHANGES_FILE)), true, guard);
}

/**
 * Opens an existing LMDB data file (the one in a data directory, or a backup) without writing to
 * it: the file is never created or changed, and every write fails with `unavailable`. LMDB adds
 * `<path>-lock` beside it if missing (its reader table, so reading beside a writer stays safe),
 * mode 0600.
 * Throws `not_found` or `unavailable` when `path` is not an LMDB data file.
 */
export function openLmdbFileReadOnly(path: string): LmdbStore {
  if (!dataFileExists(path)) throw new StoreError("not_found", `${path} does not exist`);
  const problem = lmdbFileProblem(path);
  if (problem !== undefined) throw new StoreError("unavailable", `${path} ${problem}`);
  const lockFile = `${path}-lock`;
  const hadLock = existsSync(lockFile);
  if (!hadLock) needSpareFor(lockFile);
  // A data directory's data file may have a server committing beside us (open-guard.ts).
  const guard = basename(path) === LMDB_FILE ? openGuard(path, false) : undefined;
  const db = guarded(guard, () => open({ path, ...LMDB_OPTIONS, readOnly: true, noSubdir: true }) as RootDatabase<unknown, string>);
  // A lock file LMDB has just added gets the data file's mode, as openLmdbStore gives it.
  if (!hadLock) {
    try {
      chmodSync(lockFile, 0o600);
    } catch {
      // Not created after all, or not ours: left as it is.
    }
  }
  return new LmdbStore(db, path, true, undefined, false, guard);
}

/**
 * Opens a data file staged by `restore` (not yet the data directory's) for writing: no process
 * holds it, so no change is announced. Its commits keep room on disk as a server's do. Its lock
 * file, `<path>-lock`, is the caller's to remove.
 */
export function openLmdbFileForRestore(path: string): LmdbStore {
  const problem = lmdbFileProblem(path);
  if (problem !== undefined) throw new StoreError("unavailable", `${path} ${problem}`);
  needSpareFor(path);
  const db = open({ path, ...LMDB_OPTIONS, noSubdir: true }) as RootDatabase<unknown, string>;
  return new LmdbStore(db, path, false, undefined, true);
}

/**
 * An entry kept until an instant: a revoked token's jti (until the token's `exp`), or a used
 * client assertion's `<client id>:<jti>` (until the assertion's `exp` and the skew).
 */
export interface ExpiringEntry {
  projectId: string;
  id: string;
  expiresAt: number;
}

/** A custom domain's name without its port. */
const domainName = (domain: string) => domain.replace(/:\d+$/, "");

export class LmdbStore implements Store {
  readonly description: string;
  #db: RootDatabase<unknown, string>;
  #path: string;
  #readOnly: boolean;
  #closed = false;
  /** Where counted commits announce their counter (CHANGES_FILE), if it could be mapped. */
  readonly #announced: Float64Array | undefined;
  /** The announcement `changeSeqNow` last acted on, and the counter it read then from the data. */
  #lastAnnouncement = Number.NaN;
  #lastSeq = 0;
  /** Whether each write checks the room lmdb's commits need on disk (ROOM_NEEDED): not in a read-only store. */
  readonly #checksRoom: boolean;
  /**
   * Whether lmdb flushes a commit after releasing the write lock (its overlapping sync, which
   * LMDB_OPTIONS turns off; lmdb tells on the database object): then a write waits for `flushed`.
   */
  readonly #overlapsSync: boolean;
  /** Keeps the opens of other processes apart from this store's commits (open-guard.ts), where flock can be had. */
  readonly #guard: OpenGuard | undefined;
  /** The data file this store opened (its inode), for a writing store with a guard: a restore may replace it. */
  readonly #inode: number | undefined;
  /** The guard's shared hold under which the data file was last found to be the one opened (OpenGuard.hold). */
  #checkedHold: number | undefined;

  constructor(db: RootDatabase<unknown, string>, path: string, readOnly: boolean, announced?: Float64Array, checksRoom = false, guard?: OpenGuard) {
    this.#db = db;
    this.#path = path;
    this.#readOnly = readOnly;
    this.#announced = announced;
    this.#checksRoom = checksRoom;
    this.#overlapsSync = (db as { overlappingSync?: boolean }).overlappingSync === true;
    this.#guard = guard;
    this.#inode = guard === undefined || readOnly ? undefined : statSync(path).ino;
    guard?.opened();
    this.description = `lmdb ${path}${readOnly ? " (read-only)" : ""}`;
  }

  /**
   * A write transaction; a read-only store refuses it. Unless told it is `uncounted` (data no
   * process keeps in memory), it bumps the change counter in the same transaction, so such a
   * write (of any process) is seen by `changeSeq`; a body that throws aborts both. A disk without
   * the room a commit needs (`#makeRoom`) refuses it before anything is written; a commit that
   * fails all the same is `unavailable` with its reason (commitFailure), and nothing of it is kept.
   * It resolves once the commit is on disk: lmdb flushes each commit before it releases the
   * write lock (LMDB_OPTIONS), so it survives a crash of the machine as well as a kill -9.
   */
  #write<T>(body: () => T, uncounted = false): Promise<T> {
    if (this.#readOnly) return Promise.reject(new StoreError("unavailable", "the store is open read-only"));
    const guard = this.#guard;
    if (guard === undefined) return this.#commit(body, uncounted);
    // Started only while no process opens the data, and counted until its commit resolved.
    const run = () => {
      let committing: Promise<T>;
      try {
        // A restore replaces the data file while it holds the guard: a write that waited for it
        // would go into the file replaced, and be lost with it. Checked once per hold of the
        // guard's shared lock: a restore replaces the data file only while it holds the
        // exclusive one, and is refused when it cannot have it (OpenGuard.exclusively).
        const hold = guard.hold;
        if (hold === undefined || hold !== this.#checkedHold) {
          if (statSync(this.#path, { throwIfNoEntry: false })?.ino !== this.#inode) {
            throw new StoreError("unavailable", `${this.#path} was replaced since this process opened it (a restore): run the command again`);
          }
          this.#checkedHold = hold;
        }
        committing = this.#commit(body, uncounted);
      } catch (error) {
        // Never started (lmdb throws at once on a closed store): counted out all the same.
        guard.written();
        return Promise.reject(error);
      }
      const written = () => guard.written();
      committing.then(written, written);
      return committing;
    };
    const waiting = guard.beforeWrite();
    return waiting === undefined ? run() : waiting.then(run);
  }

  /** The write transaction of `#write`. */
  #commit<T>(body: () => T, uncounted: boolean): Promise<T> {
    let seq: number | undefined;
    const committed = this.#db
      .transaction(() => {
        this.#makeRoom();
        const result = body();
        if (!uncounted) {
          const before = this.#get<number>(key.changeSeq) ?? 0;
          // Counted writes since our last one were made by a process that keeps no keys log.
          if ((this.#get<number>(key.keysLogged) ?? 0) !== before) this.#countKeysChange({ unknown: true });
          this.#db.putSync(key.changeSeq, (seq = before + 1));
          this.#db.putSync(key.keysLogged, seq);
        }
        return result;
      })
      .catch((error: unknown) => commitFailure(error, this.#path));
    // Announced once committed (other processes may read it from then on, see changeSeqNow),
    // before the caller learns of it, which is once it is on disk. Without overlapping sync
    // (LMDB_OPTIONS) lmdb begins each write transaction without MDB_NOSYNC, so the commit is
    // flushed before the transaction resolves; `db.flushed` would wait for a later commit too.
    // Over an environment that overlaps its syncs, it waits for `flushed`.
    return committed.then((result) => {
      if (seq !== undefined && this.#announced !== undefined) this.#announced[0] = seq;
      return this.#overlapsSync ? this.#db.flushed.then(() => result) : result;
    });
  }

  /**
   * Throws `unavailable` when the disk has less than ROOM_NEEDED bytes free beyond its last
   * ROOM_SPARE. Runs inside the write transaction, before its body writes anything. Asked at every
   * write: one call (fallocate) can take gigabytes of a disk in milliseconds, so a reading kept
   * for even 100 ms could let a write meet a full disk.
   */
  #makeRoom(): void {
    if (!this.#checksRoom) return;
    if (freeBytes(this.#path) < ROOM_NEEDED + ROOM_SPARE) throw this.#noRoom("no space left on device");
  }

  /** The refusal of a write the disk has no room for, saying `why`. */
  #noRoom(why: string): StoreError {
    return new StoreError("unavailable", `cannot write ${this.#path}: ${why} (each write needs ${ROOM_NEEDED >> 20} MiB free beyond the data)`);
  }

  /** Reads go through `#get` and `#range`: a damaged data file is `unavailable` (damageFailure). */
  #get<T>(k: string): T | undefined {
    try {
      return this.#db.get(k) as T | undefined;
    } catch (error) {
      throw this.#readFailure(error);
    }
  }

  /** The values from `start` to before `end`, at most `limit`. */
  #range<T>(start: string, end: string, limit?: number): T[] {
    try {
      return Array.from(this.#db.getRange({ start, end, limit }), ({ value }) => value as T);
    } catch (error) {
      throw this.#readFailure(error);
    }
  }

  /**
   * A failed read as damageFailure makes it. After damage, LMDB refuses every further read of the
   * same snapshot (MDB_BAD_TXN); the next read starts a new one, so only what meets a damaged page
   * fails.
   */
  #readFailure(error: unknown): unknown {
    const failure = damageFailure(error, this.#path);
    if (failure !== error) {
      try {
        this.#db.resetReadTxn();
      } catch {
        // No snapshot to drop (a read inside a write transaction).
      }
    }
    return failure;
  }

  #page<T extends { id: string }>(prefix: string, page: PageRequest): Page<T> {
    const start = page.after === undefined ? prefix : `${prefix}${page.after}\u0000`;
    const items = this.#range<T>(start, rangeEnd(prefix), page.limit + 1);
    const more = items.length > page.limit;
    if (more) items.length = page.limit;
    return { items, last: more ? items[items.length - 1]?.id : undefined };
  }

  /** Runs `update` on the record at `k` inside a write transaction. */
  async #update<T>(k: string, what: string, update: Updater<T>): Promise<T> {
    return this.#write(() => {
      const current = this.#get<T>(k);
      if (current === undefined) throw new StoreError("not_found", `${what} not found`);
      const next = update(current);
      if (next === undefined) return current;
      this.#db.putSync(k, next);
      return next;
    });
  }

  async #create(k: string, what: string, record: unknown): Promise<void> {
    await this.#write(() => {
      if (this.#get(k) !== undefined) throw new StoreError("already_exists", `${what} already exists`);
      this.#db.putSync(k, record);
    });
  }

  async getMeta<T>(name: string): Promise<T | undefined> {
    return this.#get<T>(key.meta(name));
  }

  async changeSeq(): Promise<number> {
    return this.#get<number>(key.changeSeq) ?? 0;
  }

  async keysChangeSeq(): Promise<number> {
    return this.#get<number>(key.keysChangeSeq) ?? 0;
  }

  /**
   * Inside a write transaction: counts a write of a project or a key set (keysChangeSeq) and logs
   * what it wrote, forgetting the entry KEYS_LOG_LENGTH writes older.
   */
  #countKeysChange(entry: KeysLogEntry): void {
    const seq = (this.#get<number>(key.keysChangeSeq) ?? 0) + 1;
    this.#db.putSync(key.keysChangeSeq, seq);
    this.#db.putSync(key.keysLog(seq), entry);
    if (seq > KEYS_LOG_LENGTH) this.#db.removeSync(key.keysLog(seq - KEYS_LOG_LENGTH));
  }

  async keysChangedSince(since: number): Promise<KeysChanges | undefined> {
    // Every read is synchronous: they share one snapshot.
    const seq = this.#get<number>(key.keysChangeSeq) ?? 0;
    if (!Number.isSafeInteger(since) || since > seq || seq - since > KEYS_LOG_LENGTH) return undefined;
    // The last counted write was made by a process that keeps no log.
    if ((this.#get<number>(key.keysLogged) ?? 0) !== (this.#get<number>(key.changeSeq) ?? 0)) return undefined;
    const entries = this.#range<KeysLogEntry>(key.keysLog(since + 1), key.keysLog(seq + 1));
    // A write counted without an entry (a process of the build before the log made it), or found
    // unlogged writes before it: the log cannot tell.
    if (entries.length !== seq - since) return undefined;
    const projects = new Set<string>();
    const keySets = new Set<string>();
    for (const entry of entries) {
      if ("unknown" in entry) return undefined;
      if (entry.project) projects.add(entry.projectId);
      if (entry.keySet) keySets.add(entry.projectId);
    }
    return { seq, projects: [...projects], keySets: [...keySets] };
  }

  /**
   * The counter as of the latest commit of any process. Every counted commit announces its
   * counter in CHANGES_FILE, mapped shared, before its writer learns that it committed; so while
   * the announcement is the one this last acted on, nothing was committed since that any caller
   * can know of, and the answer is the counter read then (a read of eight shared bytes). When it
   * differs, this reads the data: reads within one event-loop turn share a snapshot, which may
   * predate a commit made meanwhile by another process, so it starts a new one first, and every
   * read after it sees at least what was committed before it. Each commit announces once, so a
   * late announcement can only cause an extra read, never hide a commit. A writer that dies
   * between its commit and its announcement was never answered; the next announcement, or the
   * poll of the cache and the key service, takes its commit in. Without the mapping, every call
   * reads the data.
   */
  changeSeqNow(): number {
    const announced = this.#announced;
    if (announced !== undefined) {
      const announcement = announced[0] as number;
      if (announcement === this.#lastAnnouncement) return this.#lastSeq;
      this.#db.resetReadTxn();
      this.#lastSeq = this.#get<number>(key.changeSeq) ?? 0;
      this.#lastAnnouncement = announcement;
      return this.#lastSeq;
    }
    this.#db.resetReadTxn();
    return this.#get<number>(key.changeSeq) ?? 0;
  }

  async initMeta<T>(name: string, value: T): Promise<T> {
    // Set already (every start after the first): no write transaction needed.
    const stored = this.#get<T>(key.meta(name));
    if (stored !== undefined) return stored;
    return this.#write(() => {
      const existing = this.#get<T>(key.meta(name));
      if (existing !== undefined) return existing;
      this.#db.putSync(key.meta(name), value);
      return value;
    });
  }

  async setMeta<T>(name: string, value: T): Promise<void> {
    await this.#write(() => this.#db.putSync(key.meta(name), value));
  }

  async createProject(project: ProjectRecord, keySet?: KeySetRecord): Promise<void> {
    if (keySet !== undefined && (keySet.projectId !== project.id || keySet.version !== 1)) throw new Error("a new project's key set must be its own, of version 1");
    await this.#write(() => {
      if (this.#get(key.project(project.id)) !== undefined) throw new StoreError("already_exists", "project already exists");
      this.#claimProjectNames(project, undefined, "already_exists");
      this.#db.putSync(key.project(project.id), project);
      if (keySet !== undefined) this.#db.putSync(key.keySet(project.id), keySet);
      this.#countKeysChange({ projectId: project.id, project: true, keySet: keySet !== undefined });
    });
  }

  /**
   * Inside a write transaction: points the slug and custom-domain indexes at `next`, releasing the
   * names `previous` held. A name held by another project throws `clash`.
   */
  #claimProjectNames(next: ProjectRecord, previous: ProjectRecord | undefined, clash: "already_exists" | "conflict"): void {
    const names: [(value: string) => string, string | undefined, string | undefined, string][] = [
      [key.projectSlug, next.slug, previous?.slug, "slug"],
      [key.projectDomain, next.customDomain, previous?.customDomain, "custom domain"],
    ];
    for (const [indexKey, wanted, held, what] of names) {
      if (wanted === held) continue;
      if (wanted !== undefined) {
        const owner = this.#get<string>(indexKey(wanted));
        if (owner !== undefined && owner !== next.id) throw new StoreError(clash, `the ${what} '${wanted}' belongs to another project`);
      }
    }
    // A domain is one project's on every port: its name on another port is taken too.
    if (next.customDomain !== undefined && next.customDomain !== previous?.customDomain) {
      const name = domainName(next.customDomain);
      const prefix = key.projectDomain(name);
      for (const { key: k, value: owner } of this.#db.getRange({ start: prefix, end: rangeEnd(prefix) })) {
        const domain = (k as string).slice(key.projectDomain("").length);
        if (owner !== next.id && domainName(domain) === name) {
          throw new StoreError(clash, `the custom domain '${next.customDomain}' belongs to another project, as '${domain}'`);
        }
      }
    }
    for (const [indexKey, wanted, held] of names) {
      if (wanted === held) continue;
      if (held !== undefined) this.#db.removeSync(indexKey(held));
      if (wanted !== undefined) this.#db.putSync(indexKey(wanted), next.id);
    }
  }

  async updateProject(id: string, update: Updater<ProjectRecord>): Promise<ProjectRecord> {
    return this.#write(() => {
      const current = this.#get<ProjectRecord>(key.project(id));
      if (current === undefined) throw new StoreError("not_found", "project not found");
      const next = update(current);
      if (next === undefined) return current;
      this.#claimProjectNames(next, current, "conflict");
      this.#db.putSync(key.project(id), next);
      this.#countKeysChange({ projectId: id, project: true, keySet: false });
      return next;
    });
  }

  async getProject(id: string): Promise<ProjectRecord | undefined> {
    return this.#get(key.project(id));
  }

  async listProjects(): Promise<ProjectRecord[]> {
    const prefix = "project:";
    return this.#range<ProjectRecord>(prefix, rangeEnd(prefix));
  }

  createProvider(provider: ProviderRecord): Promise<void> {
    return this.#create(key.provider(provider.projectId, provider.id), "provider", provider);
  }

  async getProvider(projectId: string, id: string): Promise<ProviderRecord | undefined> {
    return this.#get(key.provider(projectId, id));
  }

  async listProviders(projectId: string, page: PageRequest): Promise<Page<ProviderRecord>> {
    return this.#page(key.providersOf(projectId), page);
  }

  updateProvider(projectId: string, id: string, update: Updater<ProviderRecord>): Promise<ProviderRecord> {
    return this.#update(key.provider(projectId, id), "provider", update);
  }

  async deleteProvider(projectId: string, id: string): Promise<void> {
    await this.#write(() => {
      const k = key.provider(projectId, id);
      if (this.#get(k) === undefined) throw new StoreError("not_found", "provider not found");
      const clients = key.clientsOf(projectId, id);
      for (const _ of this.#db.getKeys({ start: clients, end: rangeEnd(clients), limit: 1 })) {
        throw new StoreError("conflict", "provider still has clients");
      }
      this.#db.removeSync(k);
    });
  }

  async createClient(client: ClientRecord): Promise<void> {
    await this.#write(() => {
      if (this.#get(key.provider(client.projectId, client.providerId)) === undefined) throw new StoreError("not_found", "provider not found");
      const index = key.clientIndex(client.projectId, client.id);
      if (this.#get(index) !== undefined) throw new StoreError("already_exists", "client already exists");
      this.#db.putSync(key.client(client.projectId, client.providerId, client.id), client);
      this.#db.putSync(index, client.providerId);
    });
  }

  async getClient(projectId: string, providerId: string, id: string): Promise<ClientRecord | undefined> {
    return this.#get(key.client(projectId, providerId, id));
  }

  async getClientById(projectId: string, id: string): Promise<ClientRecord | undefined> {
    const providerId = this.#get<string>(key.clientIndex(projectId, id));
    return providerId === undefined ? undefined : this.#get(key.client(projectId, providerId, id));
  }

  async listClients(projectId: string, providerId: string, page: PageRequest): Promise<Page<ClientRecord>> {
    return this.#page(key.clientsOf(projectId, providerId), page);
  }

  updateClient(projectId: string, providerId: string, id: string, update: Updater<ClientRecord>): Promise<ClientRecord> {
    return this.#update(key.client(projectId, providerId, id), "client", update);
  }

  async deleteClient(projectId: string, providerId: string, id: string): Promise<void> {
    await this.#write(() => {
      const k = key.client(projectId, providerId, id);
      if (this.#get(k) === undefined) throw new StoreError("not_found", "client not found");
      this.#db.removeSync(k);
      this.#db.removeSync(key.clientIndex(projectId, id));
      const secrets = key.secretsOf(projectId, id);
      for (const secret of [...this.#db.getKeys({ start: secrets, end: rangeEnd(secrets) })]) this.#db.removeSync(secret);
      this.#db.removeSync(key.clientJwks(projectId, id));
      // The assertion ids it used: nothing of a deleted client's use is kept.
      const ids = key.expiring("jti", projectId, "");
      const used = `${ids}${id}:`;
      for (const { key: k, value } of [...this.#db.getRange({ start: used, end: rangeEnd(used) })]) {
        this.#db.removeSync(k);
        this.#db.removeSync(key.expiryIndex("jti", projectId, value as number, (k as string).slice(ids.length)));
      }
    });
  }

  async putClientJwks(jwks: ClientJwksRecord): Promise<void> {
    await this.#write(() => {
      if (this.#get(key.clientIndex(jwks.projectId, jwks.clientId)) === undefined) throw new StoreError("not_found", "client not found");
      this.#db.putSync(key.clientJwks(jwks.projectId, jwks.clientId), jwks);
    });
  }

  async getClientJwks(projectId: string, clientId: string): Promise<ClientJwksRecord | undefined> {
    return this.#get(key.clientJwks(projectId, clientId));
  }

  async deleteClientJwks(projectId: string, clientId: string): Promise<void> {
    await this.#write(() => {
      const k = key.clientJwks(projectId, clientId);
      if (this.#get(k) === undefined) throw new StoreError("not_found", "client public keys not found");
      this.#db.removeSync(k);
    });
  }

  async useAssertionJti(projectId: string, clientId: string, jti: string, expiresAt: number, now: number): Promise<boolean> {
    return this.#write(() => {
      this.#pruneKind("jti", projectId, now, PRUNE_IN_PASSING);
      const id = `${clientId}:${jti}`;
      if (this.#liveUntil("jti", projectId, id, now) !== undefined) return false;
      this.#putExpiring("jti", projectId, id, expiresAt);
      return true;
    }, true);
  }

  async createClientSecret(secret: ClientSecretRecord, maxSecrets: number): Promise<void> {
    await this.#write(() => {
      if (this.#get(key.clientIndex(secret.projectId, secret.clientId)) === undefined) throw new StoreError("not_found", "client not found");
      const prefix = key.secretsOf(secret.projectId, secret.clientId);
      if (this.#db.getKeysCount({ start: prefix, end: rangeEnd(prefix) }) >= maxSecrets) {
        throw new StoreError("conflict", `the client already holds ${maxSecrets} secrets`);
      }
      const k = key.secret(secret.projectId, secret.clientId, secret.id);
      if (this.#get(k) !== undefined) throw new StoreError("already_exists", "client secret already exists");
      this.#db.putSync(k, secret);
    });
  }

  async listClientSecrets(projectId: string, clientId: string): Promise<ClientSecretRecord[]> {
    const prefix = key.secretsOf(projectId, clientId);
    return this.#range<ClientSecretRecord>(prefix, rangeEnd(prefix));
  }

  async deleteClientSecret(projectId: string, clientId: string, id: string): Promise<void> {
    await this.#write(() => {
      const k = key.secret(projectId, clientId, id);
      if (this.#get(k) === undefined) throw new StoreError("not_found", "client secret not found");
      this.#db.removeSync(k);
    });
  }

  async createApiKey(apiKey: ApiKeyRecord): Promise<void> {
    await this.#write(() => {
      if (this.#get(key.apiKeyHash(apiKey.hash)) !== undefined) throw new StoreError("already_exists", "API key already exists");
      if (this.#get(key.apiKey(apiKey.projectId, apiKey.id)) !== undefined) {
        throw new StoreError("already_exists", "API key already exists");
      }
      this.#db.putSync(key.apiKey(apiKey.projectId, apiKey.id), apiKey);
      this.#db.putSync(key.apiKeyHash(apiKey.hash), [apiKey.projectId, apiKey.id]);
    });
  }

  async getApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const ref = this.#get<[string, string]>(key.apiKeyHash(hash));
    return ref === undefined ? undefined : this.#get(key.apiKey(ref[0], ref[1]));
  }

  async listApiKeys(projectId: string): Promise<ApiKeyRecord[]> {
    const prefix = key.apiKeysOf(projectId);
    return this.#range<ApiKeyRecord>(prefix, rangeEnd(prefix));
  }

  updateApiKey(projectId: string, id: string, update: Updater<ApiKeyRecord>): Promise<ApiKeyRecord> {
    return this.#update(key.apiKey(projectId, id), "API key", update);
  }

  async revokeToken(projectId: string, jti: string, expiresAt: number, now: number): Promise<void> {
    await this.#write(() => {
      this.#putExpiring("revoked", projectId, jti, expiresAt);
      this.#pruneKind("revoked", projectId, now, PRUNE_IN_PASSING);
    }, true);
  }

  /** Every entry of `kind`, of every project, still in force at `now` (for `restore`). */
  expiringEntries(kind: ExpiringKind, now: number): ExpiringEntry[] {
    const prefix = key.expiringOf(kind);
    const entries: ExpiringEntry[] = [];
    for (const { key: k, value } of this.#db.getRange({ start: prefix, end: rangeEnd(prefix) })) {
      const expiresAt = value as number;
      if (expiresAt <= now) continue;
      // `<kind>:<project id>:<id>`: a project id is a UUID, the id may hold anything.
      const rest = (k as string).slice(prefix.length);
      const colon = rest.indexOf(":");
      entries.push({ projectId: rest.slice(0, colon), id: rest.slice(colon + 1), expiresAt });
    }
    return entries;
  }

  /**
   * Records `entries` of `kind` (read from other data) in one transaction, each until its expiry
   * or a later one already recorded; returns how many were not in force before.
   */
  async keepExpiring(kind: ExpiringKind, entries: readonly ExpiringEntry[], now: number): Promise<number> {
    if (entries.length === 0) return 0;
    return this.#write(() => {
      let added = 0;
      for (const { projectId, id, expiresAt } of entries) {
        if (this.#liveUntil(kind, projectId, id, now) === undefined) added++;
        this.#putExpiring(kind, projectId, id, expiresAt);
      }
      return added;
    }, true);
  }

  async isTokenRevoked(projectId: string, jti: string, now: number): Promise<boolean> {
    // A revocation moves no change counter (no cache depends on it), so changeSeqNow does not
    // renew this turn's snapshot for it: read from a new one, which holds every revocation
    // answered before this call, by any process.
    this.#db.resetReadTxn();
    return this.#liveUntil("revoked", projectId, jti, now) !== undefined;
  }

  async pruneExpired(now: number, limit: number): Promise<number> {
    return this.#write(() => {
      let removed = 0;
      for (const { value } of this.#db.getRange({ start: "project:", end: rangeEnd("project:") })) {
        for (const kind of EXPIRING_KINDS) {
          if (removed >= limit) return removed;
          removed += this.#pruneKind(kind, (value as ProjectRecord).id, now, limit - removed);
        }
      }
      return removed;
    }, true);
  }

  /** The expiry of an entry that has not expired at `now`, else undefined (pruned or not). */
  #liveUntil(kind: ExpiringKind, projectId: string, id: string, now: number): number | undefined {
    const expiresAt = this.#get<number>(key.expiring(kind, projectId, id));
    return expiresAt !== undefined && expiresAt > now ? expiresAt : undefined;
  }

  /** Inside a write transaction: records `id` until `expiresAt`, or keeps the later expiry already recorded. */
  #putExpiring(kind: ExpiringKind, projectId: string, id: string, expiresAt: number): void {
    const k = key.expiring(kind, projectId, id);
    const current = this.#get<number>(k);
    if (current !== undefined && current >= expiresAt) return;
    if (current !== undefined) this.#db.removeSync(key.expiryIndex(kind, projectId, current, id));
    this.#db.putSync(k, expiresAt);
    this.#db.putSync(key.expiryIndex(kind, projectId, expiresAt, id), id);
  }

  /** Inside a write transaction: removes up to `limit` entries of the project expired at `now`; returns how many. */
  #pruneKind(kind: ExpiringKind, projectId: string, now: number, limit: number): number {
    const range = { start: key.expiryIndexOf(kind, projectId), end: key.expiredBy(kind, projectId, now), limit };
    const expired = [...this.#db.getRange(range)];
    for (const { key: k, value } of expired) {
      this.#db.removeSync(k);
      this.#db.removeSync(key.expiring(kind, projectId, value as string));
    }
    return expired.length;
  }

  async getKeySet(projectId: string): Promise<KeySetRecord | undefined> {
    return this.#get(key.keySet(projectId));
  }

  async swapKeySet(next: KeySetRecord, expectedVersion: number): Promise<boolean> {
    return this.#write(() => {
      const current = this.#get<KeySetRecord>(key.keySet(next.projectId));
      if ((current?.version ?? 0) !== expectedVersion) return false;
      this.#db.putSync(key.keySet(next.projectId), next);
      this.#countKeysChange({ projectId: next.projectId, project: false, keySet: true });
      return true;
    });
  }

  /**
   * Writes a compacted copy of the whole environment to `path` (mode 0600). It is read in one
   * snapshot, so it is consistent while other processes write. The copy is made under a temporary
   * name beside `path`, flushed, then linked into place: `path` never holds a partial copy, and an
   * existing `path` is `already_exists` and never overwritten. Partial copies of `path` left by
   * killed backups are removed (backupEnvironment).
   */
  backup(path: string): Promise<void> {
    return backupEnvironment(this.#db, path, this.#path);
  }

  /**
   * Closes the environment; closing twice is harmless. lmdb's close waits for the last commit to
   * be flushed, and after a commit that failed while the disk stays full it waits for good: after
   * CLOSE_TIMEOUT_MS this gives up with `unavailable`, so a stopping process still ends. Nothing
   * answered is lost by it: every write a caller was told of is on disk, and a failed commit left
   * nothing behind.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (!(await finishesWithin(this.#db.close(), CLOSE_TIMEOUT_MS))) {
        throw new StoreError("unavailable", `${this.#path} did not close within ${CLOSE_TIMEOUT_MS / 1000} s: lmdb still waits for a write it could not make (the disk is full or failing)`);
      }
    } finally {
      this.#guard?.closed();
    }
  }
}
