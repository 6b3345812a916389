/**
 * @module cli/run
 * What the process runs (imported by main.ts after the load guard): parses the command line,
 * loads settings, builds the context, runs the command, and turns every failure into one line on
 * stderr and a non-zero exit code.
 */
import { join } from "node:path";
import { apiKeyCreateInput, apikeysCommand } from "./apikeys.ts";
import { checkArity, parseArgs, UsageError, type ParsedArgs } from "./args.ts";
import { backupCommand } from "./backup.ts";
import { checkCommand } from "./check.ts";
import { HELP } from "./help.ts";
import { endLoadGuard } from "./load-guard.ts";
import { keysCommand } from "./keys.ts";
import { noProject, projectCreateInput, projectsCommand } from "./projects.ts";
import { writeAll, type Output } from "./output.ts";
import { restoreCommand } from "./restore.ts";
import { checkListeners, claimPort, serve, serveWorker } from "./serve.ts";
import { stopSignal } from "./stop-signal.ts";
import { lockDataDir } from "./serve-lock.ts";
import { servePrimary } from "./serve-primary.ts";
import { awaitGo, workerNumber } from "./worker-ipc.ts";
import { ConfigError, loadConfig } from "../config/load.ts";
import { systemClock } from "../context.ts";
import { DEFAULT_PROJECT_SLUG, projectHostsProblem } from "../core/projects.ts";
import { AppError } from "../errors.ts";
import { MasterKeyError } from "../keys/master-key.ts";
import { createLogger, createServiceLogger, withFields } from "../logging/logger.ts";
import { openContext, StartupError } from "../startup.ts";
import { dataFileExists, LMDB_FILE } from "../store/lmdb/lmdb-store.ts";
import { StoreError, type Store } from "../store/store.ts";
import { COMMIT, VERSION } from "../version.ts";

// Every module has loaded: from here on, failures are reported by run and reason below.
endLoadGuard();

const io: Output = {
  out: (text) => writeAll(1, `${text}\n`),
  err: (text) => writeAll(2, `${text}\n`),
};

/** Commands on the data files themselves: they never open the context (it would create data or rotate keys). */
const FILE_COMMANDS: Readonly<Record<string, typeof checkCommand>> = { backup: backupCommand, restore: restoreCommand, check: checkCommand };
const COMMANDS = new Set(["serve", "apikeys", "keys", "projects", ...Object.keys(FILE_COMMANDS)]);

async function run(args: ParsedArgs): Promise<number> {
  const command = args.words[0];
  if (args.switches.has("--version")) {
    io.out(`tokenmint ${VERSION} (${COMMIT})`);
    return 0;
  }
  if (command === undefined || args.switches.has("--help") || command === "help") {
    io.out(HELP[command !== undefined && COMMANDS.has(command) ? command : "main"] as string);
    if (command !== undefined || args.switches.has("--help")) return 0;
    io.err("tokenmint: usage error: no command given; see 'tokenmint --help'");
    return 2;
  }
  if (!COMMANDS.has(command)) throw new UsageError(`unknown command '${command}'; see 'tokenmint --help'`);
  checkArity(args);
  const config = loadConfig(process.env, args.values);
  const fileCommand = FILE_COMMANDS[command];
  if (fileCommand !== undefined) {
    await fileCommand(config, args, io, systemClock);
    return 0;
  }
  // A server's signal handlers are in place (cli/stop-signal.ts installs them as the program loads): a
  // signal during start-up stops it, with exit 0, once started.
  if (command === "serve") stopSignal();
  const worker = command === "serve" ? workerNumber(process.env) : undefined;
  const baseLogger =
    command === "serve"
      ? createServiceLogger(config)
      : createLogger(config.logLevel === "debug" ? "debug" : "warn", (line) => process.stderr.write(line));
  // A worker's lines name it; the primary's and a single process's do not.
  const logger = worker === undefined ? baseLogger : withFields(baseLogger, { worker });
  if (command === "serve" && worker === undefined) {
    // A server that cannot listen, or whose data another server holds, stops before it opens
    // (let alone initialises or changes) the data.
    const port = claimPort(config.host, config.port);
    try {
      await checkListeners(config);
      const lock = lockDataDir(config.dataDir);
      try {
        if (config.workers > 1) return await servePrimary(config, logger, systemClock);
        const ctx = await openContext(config, logger, systemClock, { cache: true, announceSigners: false, libcrypto: "deferred" });
        return await thenClose(ctx.store, () => serve(ctx));
      } finally {
        lock.release();
      }
    } finally {
      port?.release();
    }
  }
  // What can be checked without the data is checked before the data directory is opened.
  if (command === "apikeys" && args.words[1] === "create") apiKeyCreateInput(args);
  const hasData = dataFileExists(join(config.dataDir, LMDB_FILE));
  if (command === "projects" && args.words[1] === "create") {
    // A custom domain is judged by the settings of the server that runs on the data: on data that
    // exists, those are read once it is open (projectsCommand checks the whole input again then).
    const { "--custom-domain": _judgedLater, ...values } = args.values;
    projectCreateInput(hasData ? { ...args, values } : args, config, systemClock.now());
    // On new data the settings are this command's: projects they give no host are refused before it is made.
    const hosts = hasData ? undefined : projectHostsProblem(config);
    if (hosts !== undefined) throw new AppError("invalid_request", `Cannot create a project: ${hosts}.`);
  }
  // A create for a project new data cannot hold yet (any but the default one) is refused before the data is made.
  const wanted = args.values["--project"];
  if (!hasData && args.words[1] === "create" && wanted !== undefined && wanted.toLowerCase() !== DEFAULT_PROJECT_SLUG) throw noProject(wanted);
  // Only serve and the create commands start a new data directory: a list, revoke or rotate on a
  // mistyped --data-dir must not leave a fresh instance behind.
  if (command !== "serve" && args.words[1] !== "create" && !hasData) {
    throw new AppError("not_found", `no data yet in ${config.dataDir}; start the server or create an API key or project first`);
  }
  // A worker loaded while its primary checked the data; it opens the data once the primary is done.
  if (worker !== undefined && !(await awaitGo())) return 0;
  // A worker's primary says which signers this machine uses; a CLI command says it at debug level.
  const announceSigners = command === "serve" ? false : config.logLevel === "debug";
  const ctx = await openContext(config, logger, systemClock, {
    cache: command === "serve",
    announceSigners,
    maintainKeys: command === "serve",
    // A command loads the one key ring it uses, if any, when it uses it.
    loadKeys: command === "serve",
    libcrypto: command === "serve" ? "deferred" : "now",
  });
  return thenClose(ctx.store, async () => {
    if (command === "serve") return serveWorker(ctx);
    if (command === "apikeys") await apikeysCommand(ctx, args, io);
    else if (command === "projects") await projectsCommand(ctx, args, io);
    else await keysCommand(ctx, args, io);
    return 0;
  });
}

/**
 * Runs `body`, then closes the store. When `body` fails, that failure is the one reported: a
 * store that then cannot close either (after a commit lmdb failed) does not hide it.
 */
async function thenClose<T>(store: Store, body: () => Promise<T>): Promise<T> {
  let result: T;
  try {
    result = await body();
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
  await store.close();
  return result;
}

/** One line for the operator; never a stack trace. */
function reason(error: unknown): { text: string; code: number } {
  if (error instanceof UsageError) return { text: `usage error: ${error.message}`, code: 2 };
  if (error instanceof ConfigError) return { text: `invalid settings: ${error.problems.join("; ")}`, code: 1 };
  if (error instanceof MasterKeyError || error instanceof StartupError) return { text: error.message, code: 1 };
  if (error instanceof AppError || error instanceof StoreError) return { text: error.message, code: 1 };
  return { text: `unexpected failure: ${(error as Error)?.message ?? String(error)}`, code: 1 };
}

try {
  process.exitCode = await run(parseArgs(process.argv.slice(2)));
} catch (error) {
  const { text, code } = reason(error);
  // A worker's line names it, as its log lines do: the primary logs only that it exited.
  const worker = workerNumber(process.env);
  io.err(`tokenmint: ${worker === undefined ? "" : `worker ${worker}: `}${text}`);
  process.exitCode = code;
}
process.exit();
