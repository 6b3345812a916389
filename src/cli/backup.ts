/**
 * @module cli/backup
 * `tokenmint backup FILE`: a consistent copy of the data file, safe while the server runs. The
 * data is opened read-only (no key service, no rotation, no write) and copied from one LMDB read
 * snapshot. FILE is never overwritten. Signing keys stay sealed: the master key is not in the copy.
 */
import { existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Config } from "../config/schema.ts";
import { AppError } from "../errors.ts";
import { assertReadableFormat } from "../startup.ts";
import { UsageError, type ParsedArgs } from "./args.ts";
import { openExistingData } from "./check.ts";
import type { Output } from "./output.ts";

export async function backupCommand(config: Config, args: ParsedArgs, io: Output): Promise<void> {
  const [, file, extra] = args.words;
  if (file === undefined || file.trim() === "" || extra !== undefined) throw new UsageError("usage: tokenmint backup FILE [--json]");
  if (existsSync(file)) throw new AppError("conflict", `${file} already exists; backup never overwrites a file or directory, choose a new file name`);
  const directory = dirname(resolve(file));
  if (!existsSync(directory)) throw new AppError("not_found", `the directory ${directory} does not exist`);

  const { dataDir } = config;
  const store = openExistingData(dataDir);
  try {
    const format = await store.getMeta<number>("format");
    if (format === undefined) throw new AppError("not_found", `no data yet in ${dataDir}`);
    assertReadableFormat(format, dataDir);
    await store.backup(file);
  } finally {
    await store.close();
  }
  const bytes = statSync(file).size;
  if (args.switches.has("--json")) io.out(JSON.stringify({ file, bytes }));
  else io.out(`Backed up ${dataDir} to ${file} (${bytes} bytes)`);
}
