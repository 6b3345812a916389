/**
 * @module cli/restore
 * `tokenmint restore FILE`: replaces the data directory's `tokenmint.mdb` with a backup. It runs
 * without the context (which would create data) and refuses, changing nothing, while a server
 * holds the data directory, when FILE is not tokenmint data of this format, or when the
 * configured master key does not open its signing keys. The backup is copied into the data
 * directory under a temporary name, checked there, flushed, and renamed over `tokenmint.mdb`;
 * the stale lock file and change announcements go with the old data.
 */
import { chmodSync, constants, copyFileSync, existsSync, mkdirSync, renameSync, rmdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import { fsyncPath } from "../runtime/durable-files.ts";
import { lmdbFileProblem } from "../store/lmdb/lmdb-file.ts";
import { CHANGES_FILE, LMDB_FILE, openLmdbFileReadOnly } from "../store/lmdb/lmdb-store.ts";
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
  if (args.switches.has("--json")) io.out(JSON.stringify({ file, dataFile: target, bytes }));
  else io.out(`Restored ${file} to ${target} (${bytes} bytes); start the server to use it.`);
}
