/**
 * @module cli/restore
 * `tokenmint restore FILE`: replaces the data directory's `tokenmint.mdb` with a backup. It runs
 * without the context (which would create data) and refuses, changing nothing, while a server
 * holds the data directory, when FILE is not tokenmint data of a format it reads, or when the
 * configured master key does not open its signing keys. The backup is copied into the data
 * directory under a temporary name, checked there, flushed, and renamed over `tokenmint.mdb`;
 * the stale lock file and change announcements go with the old data. What a restore killed before
 * that rename left under its temporary name is removed by the next one.
 *
 * A restore undoes changes, never a revocation, and drops no signing key in use: from the data
 * replaced (when it can be read and the master key opens it), each project keeps its key set
 * where that set published a key after the backup's did (verifiers hold it, tokens signed since
 * the backup are signed by its keys, and a key revoked since must stay revoked), and every
 * revocation made since the backup is kept: API keys, tokens, clients' `tokensRevokedBefore`;
 * so are the client assertion ids used since, so none can be replayed.
 */
import { chmodSync, constants, copyFileSync, existsSync, mkdirSync, renameSync, rmdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import type { Clock } from "../context.ts";
import { AppError } from "../errors.ts";
import { keysByState } from "../keys/lifecycle.ts";
import { MasterKeyError } from "../keys/master-key.ts";
import { fsyncPath, removeLeftovers } from "../runtime/durable-files.ts";
import { DATA_FORMAT } from "../startup.ts";
import { lmdbFileProblem } from "../store/lmdb/lmdb-file.ts";
import { CHANGES_FILE, LMDB_FILE, openLmdbFileForRestore, openLmdbFileReadOnly, type ExpiringEntry } from "../store/lmdb/lmdb-store.ts";
import { openGuard } from "../store/lmdb/open-guard.ts";
import type { ApiKeyRecord, ClientRecord, KeySetRecord, Page, PageRequest, SigningKeyRecord } from "../store/store.ts";
import { UsageError, type ParsedArgs } from "./args.ts";
import { inspectData } from "./check.ts";
import type { Output } from "./output.ts";
import { acquireServeLock, lockHolder, type LockHolder } from "./serve-lock.ts";

/** The refusal of a restore while `holder` holds `dataDir`. */
function heldRefusal(dataDir: string, { pid, command }: LockHolder): AppError {
  return new AppError(
    "conflict",
    command === "restore"
      ? `another tokenmint restore (pid ${pid}) is replacing the data in ${dataDir}; let it finish (nothing was changed)`
      : `a tokenmint server (pid ${pid}) is serving ${dataDir}; stop it before restoring (nothing was changed)`,
  );
}

export async function restoreCommand(config: Config, args: ParsedArgs, io: Output, clock: Clock): Promise<void> {
  const [, file, extra] = args.words;
  if (file === undefined || file.trim() === "" || extra !== undefined) throw new UsageError("usage: tokenmint restore FILE [--json]");
  const { dataDir } = config;
  const holder = lockHolder(dataDir);
  if (holder !== undefined) throw heldRefusal(dataDir, holder);
  if (!existsSync(file) || !statSync(file).isFile()) throw new AppError("not_found", `the backup ${file} does not exist or is not a file`);
  const problem = lmdbFileProblem(file);
  if (problem !== undefined) throw new AppError("invalid_request", `${file} is not a tokenmint backup: it ${problem}`);

  if (existsSync(dataDir) && !statSync(dataDir).isDirectory()) throw new AppError("invalid_request", `the data directory ${dataDir} is not a directory (nothing was changed)`);
  const createdDir = !existsSync(dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // Held until the data is replaced: no server starts on the directory meanwhile.
  const lock = acquireServeLock(dataDir);
  if ("heldBy" in lock) {
    if (createdDir) rmdirSync(dataDir);
    throw heldRefusal(dataDir, lock.heldBy);
  }
  const stagedPrefix = `.${LMDB_FILE}.restore-`;
  const staged = join(dataDir, `${stagedPrefix}${process.pid}`);
  const target = join(dataDir, LMDB_FILE);
  let kept: Kept;
  /** The data format of the backup, and so of the restored data unless a key set kept raises it. */
  let format: number;
  try {
    removeStaged(dataDir, stagedPrefix, staged);
    copyFileSync(file, staged, constants.COPYFILE_EXCL);
    chmodSync(staged, 0o600);
    // Check the very bytes that will become the data, not FILE (which could change meanwhile).
    const store = openLmdbFileReadOnly(staged);
    try {
      ({ format } = await inspectData(store, config, `the backup ${file}`));
    } finally {
      await store.close();
    }
    // From reading the data replaced to the rename, no command beside us finishes a write (it would
    // go into the file replaced): the guard keeps them waiting, and they then find the data replaced.
    const replace = async (): Promise<Kept> => {
      const keeping = await keepFromReplaced(staged, await readReplaced(target, config, clock.now()), clock.now());
      rmSync(`${staged}-lock`, { force: true });
      fsyncPath(staged);
      // The old data's last announced change (store/lmdb): the restored counter may be behind it,
      // and a server would take the commit that reaches it again for one it has already seen.
      // Removed before the rename, so no crash leaves it beside the restored data.
      rmSync(join(dataDir, CHANGES_FILE), { force: true });
      renameSync(staged, target);
      // The old data's reader table, removed while no process opens the data: one opening the
      // restored data after the guard lets go makes a new one (it would share the old one with
      // processes still on the data replaced).
      rmSync(`${target}-lock`, { force: true });
      return keeping;
    };
    const guard = openGuard(target, false);
    kept = await (guard === undefined ? replace() : guard.exclusively(replace));
    fsyncPath(dataDir);
  } catch (error) {
    rmSync(staged, { force: true });
    rmSync(`${staged}-lock`, { force: true });
    lock.release();
    if (createdDir) {
      try {
        rmdirSync(dataDir);
      } catch {
        // Something else appeared in it meanwhile: leave it.
      }
    }
    throw error;
  }
  lock.release();
  const bytes = statSync(target).size;
  if (kept.raisedFormat) format = DATA_FORMAT;
  if (args.switches.has("--json")) {
    io.out(JSON.stringify({ file, dataFile: target, bytes, format, kept: { signingKeys: kept.signingKeys, revocations: kept.revocations }, ...(kept.unread === undefined ? {} : { replacedUnread: kept.unread }) }));
  } else io.out(`Restored ${file} to ${target} (${bytes} bytes, data format ${format}); start the server to use it.`);
  if (kept.raisedFormat) {
    io.err(`The backup's data was of format 1; a signing key set kept from the data replaced is of format ${DATA_FORMAT}, so the restored data is of format ${DATA_FORMAT}: versions that read only format 1 refuse it.`);
  }
  if (kept.signingKeys > 0 || kept.revocations > 0) {
    io.err(`Kept from the data replaced: the signing keys of ${kept.signingKeys} project(s) where newer than the backup's, and ${kept.revocations} revocation(s) of signing keys, API keys, tokens and clients' tokens made since the backup.`);
  }
  if (kept.unread !== undefined) {
    io.err(`The data replaced could not be read (${kept.unread}): the backup's signing keys are used, tokens signed by keys made since no longer verify, and revocations made since are undone.`);
  }
}

/**
 * Removes what restores killed before their rename left in `dataDir`: a staged copy of a backup
 * (`<prefix><pid>`, as big as the data) and its lock file (`<prefix><pid>-lock`), which nothing
 * else ever removes. Called while this restore holds the data directory's lock and before it
 * stages its own (`staged`): no live restore stages meanwhile, and a file of a live pid is kept
 * anyway. One named with this process's pid is a killed restore's whose pid this one got, and
 * would stop the copy (EEXIST). A file that cannot be removed is left: the restore goes on.
 */
function removeStaged(dataDir: string, prefix: string, staged: string): void {
  removeLeftovers(dataDir, prefix, ["", "-lock"]);
  for (const file of [staged, `${staged}-lock`]) {
    try {
      rmSync(file, { force: true });
    } catch {
      // Not ours to remove: the copy then fails naming it (EEXIST).
    }
  }
}

/** What the restore kept of the data it replaced; `unread` says why nothing could be. */
interface Kept {
  signingKeys: number;
  revocations: number;
  unread?: string;
  /** Set when a key set kept is of format 2 and the backup's data was of format 1: the data is now of format 2. */
  raisedFormat?: true;
}

/** What the data a restore replaces holds that must outlive it: its key sets, and its revocations. */
interface Replaced {
  keySets: Map<string, KeySetRecord>;
  revokedApiKeys: ApiKeyRecord[];
  /** Clients whose tokens were revoked (`tokensRevokedBefore`). */
  revokedClients: ClientRecord[];
  revokedTokens: ExpiringEntry[];
  /** Client assertion ids used and not yet expired: a replay of one stays refused. */
  usedAssertions: ExpiringEntry[];
}

/** Every item of a paged listing. */
async function listAll<T extends { id: string }>(list: (page: PageRequest) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  for (let after: string | undefined; ; ) {
    const page = await list({ limit: 1000, after });
    items.push(...page.items);
    if (page.last === undefined) return items;
    after = page.last;
  }
}

/**
 * What the data at `target`, which the restore replaces, holds that must outlive it; undefined
 * when there is none, or why it cannot be used: it cannot be read, is of another format, or the
 * configured master key does not open its keys (a server could not sign with them).
 */
async function readReplaced(target: string, config: Config, now: number): Promise<Replaced | string | undefined> {
  if (!existsSync(target)) return undefined;
  const problem = lmdbFileProblem(target);
  if (problem !== undefined) return `it ${problem}`;
  try {
    const store = openLmdbFileReadOnly(target);
    try {
      await inspectData(store, config, target);
      const replaced: Replaced = {
        keySets: new Map(),
        revokedApiKeys: [],
        revokedClients: [],
        revokedTokens: store.expiringEntries("revoked", now),
        usedAssertions: store.expiringEntries("jti", now),
      };
      for (const project of await store.listProjects()) {
        const set = await store.getKeySet(project.id);
        if (set !== undefined) replaced.keySets.set(project.id, set);
        replaced.revokedApiKeys.push(...(await store.listApiKeys(project.id)).filter((k) => k.revokedAt !== undefined));
        for (const provider of await listAll((page) => store.listProviders(project.id, page))) {
          const clients = await listAll((page) => store.listClients(project.id, provider.id, page));
          replaced.revokedClients.push(...clients.filter((c) => c.tokensRevokedBefore !== undefined));
        }
      }
      return replaced;
    } finally {
      await store.close();
    }
  } catch (error) {
    // Its own words, not those of a refusal ("nothing was changed"): the restore goes on without it.
    return error instanceof MasterKeyError ? "the configured master key does not open its signing keys" : (error as Error).message;
  }
}

/**
 * The instant a key set last published a key: every rotation, new algorithm and revocation of a
 * current or next key publishes a next key. Revoking a retired key publishes none (see
 * `revokedSince`).
 */
const lastPublished = (set: KeySetRecord) => keysByState(set).next.createdAt;

/**
 * The retired keys of `restored` (the backup's set) that `replaced` (the set of the data replaced,
 * no newer) no longer holds although it had published them: revoked since the backup, or past
 * their time in the JWKS. A retired key made after the replaced set's last publication (restored
 * onto older data) is one that set never knew, and stays.
 */
const revokedSince = (restored: KeySetRecord, replaced: KeySetRecord): SigningKeyRecord[] => {
  const held = new Set(replaced.keys.map((k) => k.kid));
  const known = lastPublished(replaced);
  return restored.keys.filter((k) => k.state === "retired" && !held.has(k.kid) && k.createdAt <= known);
};

/**
 * Brings into the staged data what the data replaced (`replaced`) must not lose: for each
 * project of both, its key set where it published a key after the backup's did (so a standby
 * holding older data takes the backup's), and every revocation made since the backup: retired
 * signing keys (where the backup's set stays), API keys, tokens, and clients'
 * `tokensRevokedBefore`. A restore undoes changes, never a revocation.
 */
async function keepFromReplaced(staged: string, replaced: Replaced | string | undefined, now: number): Promise<Kept> {
  if (typeof replaced === "string") return { signingKeys: 0, revocations: 0, unread: replaced };
  if (replaced === undefined) return { signingKeys: 0, revocations: 0 };
  const store = openLmdbFileForRestore(staged);
  const kept: Kept = { signingKeys: 0, revocations: 0 };
  try {
    const projects = new Set((await store.listProjects()).map((p) => p.id));
    for (const projectId of projects) {
      const set = replaced.keySets.get(projectId);
      const restored = await store.getKeySet(projectId);
      if (set === undefined) continue;
      const version = restored?.version ?? 0;
      const swap = async (next: KeySetRecord) => {
        if (!(await store.swapKeySet({ ...next, version: version + 1 }, version))) throw new Error(`the key set of project ${projectId} changed while it was restored`);
      };
      if (restored === undefined || lastPublished(set) > lastPublished(restored)) {
        await swap(set);
        kept.signingKeys++;
        // A set of format 2 (a retired key without its private half) makes a backup of format 1 such data.
        if (set.keys.some((k) => k.state === "retired" && k.sealedPrivateJwk === undefined) && (await store.getMeta<number>("format")) !== DATA_FORMAT) {
          await store.setMeta("format", DATA_FORMAT);
          kept.raisedFormat = true;
        }
        continue;
      }
      // The backup's set stays, less the retired keys revoked since (a leaked key stays out).
      const revoked = revokedSince(restored, set);
      if (revoked.length === 0) continue;
      await swap({ ...restored, keys: restored.keys.filter((k) => !revoked.includes(k)) });
      // One whose time in the JWKS is over left it as it would have anyway: not a revocation.
      kept.revocations += revoked.filter((k) => (k.removedFromJwksAt ?? Number.POSITIVE_INFINITY) > now).length;
    }
    const restoredKeys = new Map<string, ApiKeyRecord>();
    for (const projectId of projects) for (const key of await store.listApiKeys(projectId)) restoredKeys.set(key.id, key);
    for (const revoked of replaced.revokedApiKeys) {
      const key = restoredKeys.get(revoked.id);
      if (key === undefined || key.projectId !== revoked.projectId || key.revokedAt !== undefined) continue;
      await store.updateApiKey(revoked.projectId, revoked.id, (k) => ({ ...k, revokedAt: revoked.revokedAt }));
      kept.revocations++;
    }
    for (const revoked of replaced.revokedClients) {
      const client = await store.getClientById(revoked.projectId, revoked.id);
      const before = revoked.tokensRevokedBefore as number;
      if (client === undefined || (client.tokensRevokedBefore ?? 0) >= before) continue;
      await store.updateClient(client.projectId, client.providerId, client.id, (c) => ({ ...c, tokensRevokedBefore: Math.max(c.tokensRevokedBefore ?? 0, before) }));
      kept.revocations++;
    }
    const ofProjects = (entries: ExpiringEntry[]) => entries.filter((entry) => projects.has(entry.projectId));
    kept.revocations += await store.keepExpiring("revoked", ofProjects(replaced.revokedTokens), now);
    // Not a revocation, but what keeps an assertion used since the backup from being used again.
    await store.keepExpiring("jti", ofProjects(replaced.usedAssertions), now);
  } finally {
    await store.close();
  }
  return kept;
}
