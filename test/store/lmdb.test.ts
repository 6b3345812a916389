import { describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { open } from "lmdb";
import { CHANGES_FILE, KEYS_LOG_LENGTH, LMDB_FILE, LmdbStore, ROOM_NEEDED, openLmdbFileForRestore, openLmdbFileReadOnly, openLmdbStore } from "../../src/store/lmdb/lmdb-store.ts";
import type { RootDatabase } from "lmdb";
import { backupEnvironment } from "../../src/store/lmdb/lmdb-file.ts";
import { key } from "../../src/store/lmdb/lmdb-keys.ts";
import { deadPid, tempDir, withTempDir } from "../helpers/app.ts";
import { runChangeSeqNowFreshness, runRevocationFreshness } from "./contract-changes.ts";
import { runStoreContract } from "./contract.ts";
import { T0, apiKeyRecord, clientRecord, keySetRecord, newProjectId, providerRecord, providerWithTwoClients, storeErrorKind } from "./fixtures.ts";

/**
 * Ends the current event-loop turn. lmdb-js reads through a snapshot that it keeps until the next
 * macrotask (or until the same instance commits), so a second instance in this process sees a
 * write made by the first only from its next turn on. A process beside us (the CLI) gets the same
 * guarantee: its committed writes are visible to our next turn.
 */
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

runStoreContract("lmdb", async () => {
  const dir = tempDir("tokenmint-store-");
  const store = openLmdbStore(dir.path);
  return {
    store,
    cleanup: async () => {
      await store.close();
      dir.remove();
    },
    // Another instance on the same file: what another process (the CLI) sees.
    other: { open: async () => openLmdbStore(dir.path), settle: nextTurn },
  };
});

runChangeSeqNowFreshness(openLmdbStore, newProjectId(T0));
runRevocationFreshness(openLmdbStore, newProjectId(T0));

/** Runs `body` with a temp data directory that is removed afterwards. */
const withDir = (body: (path: string) => Promise<void>) => withTempDir("tokenmint-store-", body);

const A = newProjectId(T0);


describe("lmdb store: a write resolves once it is on disk", () => {
  /** `db` with its `flushed` held back until `gate` resolves. */
  const holdingFlushed = (db: RootDatabase<unknown, string>, gate: Promise<void>) =>
    new Proxy(db, {
      get(target, name) {
        if (name === "flushed") return gate.then(() => target.flushed);
        const value = Reflect.get(target, name, target) as unknown;
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });

  /**
   * lmdb's default (its overlappingSync) commits without a sync and flushes after: a commit is
   * visible at once, on disk only at `flushed`. The store over such an environment, whose
   * `flushed` the test holds back, must not resolve a write, counted or not, before it is let go.
   */
  test("over an environment that overlaps its syncs, a committed write is not answered before lmdb's flush of it", () =>
    withDir(async (path) => {
      const real = open({ path: join(path, LMDB_FILE), encoding: "json", compression: false }) as RootDatabase<unknown, string>;
      let release = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const store = new LmdbStore(holdingFlushed(real, gate), join(path, LMDB_FILE), false);
      const provider = providerRecord(A, T0);
      const settled: string[] = [];
      const counted = store.createProvider(provider).then(() => settled.push("provider"));
      const uncounted = store.useAssertionJti(A, "client", "jti-1", T0 + 60_000, T0).then(() => settled.push("jti"));
      // Committed: readable, but not yet answered.
      for (let i = 0; i < 200 && (await store.getProvider(A, provider.id)) === undefined; i++) await Bun.sleep(5);
      expect(await store.getProvider(A, provider.id)).toEqual(provider);
      await Bun.sleep(50);
      expect(settled).toEqual([]);
      release();
      await Promise.all([counted, uncounted]);
      expect(settled.sort()).toEqual(["jti", "provider"]);
      await store.close();
    }));

  /**
   * Every open of the data turns the overlapping off: each commit is flushed before lmdb releases
   * the write lock. lmdb keeps one environment per file in a process, and a later open of the
   * same file, asking for lmdb's default, learns from it whether it overlaps.
   */
  test("the server's, the commands' and a restore's opens of the data flush each commit before it resolves", () =>
    withDir(async (path) => {
      const overlaps = (file: string) => (open({ path: file, encoding: "json", compression: false }) as unknown as { overlappingSync: boolean }).overlappingSync;
      const store = openLmdbStore(path);
      expect(overlaps(join(path, LMDB_FILE))).toBe(false);
      await store.close();
      const copy = join(path, "restore.mdb");
      copyFileSync(join(path, LMDB_FILE), copy);
      const staged = openLmdbFileForRestore(copy);
      expect(overlaps(copy)).toBe(false);
      await staged.close();
      // The probe itself tells: a file first opened with lmdb's default does overlap.
      expect(overlaps(join(path, "plain.mdb"))).toBe(true);
    }));

  /**
   * Without the overlap, lmdb's `flushed` adds nothing to a resolved commit but the commit
   * queued after it: a write is answered at its own commit, with `flushed` held back for good.
   */
  test("over the store's environment, a write is answered at its own commit, not at a later one's flush", () =>
    withDir(async (path) => {
      const real = open({ path: join(path, LMDB_FILE), encoding: "json", compression: false, overlappingSync: false }) as RootDatabase<unknown, string>;
      const store = new LmdbStore(holdingFlushed(real, new Promise<void>(() => {})), join(path, LMDB_FILE), false);
      const provider = providerRecord(A, T0);
      await store.createProvider(provider);
      expect(await store.useAssertionJti(A, "client", "jti-1", T0 + 60_000, T0)).toBe(true);
      expect(await store.getProvider(A, provider.id)).toEqual(provider);
      await store.close();
    }));
});

describe("lmdb store: changeSeqNow and the announcements of commits", () => {
  /** A second writer on the same data whose commits are not announced: one that died between its commit and its announcement. */
  const silentWriter = (path: string) =>
    new LmdbStore(open({ path: join(path, LMDB_FILE), encoding: "json", compression: false }) as RootDatabase<unknown, string>, join(path, LMDB_FILE), false);

  test("while no commit is announced, changeSeqNow answers from the announcement and reads no data; the next announcement brings every commit in", () =>
    withDir(async (path) => {
      const A = newProjectId(T0);
      const store = openLmdbStore(path);
      const silent = silentWriter(path);
      const announcing = openLmdbStore(path);
      try {
        expect(statSync(join(path, CHANGES_FILE)).mode & 0o777).toBe(0o600);
        const before = store.changeSeqNow();
        await silent.createProvider(providerRecord(A, T0));
        // Committed, but never announced (its writer was never answered): not taken as a change.
        expect(store.changeSeqNow()).toBe(before);
        // It is in the data all the same: a store without the mapping reads it there.
        expect(silent.changeSeqNow()).toBe(before + 1);
        await announcing.createProvider(providerRecord(A, T0 + 1, "second"));
        expect(store.changeSeqNow()).toBe(before + 2);
      } finally {
        await announcing.close();
        await silent.close();
        await store.close();
      }
    }));

  test("a store that cannot map the announcements reads the data on every call", () =>
    withDir(async (path) => {
      const A = newProjectId(T0);
      const store = silentWriter(path);
      const other = silentWriter(path);
      try {
        const before = store.changeSeqNow();
        await other.createProvider(providerRecord(A, T0));
        expect(store.changeSeqNow()).toBe(before + 1);
      } finally {
        await other.close();
        await store.close();
      }
    }));
});

describe("lmdb store", () => {
  test("its files are the owner's alone (0600), even in a directory others may list", () =>
    withDir(async (path) => {
      chmodSync(path, 0o755);
      const store = openLmdbStore(path);
      try {
        await store.initMeta("format", 1);
        for (const file of [LMDB_FILE, `${LMDB_FILE}-lock`, CHANGES_FILE]) expect({ file, mode: statSync(join(path, file)).mode & 0o777 }).toEqual({ file, mode: 0o600 });
      } finally {
        await store.close();
      }
    }));

  test("describes itself with the data file path", () =>
    withDir(async (path) => {
      const store = openLmdbStore(path);
      expect(store.description).toBe(`lmdb ${join(path, "tokenmint.mdb")}`);
      await store.close();
    }));

  test("data survives close and reopen", () =>
    withDir(async (path) => {
      const p = providerRecord(A, T0);
      const c = clientRecord(p, T0 + 1);
      const k = apiKeyRecord(A, T0 + 2, "h");
      const first = openLmdbStore(path);
      await first.initMeta("format", 1);
      await first.createProject({ id: A, name: "default", createdAt: T0 });
      await first.createProvider(p);
      await first.createClient(c);
      await first.createApiKey(k);
      expect(await first.swapKeySet(keySetRecord(A, 1), 0)).toBe(true);
      await first.revokeToken(A, "jti-1", T0 + 60_000, T0);
      await first.close();

      const second = openLmdbStore(path);
      expect(await second.getMeta<number>("format")).toBe(1);
      expect(await second.listProjects()).toEqual([{ id: A, name: "default", createdAt: T0 }]);
      expect(await second.getProvider(A, p.id)).toEqual(p);
      expect(await second.getClient(A, p.id, c.id)).toEqual(c);
      expect(await second.getApiKeyByHash("h")).toEqual(k);
      expect(await second.getKeySet(A)).toEqual(keySetRecord(A, 1));
      expect(await second.isTokenRevoked(A, "jti-1", T0)).toBe(true);
      await second.close();
    }));

  test("writes beside processes that open and read the data lose nothing, and fail none; only lmdb writes the data file", () =>
    withDir(async (path) => {
      const store = openLmdbStore(path);
      const data = join(path, LMDB_FILE);
      const written: string[] = [];
      let failed = 0;
      try {
        await store.initMeta("format", 1);
        // No room kept as bytes beyond the data: an earlier build's zeros there let readers break commits.
        expect(statSync(data).size).toBeLessThan(ROOM_NEEDED);
        const deadline = Date.now() + 8000;
        // Processes that each open the data, read and close it, one after the other, as commands do.
        const reader = async () => {
          let opened = 0;
          while (Date.now() < deadline) {
            const child = Bun.spawn([process.execPath, join(import.meta.dir, "reader-child.ts"), data], { stderr: "inherit" });
            expect(await child.exited).toBe(0);
            opened++;
          }
          return opened;
        };
        const readers = [reader(), reader()];
        const writer = async (w: number) => {
          for (let i = 0; Date.now() < deadline; i++) {
            const record = providerRecord(A, T0 + i, `w${w}-${i}`);
            try {
              await store.createProvider(record);
              written.push(record.id);
            } catch {
              failed++;
            }
          }
        };
        await Promise.all([0, 1, 2, 3].map(writer));
        expect((await Promise.all(readers)).every((opened) => opened > 10)).toBe(true);
        expect(failed).toBe(0);
        const stored = new Set<string>();
        for (let after: string | undefined, page; (page = await store.listProviders(A, { limit: 100, ...(after === undefined ? {} : { after }) })).items.length > 0; after = page.last) {
          for (const p of page.items) stored.add(p.id);
          if (page.last === undefined) break;
        }
        expect(written.filter((id) => !stored.has(id))).toEqual([]);
        expect(stored.size).toBe(written.length);
      } finally {
        await store.close();
      }
    }), 30_000);

  test("two instances on one directory see each other's writes from their next turn", () =>
    withDir(async (path) => {
      const one = openLmdbStore(path);
      const two = openLmdbStore(path);
      try {
        const p = providerRecord(A, T0);
        await one.createProvider(p);
        await nextTurn();
        expect(await two.getProvider(A, p.id)).toEqual(p);
        const renamed = await two.updateProvider(A, p.id, (cur) => ({ ...cur, name: "renamed" }));
        await nextTurn();
        expect(await one.getProvider(A, p.id)).toEqual(renamed);
        // Writes always see the latest data: a transaction never works on a stale snapshot.
        expect(await storeErrorKind(two.createProvider(p))).toBe("already_exists");
        expect(await two.swapKeySet(keySetRecord(A, 1), 0)).toBe(true);
        expect(await one.swapKeySet(keySetRecord(A, 1), 0)).toBe(false);
        await nextTurn();
        expect(await one.getKeySet(A)).toEqual(keySetRecord(A, 1));
        await one.deleteProvider(A, p.id);
        await nextTurn();
        expect(await two.getProvider(A, p.id)).toBeUndefined();
        // Closing one instance (the CLI exiting) leaves the other working.
        await one.close();
        expect(await two.initMeta("after-close", 2)).toBe(2);
        expect(await two.getKeySet(A)).toEqual(keySetRecord(A, 1));
      } finally {
        await one.close();
        await two.close();
      }
    }));

  test("compare-and-swap race between two instances: exactly one wins each round", () =>
    withDir(async (path) => {
      const one = openLmdbStore(path);
      const two = openLmdbStore(path);
      try {
        for (let round = 0; round < 20; round++) {
          await nextTurn();
          const [s1, s2] = await Promise.all([one.getKeySet(A), two.getKeySet(A)]);
          const version = s1?.version ?? 0;
          expect(s2?.version ?? 0).toBe(version);
          const mine = { ...keySetRecord(A, version + 1), rotatedAt: 1 };
          const theirs = { ...keySetRecord(A, version + 1), rotatedAt: 2 };
          const results = await Promise.all([one.swapKeySet(mine, version), two.swapKeySet(theirs, version)]);
          expect(results.filter(Boolean)).toHaveLength(1);
          const stored = await one.getKeySet(A);
          expect(stored).toEqual(results[0] ? mine : theirs);
        }
        expect((await two.getKeySet(A))?.version).toBe(20);
      } finally {
        await one.close();
        await two.close();
      }
    }));

  test("compare-and-swap race between processes: exactly one wins", () =>
    withDir(async (path) => {
      const seed = openLmdbStore(path);
      expect(await seed.swapKeySet(keySetRecord(A, 1), 0)).toBe(true);
      const seqBefore = await seed.changeSeq();
      const child = join(import.meta.dir, "cas-race-child.ts");
      const procs = [101, 102, 103].map((label) =>
        Bun.spawn([process.execPath, child, path, A, String(label)], { stdin: "pipe", stdout: "pipe", stderr: "inherit" }),
      );
      const readers = procs.map((p) => lines(p.stdout));
      // Every child has read version 1 before any of them swaps.
      for (const r of readers) expect(await r.next()).toBe("ready 1");
      for (const p of procs) {
        p.stdin.write("go\n");
        await p.stdin.end();
      }
      const outcomes = await Promise.all(readers.map((r) => r.next()));
      expect(await Promise.all(procs.map((p) => p.exited))).toEqual([0, 0, 0]);
      expect(outcomes.filter((o) => o === "swapped true")).toHaveLength(1);
      expect(outcomes.filter((o) => o === "swapped false")).toHaveLength(2);
      // The other processes' writes moved the change counter this instance reads.
      await nextTurn();
      expect(await seed.changeSeq()).toBeGreaterThan(seqBefore);
      await seed.close();
      const after = openLmdbStore(path);
      const stored = await after.getKeySet(A);
      await after.close();
      expect(stored?.version).toBe(2);
      expect(stored?.rotatedAt).toBe([101, 102, 103][outcomes.indexOf("swapped true")]);
    }));

  test("a jti used through one instance is refused through another on the same file", () =>
    withDir(async (path) => {
      const one = openLmdbStore(path);
      const two = openLmdbStore(path);
      try {
        expect(await one.useAssertionJti(A, "client-1", "shared", T0 + 60_000, T0)).toBe(true);
        // A write transaction always reads the latest data, without waiting for the next turn.
        expect(await two.useAssertionJti(A, "client-1", "shared", T0 + 60_000, T0 + 1)).toBe(false);
      } finally {
        await one.close();
        await two.close();
      }
    }));

  test("keysChangedSince remembers the latest KEYS_LOG_LENGTH writes only, and cannot tell across a write that left no entry", () =>
    withDir(async (path) => {
      const first = openLmdbStore(path);
      await first.createProject({ id: A, name: "default", createdAt: T0 }, keySetRecord(A, 1));
      await first.close();
      // The data as KEYS_LOG_LENGTH more writes of the key set leave it, made in one transaction.
      const seq = KEYS_LOG_LENGTH + 1;
      const raw = () => open({ path: join(path, LMDB_FILE), encoding: "json", compression: false }) as RootDatabase<unknown, string>;
      const logged = (db: RootDatabase<unknown, string>) => db.getKeysCount({ start: "keyslog:", end: "keyslog:\uffff" });
      let db = raw();
      await db.transaction(() => {
        db.removeSync(key.keysLog(1));
        for (let n = 2; n <= seq; n++) db.putSync(key.keysLog(n), { projectId: A, project: false, keySet: true });
        db.putSync(key.keysChangeSeq, seq);
        db.putSync(key.keySet(A), keySetRecord(A, seq));
      });
      await db.close();

      const store = openLmdbStore(path);
      try {
        expect(await store.keysChangedSince(seq - KEYS_LOG_LENGTH)).toEqual({ seq, projects: [], keySets: [A] });
        expect(await store.keysChangedSince(seq - KEYS_LOG_LENGTH - 1)).toBeUndefined();
        // The next write forgets the oldest entry.
        expect(await store.swapKeySet(keySetRecord(A, seq + 1), seq)).toBe(true);
        expect(await store.keysChangedSince(seq + 1 - KEYS_LOG_LENGTH)).toEqual({ seq: seq + 1, projects: [], keySets: [A] });
        expect(await store.keysChangedSince(seq - KEYS_LOG_LENGTH)).toBeUndefined();
      } finally {
        await store.close();
      }
      db = raw();
      try {
        expect(logged(db)).toBe(KEYS_LOG_LENGTH);
        expect(db.get(key.keysLog(seq + 1 - KEYS_LOG_LENGTH))).toBeUndefined();
        // A process of an earlier build counts its write without an entry.
        await db.put(key.keysChangeSeq, seq + 2);
      } finally {
        await db.close();
      }
      const reopened = openLmdbStore(path);
      try {
        expect(await reopened.keysChangedSince(seq + 1)).toBeUndefined();
        expect(await reopened.keysChangedSince(seq)).toBeUndefined();
        expect(await reopened.swapKeySet(keySetRecord(A, seq + 2), seq + 1)).toBe(true);
        expect(await reopened.keysChangedSince(seq + 2)).toEqual({ seq: seq + 3, projects: [], keySets: [A] });
      } finally {
        await reopened.close();
      }
    }));

  test("keysChangedSince cannot tell across a write of a process that keeps no log, nor after our next write", () =>
    withDir(async (path) => {
      const store = openLmdbStore(path);
      try {
        await store.createProject({ id: A, name: "default", createdAt: T0 }, keySetRecord(A, 1));
        const since = await store.keysChangeSeq();
        // An earlier build's write: the change counter moves, nothing else does.
        const db = open({ path: join(path, LMDB_FILE), encoding: "json", compression: false }) as RootDatabase<unknown, string>;
        try {
          await db.transaction(() => {
            db.putSync(key.keySet(A), keySetRecord(A, 2));
            db.putSync(key.changeSeq, (db.get(key.changeSeq) as number) + 1);
          });
        } finally {
          await db.close();
        }
        await nextTurn();
        expect(await store.keysChangedSince(since)).toBeUndefined();
        // Our next write, of other data, leaves the unlogged write in the log as unknown.
        await store.createProvider(providerRecord(A, T0));
        expect(await store.keysChangedSince(since)).toBeUndefined();
        const seq = await store.keysChangeSeq();
        expect(seq).toBe(since + 1);
        expect(await store.keysChangedSince(seq)).toEqual({ seq, projects: [], keySets: [] });
        await store.swapKeySet(keySetRecord(A, 3), 2);
        expect(await store.keysChangedSince(seq)).toEqual({ seq: seq + 1, projects: [], keySets: [A] });
      } finally {
        await store.close();
      }
    }));

  test("a deleted client leaves nothing of its used assertion ids in the file, nor does pruning of expired ones", () =>
    withDir(async (path) => {
      const store = openLmdbStore(path);
      const { provider: p, first: gone, second: kept } = await providerWithTwoClients(store, A);
      await store.createProject({ id: A, name: "a", createdAt: T0 });
      await store.useAssertionJti(A, gone.id, "used-1", T0 + 60_000, T0);
      await store.useAssertionJti(A, gone.id, "used-2", T0 + 90_000, T0);
      await store.useAssertionJti(A, kept.id, "expires", T0 + 1000, T0);
      await store.useAssertionJti(A, kept.id, "lives", T0 + 120_000, T0);
      await store.deleteClient(A, p.id, gone.id);
      expect(await store.pruneExpired(T0 + 2000, 100)).toBe(1);
      await store.close();
      const db = open({ path: join(path, "tokenmint.mdb"), encoding: "json", compression: false, readOnly: true });
      try {
        const keys = [...db.getKeys({ start: "jti", end: "jtj" })] as string[];
        expect(keys.filter((k) => k.includes(gone.id))).toEqual([]);
        const lives = `${kept.id}:lives`;
        expect(keys.sort()).toEqual([key.expiring("jti", A, lives), key.expiryIndex("jti", A, T0 + 120_000, lives)].sort());
      } finally {
        await db.close();
      }
    }));

  test("used jtis are swept once expired: the file keeps only the unexpired ones, plus one batch at most", () =>
    withDir(async (path) => {
      const store = openLmdbStore(path);
      for (let i = 0; i < 100; i++) await store.useAssertionJti(A, "client-1", `old-${i}`, T0 + 1000, T0);
      // Each later use removes a bounded batch of expired entries; enough uses remove them all.
      for (let i = 0; i < 10; i++) await store.useAssertionJti(A, "client-1", `new-${i}`, T0 + 60_000, T0 + 2000);
      await store.close();
      const db = open({ path: join(path, "tokenmint.mdb"), encoding: "json", compression: false, readOnly: true });
      try {
        const count = (prefix: string) => db.getKeysCount({ start: prefix, end: `${prefix}\uffff` });
        expect(count(`jti:${A}:`)).toBe(10);
        expect(count(`jtiexp:${A}:`)).toBe(10);
      } finally {
        await db.close();
      }
    }));
});

describe("lmdb backup and read-only files", () => {
  test("a backup's partial copy is the owner's alone from its first byte, whatever the umask", () =>
    withDir(async (path) => {
      const modes: number[] = [];
      const previous = process.umask(0o022);
      try {
        // As lmdb does: the copy is created with the default mode, less the umask.
        const copying = {
          backup: async (file: string) => {
            writeFileSync(file, "partial", { mode: 0o666 });
            modes.push(statSync(file).mode & 0o777);
          },
        };
        await backupEnvironment(copying, join(path, "copy.mdb"), join(path, LMDB_FILE));
        expect(process.umask()).toBe(0o022);
      } finally {
        process.umask(previous);
      }
      expect(modes).toEqual([0o600]);
      expect(statSync(join(path, "copy.mdb")).mode & 0o777).toBe(0o600);
      expect(readdirSync(path)).toEqual(["copy.mdb"]);
    }));

  test("a backup removes the partial copies of its file that killed backups left, and nothing else", () =>
    withDir(async (path) => {
      const dead = await deadPid();
      // A backup to the same file still running: its partial copy is in use.
      const live = Bun.spawn(["sleep", "30"]);
      try {
        const partial = (pid: number | string, file = "copy.mdb") => `.${file}.${pid}.partial`;
        const kept = [
          partial(live.pid),
          // Another file's, or not a backup's name as it writes it: no pid, a leading zero, a sign, another suffix.
          partial(dead, "other.mdb"),
          partial(dead, "copy"),
          partial(""),
          partial(`0${dead}`),
          partial(`-${dead}`),
          `${partial(dead)}.old`,
          `copy.mdb.${dead}.partial`,
        ];
        for (const name of [partial(dead), ...kept]) writeFileSync(join(path, name), "left");
        // One that cannot be removed is left, and the backup goes on.
        const stuck = partial(await deadPid());
        mkdirSync(join(path, stuck));
        await backupEnvironment({ backup: async (file: string) => writeFileSync(file, "copy") }, join(path, "copy.mdb"), join(path, LMDB_FILE));
        expect(readdirSync(path).sort()).toEqual(["copy.mdb", stuck, ...kept].sort());
      } finally {
        live.kill();
      }
    }));

  test("a backup is the snapshot at backup time and opens read-only", () =>
    withDir(async (path) => {
      const store = openLmdbStore(path);
      const p = providerRecord(A, T0);
      const c = clientRecord(p, T0 + 1);
      await store.initMeta("format", 1);
      await store.createProvider(p);
      await store.createClient(c);
      expect(await store.swapKeySet(keySetRecord(A, 1), 0)).toBe(true);
      const file = join(path, "snapshot");
      await store.backup(file);
      const later = providerRecord(A, T0 + 2, "later");
      await store.createProvider(later);
      await store.close();

      const copy = openLmdbFileReadOnly(file);
      try {
        expect(copy.description).toBe(`lmdb ${file} (read-only)`);
        expect(await copy.getMeta<number>("format")).toBe(1);
        expect(await copy.getClient(A, p.id, c.id)).toEqual(c);
        expect(await copy.getKeySet(A)).toEqual(keySetRecord(A, 1));
        expect(await copy.getProvider(A, later.id)).toBeUndefined();
      } finally {
        await copy.close();
      }
    }));

  test("a backup taken from a read-only instance while another writes is consistent", () =>
    withDir(async (path) => {
      const writer = openLmdbStore(path);
      const reader = openLmdbFileReadOnly(join(path, "tokenmint.mdb"));
      const file = join(path, "during-writes.mdb");
      try {
        // Each client is written after its provider, in its own transaction.
        let written = 0;
        const writes = (async () => {
          for (let i = 0; i < 100; i++) {
            const p = providerRecord(A, T0 + 2 * i, `p${i}`);
            await writer.createProvider(p);
            await writer.createClient(clientRecord(p, T0 + 2 * i + 1));
            written++;
          }
        })();
        while (written < 20) await nextTurn();
        await reader.backup(file);
        await writes;
      } finally {
        await reader.close();
        await writer.close();
      }
      const copy = openLmdbFileReadOnly(file);
      try {
        const providers = (await copy.listProviders(A, { limit: 100 })).items;
        expect(providers.length).toBeGreaterThanOrEqual(20);
        for (const p of providers) {
          const clients = (await copy.listClients(A, p.id, { limit: 10 })).items;
          // Only the newest provider may lack its client: the copy is one committed state.
          if (p !== providers[providers.length - 1]) expect(clients).toHaveLength(1);
        }
      } finally {
        await copy.close();
      }
    }));

  test("read-only: refuses files that are not LMDB data without opening them, creates nothing, refuses writes", () =>
    withDir(async (path) => {
      const cases: [string, string | Buffer][] = [
        ["junk", "this is not an LMDB file"],
        ["empty", ""],
        ["zeros", Buffer.alloc(16384)],
      ];
      for (const [name, content] of cases) {
        writeFileSync(join(path, name), content);
        expect(() => openLmdbFileReadOnly(join(path, name))).toThrow(/is not an LMDB data file/);
      }
      // Cut short after both meta pages: pages the current meta names are missing (opening it
      // would kill the process when LMDB reads past the end of the mapped file).
      const big = openLmdbStore(join(path, "big"));
      for (let i = 0; i < 300; i++) await big.createProvider(providerRecord(newProjectId(T0), T0 + i, "x".repeat(150)));
      await big.close();
      const full = readFileSync(join(path, "big", LMDB_FILE));
      expect(full.length).toBeGreaterThan(40_000);
      await openLmdbFileReadOnly(join(path, "big", LMDB_FILE)).close();
      writeFileSync(join(path, "cut"), full.subarray(0, 20_000));
      expect(() => openLmdbFileReadOnly(join(path, "cut"))).toThrow(/damaged or incomplete/);
      // The same file as a data directory's data: refused, not opened.
      writeFileSync(join(path, "big", LMDB_FILE), full.subarray(0, 20_000));
      expect(() => openLmdbStore(join(path, "big"))).toThrow(/damaged or incomplete/);
      // A torn copy: the first meta page is intact, the second is missing.
      const store = openLmdbStore(path);
      await store.initMeta("format", 1);
      await store.close();
      writeFileSync(join(path, "torn"), readFileSync(join(path, "tokenmint.mdb")).subarray(0, 4096));
      expect(() => openLmdbFileReadOnly(join(path, "torn"))).toThrow(/damaged or incomplete/);
      expect(await storeErrorKind(Promise.resolve().then(() => openLmdbFileReadOnly(join(path, "missing"))))).toBe("not_found");
      expect(readdirSync(path).sort()).toEqual(["big", "cut", "empty", "junk", "tokenmint.mdb", "tokenmint.mdb-changes", "tokenmint.mdb-lock", "tokenmint.mdb-open", "tokenmint.mdb-open-intent", "torn", "zeros"]);

      const before = readFileSync(join(path, "tokenmint.mdb"));
      const ro = openLmdbFileReadOnly(join(path, "tokenmint.mdb"));
      try {
        expect(await ro.getMeta<number>("format")).toBe(1);
        expect(await storeErrorKind(ro.initMeta("other", 2))).toBe("unavailable");
        expect(await storeErrorKind(ro.createProvider(providerRecord(A, T0)))).toBe("unavailable");
        expect(await storeErrorKind(ro.swapKeySet(keySetRecord(A, 1), 0))).toBe("unavailable");
      } finally {
        await ro.close();
      }
      expect(readFileSync(join(path, "tokenmint.mdb")).equals(before)).toBe(true);
      expect(existsSync(join(path, "missing"))).toBe(false);
    }));

});

/** Reads a byte stream line by line. */
function lines(stream: ReadableStream<Uint8Array>): { next(): Promise<string | undefined> } {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  return {
    async next() {
      for (;;) {
        const nl = buffer.indexOf("\n");
        if (nl >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          return line;
        }
        const { value, done } = await reader.read();
        if (done) return buffer === "" ? undefined : buffer;
        buffer += decoder.decode(value, { stream: true });
      }
    },
  };
}

describe("lmdb store: a data file LMDB finds damaged", () => {
  const PATH = "/data/tokenmint.mdb";
  /** lmdb's error for a return code, as its reads throw it. */
  const lmdbError = (code: number, message: string) => Object.assign(new Error(message), { code });
  /** A store over an environment whose every read throws `error`. */
  const failingStore = (error: Error) => {
    const db = {
      get: () => {
        throw error;
      },
      getRange: () => {
        throw error;
      },
      putSync: () => undefined,
      transaction: (body: () => unknown) => new Promise((resolve) => resolve(body())),
      // lmdb's copy rejects with the name in the message and no code.
      backup: () => Promise.reject(new Error(error.message)),
    };
    return new LmdbStore(db as unknown as RootDatabase<unknown, string>, PATH, false);
  };
  const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as Error);

  test("reads, listings and writes that find a page missing, of the wrong type or after a fatal error are unavailable, naming the file and the way back", async () => {
    for (const [code, message] of [
      [-30797, "MDB_PAGE_NOTFOUND: Requested page not found"],
      [-30796, "MDB_CORRUPTED: Located page was wrong type"],
      [-30795, "MDB_PANIC: Update of meta page failed or environment had fatal error"],
    ] as const) {
      const store = failingStore(lmdbError(code, message));
      for (const attempt of [store.getMeta("format"), store.listProviders(A, { limit: 10 }), store.listProjects(), store.createProvider(providerRecord(A, T0))]) {
        const error = await failure(attempt);
        expect(await storeErrorKind(Promise.reject(error))).toBe("unavailable");
        expect(error?.message).toBe(`${PATH} is damaged (${message}): stop the server and restore a backup (tokenmint restore FILE)`);
      }
    }
  });

  test("a backup that meets damage says the data is damaged, not that the backup could not be written", () =>
    withDir(async (path) => {
      const file = join(path, "copy.mdb");
      const damaged = await failure(failingStore(lmdbError(-30796, "MDB_CORRUPTED: Located page was wrong type")).backup(file));
      expect(damaged?.message).toBe(`${PATH} is damaged (MDB_CORRUPTED: Located page was wrong type): stop the server and restore a backup (tokenmint restore FILE)`);
      const other = await failure(failingStore(new Error("ENOSPC: no space left on device")).backup(file));
      expect(other?.message).toBe(`cannot write the backup ${file}: ENOSPC: no space left on device`);
      expect(existsSync(file)).toBe(false);
    }));

  test("any other failure of a read stays what it was", async () => {
    const other = lmdbError(-30791, "MDB_DBS_FULL: Environment maxdbs limit reached");
    expect(await failure(failingStore(other).getMeta("format"))).toBe(other);
    const plain = new Error("something else");
    expect(await failure(failingStore(plain).createProvider(providerRecord(A, T0)))).toBe(plain);
  });
});

/**
 * Where lmdb itself fails a commit (a full disk on a copy-on-write filesystem, a disk error; the
 * room the store keeps prevents it on a full disk elsewhere), and a close that then never ends.
 */
describe("lmdb store: a commit lmdb fails", () => {
  const PATH = "/data/tokenmint.mdb";
  const storeOver = (db: object) => new LmdbStore(db as unknown as RootDatabase<unknown, string>, PATH, false);

  test("is unavailable with lmdb's reason, naming the file", async () => {
    // lmdb rejects the write with a generic error; the reason comes from its commitError.
    const commitError = Promise.reject(new Error("No space left on device: Attempting to write page at position 4096"));
    const store = storeOver({ transaction: () => Promise.reject(Object.assign(new Error("Commit failed (see commitError for details)"), { commitError })) });
    const error = await store.createProvider(providerRecord(A, T0)).then(() => undefined, (e: unknown) => e as Error);
    expect(await storeErrorKind(Promise.reject(error))).toBe("unavailable");
    expect(error?.message).toBe(`cannot write ${PATH}: No space left on device`);
  });

  test("a close lmdb never finishes is given up after 5 s, naming the file", async () => {
    const store = storeOver({ close: () => new Promise(() => undefined) });
    const started = performance.now();
    const error = await store.close().then(() => undefined, (e: unknown) => e as Error);
    expect(performance.now() - started).toBeGreaterThanOrEqual(4_900);
    expect(await storeErrorKind(Promise.reject(error))).toBe("unavailable");
    expect(error?.message).toBe(`${PATH} did not close within 5 s: lmdb still waits for a write it could not make (the disk is full or failing)`);
  }, 10_000);
});
