/**
 * @module cli/serve
 * `tokenmint serve`: listens, runs the key timer, and on SIGTERM/SIGINT stops accepting, lets
 * in-flight requests finish (new ones on open connections get 503), closes the store, exits 0.
 */
import { buildApp } from "../app.ts";
import type { AppContext } from "../context.ts";
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
  }
}

async function serveLocked(ctx: AppContext): Promise<number> {
  const app = buildApp(ctx);
  const { host, port } = ctx.config;
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = Bun.serve({
      hostname: host,
      port,
      // Our own parser answers 413 with the JSON body; this only caps what Bun buffers.
      maxRequestBodySize: Math.max(ctx.config.maxBodyBytes * 4, 1 << 20),
      fetch: (request) => app.handle(request),
      development: false,
    });
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new StartupError(
      code === "EADDRINUSE" ? `${host}:${port} is already in use (is another tokenmint serving this data?)` : `cannot listen on ${host}:${port}: ${(error as Error).message}`,
    );
  }
  ctx.keys.start();
  ctx.logger.info("tokenmint started", { version: VERSION, commit: COMMIT, host, port, alg: ctx.config.signingAlg, store: ctx.store.description });

  const signal = await new Promise<string>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
  });
  ctx.logger.info("shutting down", { signal });
  ctx.draining = true;
  ctx.keys.stop();
  await Bun.sleep(ACCEPT_GRACE_MS);
  const drained = await Promise.race([
    server.stop(false).then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), DRAIN_TIMEOUT_MS)),
  ]);
  if (!drained) {
    ctx.logger.warn("in-flight requests did not finish in time; closing connections", { timeoutMs: DRAIN_TIMEOUT_MS });
    await server.stop(true);
  }
  await ctx.store.close();
  ctx.logger.info("stopped");
  return 0;
}
