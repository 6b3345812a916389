/**
 * @module cli/restore
 * `tokenmint restore FILE`: replaces the data directory's `tokenmint.mdb` with a backup. It runs
 * without the context (which would create data) and refuses, changing nothing, while a server
 * holds the data directory, when FILE is not tokenmint data of this format, or when the
 * configured master key does not open its signing keys. The backup is copied into the data
 * directory under a temporary name, checked there, flushed, and renamed over `tokenmint.mdb`;
 * the stale lock file and change announcements go with the old data.
 *
 * The signing keys are not restored: each project keeps the key set of the data replaced (when
 * it can be read and the master key opens it). Verifiers hold that set, tokens signed since the
 * backup are signed by its keys, and a key revoked since must stay revoked; the backup's keys
 * would drop the first and bring back the second. A project the replaced data lacks keeps the
 * backup's keys.
 */
import { chmodSync, constants, copyFileSync, existsSync, mkdirSync, renameSync, rmdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import { fsyncPath } from "../runtime/durable-files.ts";
import { lmdbFileProblem } from "../store/lmdb/lmdb-file.ts";
import { CHANGES_FILE, LMDB_FILE, openLmdbFileForRestore, openLmdbFileReadOnly } from "../store/lmdb/lmdb-store.ts";
import type { KeySetRecord } from "../store/store.ts";
import { UsageError, type ParsedArgs } from "./args.ts";
import { inspectData } from "./check.ts";
import type { Output } from "./output.ts";
import { liveServer } from "./serve-lock.ts";

/** Refuses while a server holds `dataDir`. */
function ensureNoServer(dataDir: string): void {
  const pid = liveServer(dataDir);
  if (pid !== undefined) {
    throw new AppError("conflict", `a tokenmint server (pid ${pid}) is serving ${dataDir}; stop it before restoring (nothing was changed)`);
  }
}

export async function restoreCommand(config: Config, args: ParsedArgs, io: Output): Promise<void> {
  const [, file, extra] = args.words;
  if (file === undefined || file.trim() === "" || extra !== undefined) throw new UsageError("usage: tokenmint restore FILE [--json]");
  const { dataDir } = config;
  ensureNoServer(dataDir);
  if (!existsSync(file) || !statSync(file).isFile()) throw new AppError("not_found", `the backup ${file} does not exist or is not a file`);
  const problem = lmdbFileProblem(file);
  if (problem !== undefined) throw new AppError("invalid_request", `${file} is not a tokenmint backup: it ${problem}`);

  const createdDir = !existsSync(dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const staged = join(dataDir, `.${LMDB_FILE}.restore-${process.pid}`);
  const target = join(dataDir, LMDB_FILE);
  let keys: KeptKeys;
  try {
    copyFileSync(file, staged, constants.COPYFILE_EXCL);
    chmodSync(staged, 0o600);
    // Check the very bytes that will become the data, not FILE (which could change meanwhile).
    const store = openLmdbFileReadOnly(staged);
    try {
      await inspectData(store, config, `the backup ${file}`);
    } finally {
      await store.close();
    }
    keys = await keepSigningKeys(staged, await replacedKeySets(target, config));
    rmSync(`${staged}-lock`, { force: true });
    fsyncPath(staged);
    ensureNoServer(dataDir);
    renameSync(staged, target);
    rmSync(`${target}-lock`, { force: true });
    // The old data's last announced change (store/lmdb): the restored counter may be behind it, and
    // a server would take the commit that reaches it again for one it has already seen.
    rmSync(join(dataDir, CHANGES_FILE), { force: true });
    fsyncPath(dataDir);
  } catch (error) {
    rmSync(staged, { force: true });
    rmSync(`${staged}-lock`, { force: true });
    if (createdDir) {
      try {
        rmdirSync(dataDir);
      } catch {
        // Something else appeared in it meanwhile: leave it.
      }
    }
    throw error;
  }
  const bytes = statSync(target).size;
  if (args.switches.has("--json")) io.out(JSON.stringify({ file, dataFile: target, bytes, signingKeysKept: keys.kept, ...(keys.unread === undefined ? {} : { replacedUnread: keys.unread }) }));
  else io.out(`Restored ${file} to ${target} (${bytes} bytes); start the server to use it.`);
  if (keys.kept > 0) io.err(`Signing keys: ${keys.kept} project(s) keep the key set they had, so their tokens keep verifying and revoked keys stay revoked.`);
  if (keys.unread !== undefined) {
    io.err(`Signing keys: the data replaced could not be read (${keys.unread}); the backup's keys are used, and tokens signed by keys made since the backup no longer verify.`);
  }
}

/** What keepSigningKeys did: how many projects kept their key set; why the replaced data could not be read, if so. */
interface KeptKeys {
  kept: number;
  unread?: string;
}

/**
 * The key set of each project in the data at `target`, which the restore replaces; undefined
 * when there is none, or why it cannot be used: it cannot be read, is of another format, or the
 * configured master key does not open its keys (a server could not sign with them).
 */
async function replacedKeySets(target: string, config: Config): Promise<Map<string, KeySetRecord> | string | undefined> {
  if (!existsSync(target)) return undefined;
  const problem = lmdbFileProblem(target);
  if (problem !== undefined) return `it ${problem}`;
  try {
    const store = openLmdbFileReadOnly(target);
    try {
      await inspectData(store, config, target);
      const sets = new Map<string, KeySetRecord>();
      for (const project of await store.listProjects()) {
        const set = await store.getKeySet(project.id);
        if (set !== undefined) sets.set(project.id, set);
      }
      return sets;
    } finally {
      await store.close();
    }
  } catch (error) {
    return (error as Error).message;
  }
}

/** Gives each project of the staged data the key set it has in the data replaced (`replaced`), where it has one. */
async function keepSigningKeys(staged: string, replaced: Map<string, KeySetRecord> | string | undefined): Promise<KeptKeys> {
  if (typeof replaced === "string") return { kept: 0, unread: replaced };
  if (replaced === undefined || replaced.size === 0) return { kept: 0 };
  const store = openLmdbFileForRestore(staged);
  let kept = 0;
  try {
    for (const project of await store.listProjects()) {
      const set = replaced.get(project.id);
      if (set === undefined) continue;
      const restored = await store.getKeySet(project.id);
      const version = restored?.version ?? 0;
      if (!(await store.swapKeySet({ ...set, version: version + 1 }, version))) throw new Error(`the key set of project ${project.id} changed while it was restored`);
      kept++;
    }
  } finally {
    await store.close();
  }
  return { kept };
}
