/**
 * @module logging/file-sink
 * Daily log files: with TOKENMINT_LOG_FILE=/dir/name.log each line goes to
 * `/dir/name-YYYY-MM-DD.log`, the UTC date of the line, so the file switches at midnight UTC.
 * Files are created with mode 0640, the directory (if missing) with 0750.
 *
 * Lines are held and appended together once per event-loop turn (stream-sink.ts), so logging
 * never waits for the disk per line. `flush` writes them synchronously; the sink also flushes on
 * the process's `exit` event, and `serve` flushes at shutdown.
 */
import { accessSync, chmodSync, closeSync, constants, existsSync, fchmodSync, fstatSync, mkdirSync, openSync, statSync, writeSync } from "node:fs";
import { basename, dirname, extname, join, relative, resolve, sep } from "node:path";
import { openStreamSink, type LogSink } from "./stream-sink.ts";

/** The parts of a TOKENMINT_LOG_FILE path: `/dir/name.log` → dir `/dir`, stem `name`, ext `.log`. */
export interface DailyLogPath {
  dir: string;
  stem: string;
  ext: string;
}

const DAY_MS = 86_400_000;
export const LOG_FILE_MODE = 0o640;
export const LOG_DIR_MODE = 0o750;
/** How often the open log file is checked to be still at its path (ms). */
export const MOVED_CHECK_MS = 1000;

export function dailyLogPath(logFile: string): DailyLogPath {
  const name = basename(logFile);
  const ext = extname(name);
  return { dir: dirname(logFile), stem: ext === "" ? name : name.slice(0, -ext.length), ext };
}

/** `YYYY-MM-DD` of an instant, in UTC. */
export const utcDate = (time: number) => new Date(time).toISOString().slice(0, 10);

/** The file name (no directory) of the day holding `time`: `name-YYYY-MM-DD.log`. */
export const dailyLogFileName = (path: DailyLogPath, time: number) => `${path.stem}-${utcDate(time)}${path.ext}`;

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The UTC day (epoch ms of its midnight) of a file named exactly `name-YYYY-MM-DD.log` with a real
 * calendar date; undefined for every other name.
 */
export function dailyLogFileDay(path: DailyLogPath, fileName: string): number | undefined {
  const match = new RegExp(`^${escapeRegExp(path.stem)}-(\\d{4})-(\\d{2})-(\\d{2})${escapeRegExp(path.ext)}$`).exec(fileName);
  if (match === null) return undefined;
  const [, y, m, d] = match as unknown as [string, string, string, string];
  const day = Date.UTC(Number(y), Number(m) - 1, Number(d));
  return utcDate(day) === `${y}-${m}-${d}` ? day : undefined;
}

/** Start of the UTC day holding `time`. */
export const utcDayStart = (time: number) => Math.floor(time / DAY_MS) * DAY_MS;

/** Creates the log directory if missing (mode 0750). Throws with the reason when it cannot. */
export function ensureLogDirectory(path: string): void {
  // Resolved first: of `a/../b`, the runtime makes and names `a`, and `..` would reach a directory it did not make.
  const dir = resolve(path);
  const created = mkdirSync(dir, { recursive: true, mode: LOG_DIR_MODE });
  if (created === undefined) return;
  // The umask may have narrowed the mode; set it exactly on every directory made, from the first
  // (the one `mkdirSync` names) down to `dir`, so the group reaches the files through all of them.
  let made = created;
  chmodSync(made, LOG_DIR_MODE);
  for (const part of relative(created, dir).split(sep).filter((p) => p !== "")) {
    made = join(made, part);
    chmodSync(made, LOG_DIR_MODE);
  }
}

/** Opens `file` for appending; a file this call creates gets mode 0640 whatever the umask. */
function openForAppend(file: string): number {
  try {
    const fd = openSync(file, "ax", LOG_FILE_MODE);
    fchmodSync(fd, LOG_FILE_MODE);
    return fd;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return openSync(file, "a");
  }
}

export interface DailyFileSinkOptions {
  /** Instant of the first file opened (to fail early when it cannot be written). */
  now: number;
  /** Told when a write fails, with the lines that could not be written (default: stderr). */
  onError?: (message: string, lines: string) => void;
}

const reportToStderr = (message: string, lines: string) => process.stderr.write(`tokenmint: ${message}\n${lines}`);

const namesDirectoryMessage = (logFile: string) => `${logFile} is a directory; name a file in it, like ${join(logFile, "tokenmint.log")}`;

/**
 * Why the daily files of `logFile` could not be opened, found without creating anything (for
 * `check`): it names a directory, a path on the way is not a directory, or the directory or
 * today's file may not be written. Undefined when nothing stands in the way.
 */
export function logFileProblem(logFile: string, now: number): string | undefined {
  // A path under a file is missing as far as this walk goes: the file is found on the way up.
  const stat = (path: string) => {
    try {
      return statSync(path, { throwIfNoEntry: false });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
      throw error;
    }
  };
  if (stat(logFile)?.isDirectory() === true) return namesDirectoryMessage(logFile);
  const path = dailyLogPath(logFile);
  let dir = path.dir;
  let existing = stat(dir);
  // The nearest directory that exists is where the rest would be created.
  while (existing === undefined && dirname(dir) !== dir) {
    dir = dirname(dir);
    existing = stat(dir);
  }
  if (existing === undefined || !existing.isDirectory()) return `${dir} is not a directory`;
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
    const today = join(path.dir, dailyLogFileName(path, now));
    if (dir === path.dir && existsSync(today)) accessSync(today, constants.W_OK);
  } catch (error) {
    return (error as Error).message;
  }
  return undefined;
}

/**
 * Opens the daily files of `logFile`. Creates the directory and today's file at once, so an
 * unwritable location fails at start-up rather than at the first line.
 */
export function openDailyFileSink(logFile: string, options: DailyFileSinkOptions): LogSink {
  const path = dailyLogPath(logFile);
  const onError = options.onError ?? reportToStderr;
  if (statSync(logFile, { throwIfNoEntry: false })?.isDirectory() === true) throw new Error(namesDirectoryMessage(logFile));
  ensureLogDirectory(path.dir);
  let name = dailyLogFileName(path, options.now);
  let fd: number | undefined = openForAppend(join(path.dir, name));

  const closeQuietly = () => {
    if (fd === undefined) return;
    try {
      closeSync(fd);
    } catch {
      // Nothing more to do for a descriptor that cannot close.
    }
    fd = undefined;
  };
  /** When the open file was last found still at its path. */
  let checkedAt = 0;
  const append = (text: string) => {
    try {
      // A file (or directory) removed or renamed meanwhile would take the lines where no one
      // finds them, without an error: at most once a second, the path must still lead to it.
      if (fd !== undefined && Date.now() - checkedAt >= MOVED_CHECK_MS) {
        checkedAt = Date.now();
        if (statSync(join(path.dir, name), { throwIfNoEntry: false })?.ino !== fstatSync(fd).ino) closeQuietly();
      }
      if (fd === undefined) {
        ensureLogDirectory(path.dir);
        fd = openForAppend(join(path.dir, name));
        checkedAt = Date.now();
      }
      const bytes = Buffer.from(text);
      let offset = 0;
      while (offset < bytes.length) offset += writeSync(fd, bytes, offset);
    } catch (error) {
      // Reopen next time (the directory or file may have been removed); keep the lines on stderr.
      closeQuietly();
      onError(`cannot write the log file ${join(path.dir, name)}: ${(error as Error).message}`, text);
    }
  };
  const lines = openStreamSink(append);

  return {
    write(line, time) {
      const lineName = dailyLogFileName(path, time);
      if (lineName !== name) {
        lines.flush();
        closeQuietly();
        name = lineName;
      }
      lines.write(line, time);
    },
    flush: lines.flush,
    close() {
      lines.close();
      closeQuietly();
    },
  };
}
