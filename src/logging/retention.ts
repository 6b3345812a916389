/**
 * @module logging/retention
 * Deletes daily log files past their retention: in the directory of TOKENMINT_LOG_FILE, only
 * regular files named exactly `name-YYYY-MM-DD.log` (a real date) are considered, and one is
 * deleted when its day lies more than TOKENMINT_LOG_RETENTION_DAYS days before today (UTC).
 * Today's file and the N previous days' files stay, so every line is kept at least N days.
 * Nothing else in the directory is ever touched. `serve` purges at start-up and then hourly.
 */
import { readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "./logger.ts";
import { dailyLogFileDay, dailyLogPath, utcDayStart } from "./file-sink.ts";

const DAY_MS = 86_400_000;
/** How often `serve` purges. */
export const PURGE_INTERVAL_MS = 3_600_000;

/** Names of the daily files of `logFile` that are due for deletion at `now` (epoch ms). */
export function expiredLogFiles(logFile: string, retentionDays: number, now: number): string[] {
  const path = dailyLogPath(logFile);
  const oldestKept = utcDayStart(now) - retentionDays * DAY_MS;
  return readdirSync(path.dir, { withFileTypes: true })
    .filter((entry) => entry.isFile())
    .filter((entry) => {
      const day = dailyLogFileDay(path, entry.name);
      return day !== undefined && day < oldestKept;
    })
    .map((entry) => entry.name)
    .sort();
}

/** Deletes the expired daily files of `logFile`; returns the names deleted. */
export function purgeOldLogFiles(logFile: string, retentionDays: number, now: number): { deleted: string[]; failed: string[] } {
  const dir = dailyLogPath(logFile).dir;
  const deleted: string[] = [];
  const failed: string[] = [];
  for (const name of expiredLogFiles(logFile, retentionDays, now)) {
    try {
      unlinkSync(join(dir, name));
      deleted.push(name);
    } catch (error) {
      // Gone meanwhile is fine; anything else is reported.
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") failed.push(name);
    }
  }
  return { deleted, failed };
}

export interface LogRetentionOptions {
  logFile: string;
  retentionDays: number;
  now: () => number;
  logger: Logger;
  intervalMs?: number;
}

/** Purges once now, then every hour; returns the function that stops the timer. */
export function startLogRetention(options: LogRetentionOptions): () => void {
  const purge = () => {
    try {
      const { deleted, failed } = purgeOldLogFiles(options.logFile, options.retentionDays, options.now());
      if (deleted.length > 0) options.logger.info("old log files deleted", { count: deleted.length, retentionDays: options.retentionDays });
      if (failed.length > 0) options.logger.warn("old log files could not be deleted", { count: failed.length });
    } catch (error) {
      options.logger.warn("log retention failed", { error: (error as Error).message });
    }
  };
  purge();
  const timer = setInterval(purge, options.intervalMs ?? PURGE_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
