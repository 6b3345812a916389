/**
 * @module core/oauth/expiry-pruning
 * Removes the entries that matter only until an instant once it has passed: revocations whose
 * token has expired, and the ids of client assertions (private_key_jwt) that have expired, so the
 * store keeps neither revocations that no longer matter nor a record of a client's use beyond the
 * time a replay could be tried. `serve` prunes at start-up and then every few minutes, in batches
 * of bounded size (one short write transaction each), until nothing expired is left. `revokeToken`
 * and `useAssertionJti` also remove a few in passing, so the lists stay bounded when only the CLI
 * runs.
 */
import type { Logger } from "../../logging/logger.ts";
import type { Store } from "../../store/store.ts";

/** How often `serve` prunes. */
export const PRUNE_INTERVAL_MS = 300_000;
/** Entries removed per write transaction. */
export const PRUNE_BATCH = 500;

/** Removes every revocation and used assertion id expired at `now`, one batch per transaction; returns how many. */
export async function pruneExpiredEntries(store: Store, now: number, batch = PRUNE_BATCH): Promise<number> {
  let total = 0;
  for (;;) {
    const removed = await store.pruneExpired(now, batch);
    total += removed;
    if (removed < batch) return total;
  }
}

export interface ExpiryPruningOptions {
  store: Store;
  now: () => number;
  logger: Logger;
  intervalMs?: number;
}

/**
 * Prunes once now, then every PRUNE_INTERVAL_MS. Returns the function that stops the timer; its
 * promise resolves once a pass still running has finished, so the store can be closed after it.
 */
export function startExpiryPruning(options: ExpiryPruningOptions): () => Promise<void> {
  let running: Promise<void> | undefined;
  const pass = async () => {
    try {
      const removed = await pruneExpiredEntries(options.store, options.now());
      if (removed > 0) options.logger.info("expired revocations and assertion ids removed", { count: removed });
    } catch (error) {
      options.logger.warn("pruning expired revocations and assertion ids failed", { error: (error as Error).message });
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
