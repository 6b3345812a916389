/**
 * @module cli/serve
 * `tokenmint serve` in one process: listens, runs the key timer and the cache poll, and on
 * SIGTERM/SIGINT/SIGHUP stops accepting, lets in-flight requests finish (new ones on open connections
 * get 503), closes the store, exits 0. With TOKENMINT_METRICS_PORT it also serves `GET /metrics`
 * on a second listener; with TOKENMINT_LOG_FILE it deletes expired daily log files at start-up
 * and hourly, and flushes the log before it returns. Expired token revocations and used
 * assertion ids are pruned at start-up and every few minutes.
 *
 * With TOKENMINT_WORKERS above 1, each worker runs the same loop (`serveWorker`) on the shared
 * port, while its primary (serve-primary.ts) holds the lock, the metrics listener and the log
 * retention. A worker also stops when its primary goes away.
 */
import { buildFetch } from "../app.ts";
import type { Config } from "../config/schema.ts";
import type { AppContext } from "../context.ts";
import { startExpiryPruning } from "../core/oauth/expiry-pruning.ts";
import { logSigners } from "../keys/signers/factory.ts";
import { startLogRetention } from "../logging/retention.ts";
import type { Logger } from "../logging/logger.ts";
import { metricsHandler } from "../metrics/endpoint.ts";
import { finishesWithin } from "../runtime/finishes-within.ts";
import { StartupError } from "../startup.ts";
import { CachingStore } from "../store/caching-store.ts";
import { COMMIT, VERSION } from "../version.ts";
import { stopSignal } from "./stop-signal.ts";
import { isWorkerMessage, METRICS_REPORT_MS, type WorkerMessage } from "./worker-ipc.ts";

/** Longest wait for in-flight requests at shutdown. */
export const DRAIN_TIMEOUT_MS = 10_000;
/**
 * How long the listener stays open after a signal, answering 503. Connections the kernel
 * accepted before the signal but the event loop has not read yet would be reset if the listener
 * closed at once; this lets them in so their requests get an answer.
 */
const ACCEPT_GRACE_MS = 100;
/**
 * How long after it listens a server keeps signing RS256 with the built-in signer before libcrypto
 * takes over (startup.ts, `libcrypto`): loading it holds the event loop for about 15 ms, which
 * would otherwise fall on the first answers, a readiness probe's among them.
 */
const HAND_OVER_DELAY_MS = 100;
/**
 * The runtime's limit on a request body (1 TiB): past any body a client sends, so that its empty
 * 413 is never the answer. The runtime does not buffer a body nobody reads: the socket holds it.
 */
const MAX_RUNTIME_BODY_BYTES = 2 ** 40;

/** Serves until a signal arrives; resolves with the exit code. The caller holds the data directory's lock. */
export async function serve(ctx: AppContext): Promise<number> {
  try {
    return await runServer(ctx, { worker: false });
  } finally {
    ctx.logger.flush?.();
  }
}

/**
 * Serves as a worker of a primary: on the shared port, without lock, metrics listener or log
 * retention. Answers the primary's metrics requests and, in a second in which it answered
 * requests, reports its metrics unasked (else that it is alive); stops on a signal or when the
 * primary is gone.
 */
export async function serveWorker(ctx: AppContext): Promise<number> {
  const send = (message: WorkerMessage) => process.send?.(message);
  const onMessage = (message: unknown) => {
    if (isWorkerMessage(message) && message.type === "metrics") send({ type: "metrics", id: message.id, text: ctx.metrics.render() });
  };
  process.on("message", onMessage);
  // Unasked too, so the primary keeps what this worker counted should it die between scrapes;
  // only when it answered requests since (every count and histogram moves with them).
  let reported = 0;
  const report = setInterval(() => {
    const answered = ctx.metrics.httpRequests.total();
    // Either way the primary hears from this worker each second: it kills one that falls silent.
    if (answered === reported) return void send({ type: "alive" });
    reported = answered;
    send({ type: "metrics", id: 0, text: ctx.metrics.render() });
  }, METRICS_REPORT_MS);
  const orphaned = new Promise<string>((resolve) => process.once("disconnect", () => resolve("primary gone")));
  try {
    return await runServer(ctx, { worker: true, stop: orphaned, onListening: () => send({ type: "ready" }) });
  } finally {
    clearInterval(report);
    process.off("message", onMessage);
    ctx.logger.flush?.();
  }
}

/** At debug level, the settings a server runs with, beyond those its start line names (never a secret). */
export function logSettings(logger: Logger, config: Config): void {
  const { publicUrl, baseDomain, dataDir, keyRotationPeriod, workers, maxBodyBytes, metricsHost, logFile, logRetentionDays, signer } = config;
  logger.debug("settings", { publicUrl, baseDomain, dataDir, keyRotationPeriod, workers, maxBodyBytes, metricsHost, logFile, logRetentionDays, signer });
}

/** Bun.serve's options without the address. */
export type ListenOptions = Omit<Parameters<typeof Bun.serve>[0], "hostname" | "port">;

/**
 * Binds a listener; a failure becomes a one-line StartupError (naming the metrics listener when it
 * is that one). Without SO_REUSEPORT unless `options` asks for it (a worker): Bun binds with it
 * when `reusePort` is left out beside `development: false`, and such a bind shares a port that
 * another server's workers hold instead of failing.
 */
export function listen(which: "api" | "metrics", host: string, port: number, options: ListenOptions): ReturnType<typeof Bun.serve> {
  try {
    return Bun.serve({ reusePort: false, ...options, hostname: host, port } as Parameters<typeof Bun.serve>[0]);
  } catch (error) {
    const code = (error as { code?: string }).code;
    const hint = which === "api" ? "is another tokenmint serving this data?" : "TOKENMINT_METRICS_PORT";
    throw new StartupError(
      code === "EADDRINUSE" ? `${host}:${port} is already in use (${hint})` : `cannot listen on ${host}:${port}${which === "api" ? "" : " (metrics)"}: ${(error as Error).message}`,
    );
  }
}

/**
 * Binds and closes the API listener and the metrics listener, so a bad host or a busy port stops
 * start-up before the data directory is opened: a new one is not initialised for a server that
 * cannot listen. The real binds still report what changes in between.
 */
export async function checkListeners(config: Pick<Config, "host" | "port" | "metricsHost" | "metricsPort">): Promise<void> {
  await probeListener("api", config.host, config.port);
  if (config.metricsPort !== undefined) await probeListener("metrics", config.metricsHost, config.metricsPort);
}

/**
 * Claims `host:port` among the tokenmint servers of this machine for as long as this process runs:
 * a Linux abstract socket named after them, which the kernel frees when the process ends, however
 * it ends. Workers bind with SO_REUSEPORT, which shares a port with another server's workers
 * instead of failing; of two servers started in the same instant both pass the plain bind of
 * `probeListener`, but only one makes this claim. Undefined where it cannot be made (not Linux, a
 * sandbox without Unix sockets): the plain bind's check stands alone there.
 */
export function claimPort(host: string, port: number): { release: () => void } | undefined {
  if (process.platform !== "linux") return undefined;
  try {
    // Named with the user too: abstract names carry no permissions, and a server of another user
    // could not share the port anyway (SO_REUSEPORT takes one user), so no one else can block it.
    const claim = Bun.listen({ unix: `\0tokenmint-listen-${process.getuid?.() ?? 0}-${host.toLowerCase()}:${port}`, socket: { open: (socket) => void socket.end(), data: () => {} } });
    return { release: () => claim.stop(true) };
  } catch (error) {
    if ((error as { code?: string }).code === "EADDRINUSE") throw new StartupError(`${host}:${port} is already in use by another tokenmint server`);
    return undefined;
  }
}

/** Binds `host:port` plainly (no SO_REUSEPORT) and closes it: throws, as `listen` does, when it cannot. */
export async function probeListener(which: "api" | "metrics", host: string, port: number): Promise<void> {
  await listen(which, host, port, { fetch: () => new Response(null, { status: 503 }), development: false }).stop(true);
}

interface ServerRole {
  /** A worker shares the port (SO_REUSEPORT); the metrics listener and log retention are its primary's. */
  worker: boolean;
  /** Another reason to stop than a signal. */
  stop?: Promise<string>;
  /** Called once the API listener is bound. */
  onListening?: () => void;
}

/**
 * Moves RS256 keys from the built-in signer to libcrypto (startup.ts, `libcrypto`); then a single
 * process says which signers the machine uses (a worker's primary says it for the instance).
 */
async function handOverSigners(ctx: AppContext, worker: boolean): Promise<void> {
  await ctx.signers.handOver();
  if (!worker) await logSigners(ctx.logger, ctx.signers);
}

async function runServer(ctx: AppContext, role: ServerRole): Promise<number> {
  const stopping = Promise.race([stopSignal(), ...(role.stop === undefined ? [] : [role.stop])]);
  const { fetch } = buildFetch(ctx);
  const { host, port, metricsHost, metricsPort, logFile, logRetentionDays } = ctx.config;
  const server = listen("api", host, port, {
    // The runtime's own 413 has no body: its limit is set past any body, so every body over
    // TOKENMINT_MAX_BODY_BYTES gets the contract's JSON 413 from the body parser, which reads no
    // more than that limit and one piece of a body (an unread body waits in the socket).
    maxRequestBodySize: MAX_RUNTIME_BODY_BYTES,
    fetch,
    development: false,
    reusePort: role.worker,
  });
  let metricsServer: ReturnType<typeof Bun.serve> | undefined;
  if (metricsPort !== undefined && !role.worker) {
    const handler = metricsHandler(() => ctx.metrics.render());
    try {
      metricsServer = listen("metrics", metricsHost, metricsPort, { maxRequestBodySize: 64 * 1024, fetch: handler, development: false });
    } catch (error) {
      await server.stop(true);
      throw error;
    }
  }
  ctx.keys.start();
  if (ctx.store instanceof CachingStore) ctx.store.start();
  if (role.worker) ctx.logger.info("worker started", { pid: process.pid });
  else {
    ctx.logger.info("tokenmint started", { version: VERSION, commit: COMMIT, host, port, metricsPort, alg: ctx.config.signingAlg, store: ctx.store.description });
    logSettings(ctx.logger, ctx.config);
  }
  role.onListening?.();
  let handingOver: Promise<void> | undefined;
  const handOver = setTimeout(() => (handingOver = handOverSigners(ctx, role.worker)), HAND_OVER_DELAY_MS);
  // Expired daily log files go at start-up, then hourly.
  const stopRetention =
    logFile === undefined || role.worker ? () => {} : startLogRetention({ logFile, retentionDays: logRetentionDays, now: () => ctx.clock.now(), logger: ctx.logger });
  // Every worker prunes: the passes are short transactions, and a worker that finds nothing left is done.
  const stopPruning = startExpiryPruning({ store: ctx.store, now: () => ctx.clock.now(), logger: ctx.logger });

  const signal = await stopping;
  ctx.logger.info("shutting down", { signal });
  ctx.draining = true;
  clearTimeout(handOver);
  await handingOver;
  // The timer stops now; a pass or catch-up already running finishes before the store closes,
  // within the drain's time (the stop as a whole stays within the unit's TimeoutStopSec).
  const keysStopped = ctx.keys.stop();
  const keysBy = performance.now() + DRAIN_TIMEOUT_MS;
  stopRetention();
  await stopPruning();
  await Bun.sleep(ACCEPT_GRACE_MS);
  if (!(await finishesWithin(server.stop(false), DRAIN_TIMEOUT_MS))) {
    ctx.logger.warn("in-flight requests did not finish in time; closing connections", { timeoutMs: DRAIN_TIMEOUT_MS });
    await server.stop(true);
  }
  await metricsServer?.stop(true);
  if (!(await finishesWithin(keysStopped, Math.max(0, keysBy - performance.now())))) {
    ctx.logger.warn("key maintenance did not finish in time; closing the store", { timeoutMs: DRAIN_TIMEOUT_MS });
  }
  try {
    await ctx.store.close();
  } catch (error) {
    // Said in the log too, not only on stderr (where the caller reports it).
    ctx.logger.error("the store did not close", { error: (error as Error).message });
    throw error;
  }
  ctx.logger.info("stopped");
  return 0;
}
