/**
 * @module core/oauth/revocation-pruning
 * Removes revocation entries whose token has expired, so the store holds only revocations that
 * still matter. `serve` prunes at start-up and then every few minutes, in batches of bounded size
 * (one short write transaction each), until nothing expired is left. `revokeToken` also removes a
 * few in passing, so the list stays bounded when only the CLI runs.
 */
import type { Logger } from "../../logging/logger.ts";
import type { Store } from "../../store/store.ts";

/** How often `serve` prunes. */
export const PRUNE_INTERVAL_MS = 300_000;
/** Entries removed per write transaction. */
export const PRUNE_BATCH = 500;

/** Removes every revocation expired at `now`, one batch per transaction; returns how many. */
export async function pruneExpiredRevocations(store: Store, now: number, batch = PRUNE_BATCH): Promise<number> {
  let total = 0;
  for (;;) {
    const removed = await store.pruneRevokedTokens(now, batch);
    total += removed;
    if (removed < batch) return total;
  }
}

export interface RevocationPruningOptions {
  store: Store;
  now: () => number;
  logger: Logger;
  intervalMs?: number;
}

/**
 * Prunes once now, then every PRUNE_INTERVAL_MS. Returns the function that stops the timer; its
 * promise resolves once a pass still running has finished, so the store can be closed after it.
 */
export function startRevocationPruning(options: RevocationPruningOptions): () => Promise<void> {
  let running: Promise<void> | undefined;
  const pass = async () => {
    try {
      const removed = await pruneExpiredRevocations(options.store, options.now());
      if (removed > 0) options.logger.info("expired token revocations removed", { count: removed });
    } catch (error) {
      options.logger.warn("pruning token revocations failed", { error: (error as Error).message });
    } finally {
      running = undefined;
    }
  };
  const prune = () => {
    running ??= pass();
  };
  prune();
  const timer = setInterval(prune, options.intervalMs ?? PRUNE_INTERVAL_MS);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
