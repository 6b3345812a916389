/**
 * @module startup
 * Opens everything a process needs, in an order that never damages data: the store, its format
 * check, the default project, the master key (verified against the data before any key is used),
 * the signing keys, and the bootstrap API key. Used by `serve` and by every CLI command; `serve`
 * asks for the caching store in front of the data (store/caching-store.ts).
 */
import type { Config } from "./config/schema.ts";
import { ensureBootstrapApiKey } from "./core/api-keys.ts";
import { ProjectDirectory } from "./core/project-directory.ts";
import { ensureDefaultProject, projectHostsClash, projectHostsProblem, recordServedSettings, servedSettings, type InstanceSettings } from "./core/projects.ts";
import type { AppContext, Clock } from "./context.ts";
import { KeyService } from "./keys/key-service.ts";
import { jwksMaxAge, MAX_JWKS_MAX_AGE_S } from "./keys/lifecycle.ts";
import { checkMasterKeySource, MasterKeyError, resolveMasterKey } from "./keys/master-key.ts";
import { createMasterKeyCheck, importMasterKey, verifyMasterKeyCheck } from "./keys/sealing.ts";
import { logSigners, SignerFactory } from "./keys/signers/factory.ts";
import type { Logger } from "./logging/logger.ts";
import { createServiceMetrics, processSources } from "./metrics/service-metrics.ts";
import { CachingStore } from "./store/caching-store.ts";
import { openLmdbStore } from "./store/lmdb/lmdb-store.ts";
import type { Store } from "./store/store.ts";

/**
 * Major version of the data format this build writes. Format 2: a retired signing key has no
 * private half (keys/lifecycle.ts), which a build of format 1 would take for a master key that
 * does not open it. Data of format 1 is read, and marked 2 by a server of this build once the
 * data passed its checks (`openContext`); until then every command of this build keeps to
 * format 1 (a retired key keeps its private half), so a server of an earlier build may still
 * run on it while the executable is replaced.
 */
export const DATA_FORMAT = 2;

/** The formats this build reads. */
export const READ_FORMATS: readonly number[] = [1, DATA_FORMAT];

/** Refuses (StartupError) data of a format this build does not read; `where` names the data. */
export function assertReadableFormat(format: number, where: string): void {
  if (!READ_FORMATS.includes(format)) throw new StartupError(`the data in ${where} has format ${format}; this build reads formats ${READ_FORMATS.join(" and ")}`);
}

/** A reason to refuse start-up, shown to the operator as one line. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StartupError";
  }
}

/** The format of the data in `store` (new data gets this build's); refuses one this build does not read. */
async function checkFormat(store: Store, dataDir: string): Promise<number> {
  const format = await store.initMeta("format", DATA_FORMAT);
  assertReadableFormat(format, dataDir);
  return format;
}

/**
 * Refuses (StartupError) data whose projects `instance` cannot serve: projects besides the
 * default one when it gives them no hosts (the base domain is an IP address), or two projects
 * at one host (settings changed since a custom domain or slug was set; core/projects.ts
 * projectHostsClash). Shared with `check`.
 */
export async function checkProjectHosts(store: Store, instance: InstanceSettings, dataDir: string): Promise<void> {
  const projects = await store.listProjects();
  const hosts = projectHostsProblem(instance);
  if (hosts !== undefined && projects.length > 1) throw new StartupError(`cannot serve the projects in ${dataDir}: ${hosts}`);
  const defaultProjectId = await store.getMeta<string>("defaultProjectId");
  const clash = projectHostsClash(projects, instance, defaultProjectId ?? "");
  if (clash !== undefined) {
    throw new StartupError(`cannot serve the projects in ${dataDir}: ${clash}; serve with the settings it was set under (TOKENMINT_PUBLIC_URL, TOKENMINT_BASE_DOMAIN) and change it first`);
  }
}

async function unlockMasterKey(store: Store, config: Config, logger: Logger): Promise<CryptoKey> {
  const existingCheck = await store.getMeta<string>("masterKeyCheck");
  const source = resolveMasterKey(config, existingCheck !== undefined);
  if (source.generated) {
    logger.warn("master key generated beside the data; keep a copy elsewhere and prefer TOKENMINT_MASTER_KEY_FILE or a systemd credential", {
      path: source.origin,
    });
  }
  if (source.looseMode !== undefined) {
    logger.warn("the master key file can be read or changed by other users; make it readable by the service only (chmod 600, or 640 for its group)", {
      path: source.origin,
      mode: source.looseMode.toString(8).padStart(4, "0"),
    });
  }
  const masterKey = await importMasterKey(source.raw);
  const check = existingCheck ?? (await store.initMeta("masterKeyCheck", await createMasterKeyCheck(masterKey)));
  if (!(await verifyMasterKeyCheck(masterKey, check))) {
    throw new MasterKeyError(`the master key from ${source.origin} does not match the signing keys in ${config.dataDir}; nothing was changed`);
  }
  return masterKey;
}

export interface OpenContextOptions {
  /**
   * Keep the token path's reads in memory (CachingStore): for the server, whose every request
   * checks the change counter first (keys/key-service.ts follow). CLI commands read once and
   * exit, so they read the data directly.
   */
  cache?: boolean;
  /**
   * Log which signer each algorithm uses (default true). Finding out loads libcrypto, so a server
   * says it once it answers (cli/serve.ts, cli/serve-primary.ts) and its workers leave it to their
   * primary: a worker loads libcrypto only once it holds an RS256 key, and one that signs only
   * ES256 or EdDSA never maps it.
   */
  announceSigners?: boolean;
  /**
   * When RS256 keys move to libcrypto (default `now`, as they are made). `deferred`: they sign
   * with the built-in signer, byte for byte the same, until `ctx.signers.handOver()`, which a
   * server calls once it listens, so that loading libcrypto (about 15 ms) does not delay its
   * first answer. `never`: the process signs no token (a server's primary) and does not load it.
   */
  libcrypto?: "now" | "deferred" | "never";
  /**
   * Bring the signing keys up to this process's settings at start (a missed rotation, a new
   * algorithm; default true). CLI commands say false, so that reading or managing API keys never
   * changes signing keys: their settings may differ from the server's.
   */
  maintainKeys?: boolean;
  /**
   * Load every project's key ring (default true). False: key sets are created where missing,
   * and no ring is loaded until it is used (`keys.load`, or a rotation or revocation of its
   * set): a server's primary signs nothing, and a CLI command needs one ring at most. Unsealing
   * every key would only delay them (with 2,000 projects a command took 0.25 s, 0.08 s without).
   */
  loadKeys?: boolean;
}

/**
 * Builds the AppContext for `config`. On failure the store is closed again and the error
 * (StartupError, MasterKeyError) carries a message fit for one line on stderr.
 */
export async function openContext(config: Config, logger: Logger, clock: Clock, options: OpenContextOptions = {}): Promise<AppContext> {
  // A master key that cannot be used stops start-up before the data is opened (or created).
  checkMasterKeySource(config);
  let store: Store;
  try {
    const data = openLmdbStore(config.dataDir);
    store = options.cache === true ? new CachingStore(data) : data;
  } catch (error) {
    throw new StartupError(`cannot open the data directory ${config.dataDir}: ${(error as Error).message}`);
  }
  try {
    let format = await checkFormat(store, config.dataDir);
    const projectId = await ensureDefaultProject(store, clock.now());
    const masterKey = await unlockMasterKey(store, config, logger);
    // A server resolves projects with its own instance settings; a CLI command with those of the
    // server that last started on the data, and with its own only until one has.
    const maintain = options.maintainKeys !== false;
    const served = maintain ? undefined : await servedSettings(store);
    const instance: InstanceSettings = served ?? config;
    await checkProjectHosts(store, instance, config.dataDir);
    // A server marks data of format 1 as 2 once it passed every check, before any key pass: from
    // then on builds of format 1 refuse it. A command never does (see DATA_FORMAT).
    if (maintain && format !== DATA_FORMAT) {
      await store.setMeta("format", DATA_FORMAT);
      logger.info("data format upgraded", { from: format, to: DATA_FORMAT });
      format = DATA_FORMAT;
    }
    const signers = new SignerFactory({
      mode: options.libcrypto === "never" ? "builtin" : config.signer,
      logger,
      deferLibcrypto: options.libcrypto === "deferred",
    });
    if (options.announceSigners !== false) await logSigners(logger, signers);
    // A new project's hosts are served once its key ring is loaded: the directory learns of it
    // first (the key service reads its settings there), then the key service loads its keys.
    const projects = new ProjectDirectory(store, instance, projectId, (id) => keys.has(id));
    // Read before the projects and keys are: a write made meanwhile moves them on, and is read again.
    const asOf = { seq: store.changeSeqNow?.(), keysSeq: await store.keysChangeSeq() };
    await projects.refresh();
    const keys = new KeyService({
      store,
      masterKey,
      now: () => clock.now(),
      elapsed: clock.elapsed?.bind(clock),
      logger,
      signingAlg: instance.signingAlg,
      rotationPeriod: instance.keyRotationPeriod,
      policy: (id) => {
        const project = projects.get(id);
        return { signingAlg: project.signingAlg, rotationPeriod: project.keyRotationPeriod };
      },
      projects: async (written) => {
        if (written === undefined) await projects.refresh();
        else await projects.refreshOnly(written);
        return projects.ids;
      },
      signers,
      maintainOnLoad: options.maintainKeys,
      keepRetiredPrivateHalves: format !== DATA_FORMAT,
      // A CLI command on data no server has started on yet does not know the server's instance
      // settings. Where a project's rotation period comes from them, the server may serve its
      // JWKS with any max-age up to the bound, so a manual rotation waits that long after the
      // next key was published.
      rotationWait:
        !maintain && served === undefined
          ? (id) => {
              const project = projects.get(id);
              return project.ownKeyRotationPeriod ? jwksMaxAge(project.keyRotationPeriod) : MAX_JWKS_MAX_AGE_S;
            }
          : undefined,
    });
    if (options.loadKeys === false) await keys.createMissing(projects.ids);
    else {
      await keys.loadAll(projects.ids);
      keys.loadedAsOf(asOf);
    }
    if (maintain) await recordServedSettings(store, config);
    if (config.bootstrapApiKey !== undefined && (await ensureBootstrapApiKey(store, projectId, config.bootstrapApiKey, clock.now()))) {
      logger.info("bootstrap API key registered");
    }
    const metrics = createServiceMetrics({ ...processSources(), keyStatus: () => keys.status(projectId), now: () => clock.now() });
    return { config, instance, logger, store, keys, signers, projects, clock, metrics, projectId, draining: false };
  } catch (error) {
    // What failed is what is reported, not a close that then fails too (after a commit lmdb failed).
    await store.close().catch(() => undefined);
    throw error;
  }
}
