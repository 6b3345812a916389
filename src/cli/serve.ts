/**
 * @module cli/serve
 * `tokenmint serve`: listens, runs the key timer, and on SIGTERM/SIGINT stops accepting, lets
 * in-flight requests finish (new ones on open connections get 503), closes the store, exits 0.
 * With TOKENMINT_METRICS_PORT it also serves `GET /metrics` on a second listener; with
 * TOKENMINT_LOG_FILE it deletes expired daily log files at start-up and hourly, and flushes the
 * log before it returns. Expired token revocations are pruned at start-up and every few minutes.
 */
import { buildApp } from "../app.ts";
import type { AppContext } from "../context.ts";
import { startRevocationPruning } from "../core/oauth/revocation-pruning.ts";
import { startLogRetention } from "../logging/retention.ts";
import { metricsHandler } from "../metrics/endpoint.ts";
import { StartupError } from "../startup.ts";
import { COMMIT, VERSION } from "../version.ts";
import { acquireServeLock } from "./serve-lock.ts";

/** Longest wait for in-flight requests at shutdown. */
const DRAIN_TIMEOUT_MS = 10_000;
/**
 * How long the listener stays open after a signal, answering 503. Connections the kernel
 * accepted before the signal but the event loop has not read yet would be reset if the listener
 * closed at once; this lets them in so their requests get an answer.
 */
const ACCEPT_GRACE_MS = 100;

/** Serves until a signal arrives; resolves with the exit code. */
export async function serve(ctx: AppContext): Promise<number> {
  const { dataDir } = ctx.config;
  const lock = acquireServeLock(dataDir);
  if ("heldBy" in lock) throw new StartupError(`another tokenmint server (pid ${lock.heldBy}) is serving the data directory ${dataDir}`);
  try {
    return await serveLocked(ctx);
  } finally {
    lock.release();
    ctx.logger.flush?.();
  }
}

/** Bun.serve's options without the address. */
type ListenOptions = Omit<Parameters<typeof Bun.serve>[0], "hostname" | "port">;

/** Binds a listener; a failure becomes a one-line StartupError (naming the metrics listener when it is that one). */
function listen(which: "api" | "metrics", host: string, port: number, options: ListenOptions): ReturnType<typeof Bun.serve> {
  try {
    return Bun.serve({ ...options, hostname: host, port } as Parameters<typeof Bun.serve>[0]);
  } catch (error) {
    const code = (error as { code?: string }).code;
    const hint = which === "api" ? "is another tokenmint serving this data?" : "TOKENMINT_METRICS_PORT";
    throw new StartupError(
      code === "EADDRINUSE" ? `${host}:${port} is already in use (${hint})` : `cannot listen on ${host}:${port}${which === "api" ? "" : " (metrics)"}: ${(error as Error).message}`,
    );
  }
}

async function serveLocked(ctx: AppContext): Promise<number> {
  const app = buildApp(ctx);
  const { host, port, metricsHost, metricsPort, logFile, logRetentionDays } = ctx.config;
  const server = listen("api", host, port, {
    // Our own parser answers 413 with the JSON body; this only caps what Bun buffers.
    maxRequestBodySize: Math.max(ctx.config.maxBodyBytes * 4, 1 << 20),
    fetch: (request) => app.handle(request),
    development: false,
  });
  let metricsServer: ReturnType<typeof Bun.serve> | undefined;
  if (metricsPort !== undefined) {
    const handler = metricsHandler(() => ctx.metrics.render());
    try {
      metricsServer = listen("metrics", metricsHost, metricsPort, { maxRequestBodySize: 64 * 1024, fetch: handler, development: false });
    } catch (error) {
      await server.stop(true);
      throw error;
    }
  }
  ctx.keys.start();
  ctx.logger.info("tokenmint started", { version: VERSION, commit: COMMIT, host, port, metricsPort, alg: ctx.config.signingAlg, store: ctx.store.description });
  // Expired daily log files go at start-up, then hourly.
  const stopRetention =
    logFile === undefined ? () => {} : startLogRetention({ logFile, retentionDays: logRetentionDays, now: () => ctx.clock.now(), logger: ctx.logger });
  const stopPruning = startRevocationPruning({ store: ctx.store, now: () => ctx.clock.now(), logger: ctx.logger });

  const signal = await new Promise<string>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
  });
  ctx.logger.info("shutting down", { signal });
  ctx.draining = true;
  ctx.keys.stop();
  stopRetention();
  await stopPruning();
  await Bun.sleep(ACCEPT_GRACE_MS);
  const drained = await Promise.race([
    server.stop(false).then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), DRAIN_TIMEOUT_MS)),
  ]);
  if (!drained) {
    ctx.logger.warn("in-flight requests did not finish in time; closing connections", { timeoutMs: DRAIN_TIMEOUT_MS });
    await server.stop(true);
  }
  await metricsServer?.stop(true);
  await ctx.store.close();
  ctx.logger.info("stopped");
  return 0;
}
