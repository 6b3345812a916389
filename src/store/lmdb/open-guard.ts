/**
 * @module store/lmdb/open-guard
 * Keeps every process's opening of the data apart from every process's commits.
 *
 * lmdb 3.5 (its mdb.c, mdb_env_open2) ends an open by storing the transaction id of the meta page
 * it read at the start of the open into the lock file's shared `mti_txnid`, the id every next
 * transaction starts from, whether or not it is the first process on the data. When another
 * process commits between the two, the stored id is that of the commit before: the next commit,
 * of any process, starts from the older meta page and overwrites the newer one, and the commit it
 * replaced is lost, though it was acknowledged. (Upstream LMDB describes such a race of an opener
 * and a committer as ITS#9496; lmdb-js 3.5.6 stores the id on every open.) Seen here as a batch of
 * four acknowledged writes missing in about one run in four of a test that writes beside
 * processes opening the data (commands beside a server).
 *
 * So a process opens the data only while no commit can finish: beside the data file, in
 * `<data file>-open`, every write transaction holds a shared lock (flock) from before lmdb starts
 * it until its commit resolves, and an open holds an exclusive lock. An opener first takes
 * `<data file>-open-intent` exclusively: while it is held, writes wait to start (from the next
 * turn of the writer's event loop on), so writes under load cannot keep the shared lock forever.
 * `restore` holds both the same way from reading the data it replaces to the rename
 * (`exclusively`); a store then finds its data file replaced before it writes (lmdb-store.ts).
 * The locks go with the process that held them, however it ends. Where flock cannot be had (no
 * `bun:ffi`, no libc, files that cannot be created), the data is opened and written unguarded, as
 * before. An open waits at most OPEN_WAIT_MS for the writes under way and then goes ahead; a
 * restore is refused instead (`exclusively`); a write waits as long as an opener holds the locks.
 */
import { closeSync, openSync } from "node:fs";
import { sleepSync } from "../../runtime/sleep-sync.ts";
import { StoreError } from "../store.ts";

const LOCK_SH = 1;
const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;

/** How long an open waits for commits under way to finish before it goes ahead unguarded. */
export const OPEN_WAIT_MS = 10_000;
/**
 * How often a waiting write looks again whether the opener is done. A write waits as long as an
 * opener holds the locks: one that went ahead while a command was stopped inside lmdb's open
 * (Ctrl-Z at that moment) made the server's later writes fail (MDB_BAD_TXN) until a restart.
 */
const WRITE_POLL_MS = 1;

type Flock = (fd: number, operation: number) => number;

let flockFn: Flock | null | undefined;

/** libc's flock through bun:ffi, once per process; null where it cannot be had. */
function flock(): Flock | null {
  if (flockFn !== undefined) return flockFn;
  flockFn = null;
  try {
    const bun = (globalThis as { Bun?: unknown }).Bun;
    if (bun === undefined) return flockFn;
    const ffi = import.meta.require("bun:ffi") as typeof import("bun:ffi");
    const libc = ffi.dlopen("libc.so.6", { flock: { args: [ffi.FFIType.i32, ffi.FFIType.i32], returns: ffi.FFIType.i32 } });
    flockFn = (fd, operation) => libc.symbols.flock(fd, operation) as number;
  } catch {
    // No FFI here (MemoryDenyWriteExecute, another runtime) or no libc.so.6: unguarded.
  }
  return flockFn;
}

/** The lock files of one data file, held by this process for as long as it has the data open. */
export class OpenGuard {
  readonly #flock: Flock;
  readonly #fd: number;
  readonly #intentFd: number;
  /** Write transactions of this process between their start and the resolution of their commit. */
  #writing = 0;
  /** Stores of this process on the data file: a second one shares lmdb's environment, and opens nothing. */
  #users = 0;
  /** A hold of `exclusively` under way in this process: it holds the locks already. */
  #exclusive = 0;
  /** Writes of this process waiting for an opener: the lock files stay open for them. */
  #waiting = 0;
  /** The lock files are closed: the stores of this process on the data are. */
  #disposed = false;
  /** How often this process took the shared lock afresh: a store checks its data file once per hold (`hold`). */
  #holds = 0;
  /**
   * No opener had announced itself at this turn of the event loop's first write: the writes of
   * the same turn start without asking again (lmdb commits them together). The next turn asks.
   */
  #noIntentThisTurn = false;
  readonly #dataFile: string;
  /** How long an open waits for the writes under way before it goes ahead unguarded. */
  readonly #openWaitMs: number;

  constructor(flockFn: Flock, fd: number, intentFd: number, dataFile: string, openWaitMs: number) {
    this.#flock = flockFn;
    this.#fd = fd;
    this.#intentFd = intentFd;
    this.#dataFile = dataFile;
    this.#openWaitMs = openWaitMs;
  }

  /** A store of this process opened the data with this guard. */
  opened(): void {
    this.#users++;
  }

  /** A store of this process closed the data: the last one lets go of the lock files. */
  closed(): void {
    this.#users--;
    this.#disposeIfUnused();
  }

  /** Closes the lock files (which lets go of their locks) once nothing of this process uses them. */
  #disposeIfUnused(): void {
    if (this.#disposed || this.#users > 0 || this.#exclusive > 0 || this.#writing > 0 || this.#waiting > 0) return;
    this.#disposed = true;
    if (guards.get(this.#dataFile) === this) guards.delete(this.#dataFile);
    closeSync(this.#fd);
    closeSync(this.#intentFd);
  }

  /**
   * Runs `open` while no commit of any process can finish. Waits for those under way (at most
   * OPEN_WAIT_MS, then opens unguarded); writes of this process cannot be under way here, since
   * it blocks the thread they resolve on (a second store of the process needs no guard).
   */
  opening<T>(open: () => T): T {
    if (this.#users > 0 || this.#writing > 0 || this.#exclusive > 0) return open();
    const taken = this.#take();
    try {
      return open();
    } finally {
      taken.release();
    }
  }

  /**
   * Runs `hold` while no other process opens the data or finishes a commit (a restore, from
   * reading the data it replaces to the rename). Waits at most OPEN_WAIT_MS for the writes under
   * way, then throws `unavailable` without running it: a data file replaced beside a write under
   * way would lose that write, and the writes its process makes while it keeps the shared lock
   * (a store checks for a replaced data file once per hold, lmdb-store.ts).
   */
  async exclusively<T>(hold: () => Promise<T>): Promise<T> {
    const taken = this.#take();
    if (!taken.held) {
      taken.release();
      throw new StoreError(
        "unavailable",
        `another process has been writing or opening ${this.#dataFile} for over ${this.#openWaitMs / 1000} s: let it finish (or stop it), then run the command again (nothing was changed)`,
      );
    }
    this.#exclusive++;
    try {
      return await hold();
    } finally {
      this.#exclusive--;
      taken.release();
      this.#disposeIfUnused();
    }
  }

  /**
   * Takes the intent lock, then the exclusive one (each for at most OPEN_WAIT_MS): whether both
   * were had, and the release of those that were.
   */
  #take(): { held: boolean; release: () => void } {
    const deadline = Date.now() + this.#openWaitMs;
    const take = (fd: number) => {
      while (this.#flock(fd, LOCK_EX | LOCK_NB) !== 0) {
        if (Date.now() >= deadline) return false;
        sleepSync(1);
      }
      return true;
    };
    const intent = take(this.#intentFd);
    const exclusive = intent && take(this.#fd);
    const release = () => {
      if (exclusive) this.#flock(this.#fd, LOCK_UN);
      if (intent) this.#flock(this.#intentFd, LOCK_UN);
    };
    return { held: exclusive, release };
  }

  /**
   * Resolves once a write transaction may start: no opener is waiting or opening. Holds the
   * shared lock until `written` is called, once the commit resolved.
   */
  beforeWrite(): Promise<void> | undefined {
    if (this.#tryStart()) return undefined;
    this.#waiting++;
    return new Promise<void>((resolve) => {
      const retry = () => {
        if (!this.#tryStart()) return void setTimeout(retry, WRITE_POLL_MS);
        this.#waiting--;
        resolve();
      };
      setTimeout(retry, WRITE_POLL_MS);
    });
  }

  /** A write transaction's commit resolved (committed or failed), or it never started. */
  written(): void {
    this.#writing--;
    if (this.#writing > 0 || this.#exclusive > 0 || this.#disposed) return;
    this.#flock(this.#fd, LOCK_UN);
    // The last write of a store closed meanwhile.
    this.#disposeIfUnused();
  }

  /**
   * The number of the shared hold under way: unchanged from one write to the next, the lock was
   * held all along, so no process replaced the data file in between (a restore holds the lock
   * exclusively to do so). Undefined while this process holds it exclusively or its stores are
   * closed: every write checks then.
   */
  get hold(): number | undefined {
    return this.#exclusive > 0 || this.#disposed ? undefined : this.#holds;
  }

  /** Counts a write in and takes the shared lock for it, unless an opener waits or holds it: then false. */
  #tryStart(): boolean {
    // This process holds the data exclusively (its own writes go on: the lock is for others), or
    // its stores are closed (the write fails in lmdb).
    if (this.#exclusive > 0 || this.#disposed) {
      this.#writing++;
      return true;
    }
    // An opener announces itself with the intent lock: no new write starts until it is done. The
    // writes of one turn are finite, so asking once a turn keeps an opener from waiting forever.
    if (!this.#noIntentThisTurn) {
      if (this.#flock(this.#intentFd, LOCK_SH | LOCK_NB) !== 0) return false;
      this.#flock(this.#intentFd, LOCK_UN);
      this.#noIntentThisTurn = true;
      setImmediate(() => {
        this.#noIntentThisTurn = false;
      });
    }
    if (this.#writing === 0) {
      if (this.#flock(this.#fd, LOCK_SH | LOCK_NB) !== 0) return false;
      this.#holds++;
    }
    this.#writing++;
    return true;
  }
}

const guards = new Map<string, OpenGuard>();

/**
 * The guard of `dataFile` for this process (its lock files created 0600 if missing, unless
 * `create` is false: a read-only open, `check` run as root, must not leave files the service's
 * user cannot open), or undefined where flock or the files cannot be had: then the data is opened
 * and written unguarded.
 */
export function openGuard(dataFile: string, create = true, openWaitMs = OPEN_WAIT_MS): OpenGuard | undefined {
  const known = guards.get(dataFile);
  if (known !== undefined) return known;
  const flockFn = flock();
  if (flockFn === null) return undefined;
  // Opened for reading only where they must not be created: flock needs no write access.
  const flags = create ? "a" : "r";
  let fd: number | undefined;
  try {
    fd = openSync(`${dataFile}-open`, flags, 0o600);
    const intentFd = openSync(`${dataFile}-open-intent`, flags, 0o600);
    const guard = new OpenGuard(flockFn, fd, intentFd, dataFile, openWaitMs);
    guards.set(dataFile, guard);
    return guard;
  } catch {
    if (fd !== undefined) closeSync(fd);
    return undefined;
  }
}
