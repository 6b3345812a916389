/**
 * @module cli/check
 * `tokenmint check`: validates the settings, opens the data read-only, verifies its format and
 * that the configured master key opens every sealed signing key, and reports the default
 * project's keys, with the rotation period and issuer of the last server to start on the data.
 * It writes nothing: no master key is generated, no data file is created. `inspectData` and
 * `openExistingData` are shared with `backup` and `restore`.
 */
import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import type { Clock } from "../context.ts";
import { resolveProject, servedSettings, type ResolvedProject } from "../core/projects.ts";
import { AppError } from "../errors.ts";
import { logFileProblem } from "../logging/file-sink.ts";
import { logFileError } from "../logging/logger.ts";
import { keyView } from "../http/views.ts";
import { keyViews } from "../keys/key-service.ts";
import { jwksMaxAge, keysByState, scheduledRotationAt } from "../keys/lifecycle.ts";
import { MasterKeyError, resolveMasterKey } from "../keys/master-key.ts";
import { importMasterKey, privateKeyAad, unseal, verifyMasterKeyCheck } from "../keys/sealing.ts";
import { assertReadableFormat, checkProjectHosts, StartupError } from "../startup.ts";
import { dataFilesProblem, LMDB_FILE, openLmdbFileReadOnly, type LmdbStore } from "../store/lmdb/lmdb-store.ts";
import type { KeySetRecord, Store } from "../store/store.ts";
import { UsageError, type ParsedArgs } from "./args.ts";
import { iso, type Output } from "./output.ts";
import { liveServer, SERVE_LOCK_FILE } from "./serve-lock.ts";

/** What `inspectData` found. */
export interface DataReport {
  format: number;
  /** The default project; undefined while the data holds no project yet. */
  projectId?: string;
  /**
   * Its settings, resolved as the last server to start on the data did (with these settings
   * until one has); undefined while the data holds no project yet.
   */
  project?: ResolvedProject;
  /** Its key set; undefined while it has no keys yet. */
  keySet?: KeySetRecord;
  /** Where the master key came from (never the key), and how many sealed keys it opened. */
  masterKey?: { origin: string; opened: number; looseMode?: number };
}

/**
 * Opens the data file of `dataDir` read-only. Fails (exit 1) with "no data yet in DIR" when there
 * is none, and creates nothing.
 */
export function openExistingData(dataDir: string): LmdbStore {
  try {
    return openLmdbFileReadOnly(join(dataDir, LMDB_FILE));
  } catch (error) {
    if ((error as { kind?: string }).kind === "not_found") throw new AppError("not_found", `no data yet in ${dataDir}`);
    throw error;
  }
}

/**
 * Reads `store` (described as `where` in messages) and checks it without writing: the data format
 * this build reads, and that the configured master key (never generated here) matches the check
 * value and unseals every signing key of every project.
 */
export async function inspectData(store: Store, config: Config, where: string): Promise<DataReport> {
  const format = await store.getMeta<number>("format");
  if (format === undefined) throw new AppError("invalid_request", `${where} holds no tokenmint data`);
  assertReadableFormat(format, where);
  const projectId = await store.getMeta<string>("defaultProjectId");
  const record = projectId === undefined ? undefined : await store.getProject(projectId);
  const project = record === undefined ? undefined : resolveProject(record, (await servedSettings(store)) ?? config, record.id);
  const keySet = projectId === undefined ? undefined : await store.getKeySet(projectId);
  const check = await store.getMeta<string>("masterKeyCheck");
  if (check === undefined) return { format, projectId, project, keySet };

  const source = resolveMasterKey(config, true, where);
  const masterKey = await importMasterKey(source.raw);
  if (!(await verifyMasterKeyCheck(masterKey, check))) {
    throw new MasterKeyError(`the master key from ${source.origin} does not match the signing keys in ${where}; nothing was changed`);
  }
  let opened = 0;
  for (const project of await store.listProjects()) {
    for (const key of (await store.getKeySet(project.id))?.keys ?? []) {
      // A retired key's private half was dropped when it retired; the keys that may sign keep theirs.
      if (key.sealedPrivateJwk === undefined) {
        if (key.state === "retired") continue;
        throw new StartupError(`the ${key.state} signing key ${key.kid} in ${where} has no private half`);
      }
      await unseal(masterKey, key.sealedPrivateJwk, privateKeyAad(project.id, key.kid)).catch(() => {
        throw new MasterKeyError(`the master key from ${source.origin} does not open signing key ${key.kid} in ${where}`);
      });
      opened++;
    }
  }
  return { format, projectId, project, keySet, masterKey: { origin: source.origin, opened, ...(source.looseMode === undefined ? {} : { looseMode: source.looseMode }) } };
}

/** Why a server of this user could not write in `dataDir` (its serve.pid, data file or LMDB lock file), or undefined. */
function serverAccessProblem(dataDir: string): string | undefined {
  try {
    accessSync(dataDir, constants.W_OK | constants.X_OK);
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    return code === "EROFS" ? `${dataDir} is on a read-only file system` : `${dataDir} cannot be written by this user (the server writes ${SERVE_LOCK_FILE} there)`;
  }
  return dataFilesProblem(dataDir);
}

export async function checkCommand(config: Config, args: ParsedArgs, io: Output, clock: Clock): Promise<void> {
  if (args.words.length > 1) throw new UsageError("usage: tokenmint check [--json]");
  // What serve would refuse when it opens its log files, found without creating them.
  const logProblem = config.logFile === undefined ? undefined : logFileProblem(config.logFile, clock.now());
  if (logProblem !== undefined) throw logFileError(config.logFile as string, logProblem);
  const { dataDir } = config;
  const store = openExistingData(dataDir);
  // What serve needs beyond reading: to write its lock, the data and LMDB's reader table.
  const access = serverAccessProblem(dataDir);
  if (access !== undefined) {
    await store.close();
    throw new StartupError(`cannot open the data directory ${dataDir}: ${access}`);
  }
  let report: DataReport;
  try {
    report = await inspectData(store, config, dataDir);
    // As at the start of a server with these settings: projects need a base domain for their hosts.
    await checkProjectHosts(store, config, dataDir);
  } finally {
    await store.close();
  }
  const { project, keySet, masterKey } = report;
  if (project === undefined || keySet === undefined || masterKey === undefined) throw new AppError("not_found", `the data in ${dataDir} has no signing keys yet; start the server once`);
  // What serve warns of at start-up, check says too.
  const looseMode = masterKey.looseMode?.toString(8).padStart(4, "0");
  if (looseMode !== undefined) {
    io.err(`tokenmint: warning: the master key file ${masterKey.origin} (mode ${looseMode}) can be read or changed by other users; make it readable by the service only (chmod 600, or 640 for its group)`);
  }

  const dataFile = join(dataDir, LMDB_FILE);
  const bytes = statSync(dataFile).size;
  const server = liveServer(dataDir);
  const { keyRotationPeriod: period, ownKeyRotationPeriod, issuer } = project;
  const nextRotation = scheduledRotationAt(keySet, period, jwksMaxAge(period));
  const { current, next, retired } = keysByState(keySet);

  if (args.switches.has("--json")) {
    io.out(
      JSON.stringify({
        ok: true,
        dataDir,
        dataFile,
        format: report.format,
        bytes,
        masterKey: { source: masterKey.origin, signingKeys: masterKey.opened, ...(looseMode === undefined ? {} : { mode: looseMode }) },
        server: server === undefined ? null : { pid: server },
        projectId: report.projectId,
        issuer,
        currentKid: current.kid,
        nextRotation: nextRotation === undefined ? null : iso(nextRotation),
        keys: keyViews(keySet, nextRotation).map(keyView),
      }),
    );
    return;
  }
  const due = nextRotation !== undefined && nextRotation <= clock.now() ? " (due: the server rotates at its next start or tick)" : "";
  const rows: [string, string][] = [
    ["settings", "valid"],
    ["data", `${dataFile} (format ${report.format}, ${bytes} bytes)`],
    ["master key", `${masterKey.origin} opens all ${masterKey.opened} sealed private keys`],
    ["server", server === undefined ? "not running" : `running (pid ${server})`],
    ["issuer", issuer],
    ["current key", `${current.kid} (${current.alg}, signing since ${iso(current.activatesAt)})`],
    ["next key", `${next.kid} (${next.alg}, published ${iso(next.createdAt)})`],
    ["retired keys", String(retired.length)],
    ["next rotation", nextRotation === undefined ? `off (${ownKeyRotationPeriod ? "the project's keyRotationPeriod" : "TOKENMINT_KEY_ROTATION_PERIOD"} is 0)` : `${iso(nextRotation)}${due}`],
  ];
  io.out(["tokenmint check: ok", ...rows.map(([name, value]) => `  ${name.padEnd(14)}${value}`)].join("\n"));
}
