/**
 * @module logging/logger
 * A small JSON-lines logger: one object per line on stdout (journald keeps it), a constant
 * message and structured fields. Callers pass only system facts; fields whose names suggest
 * secrets are dropped centrally, so a mistake cannot print a token or key.
 * `serve` writes them once per event-loop turn (stream-sink.ts), or with TOKENMINT_LOG_FILE to
 * daily files instead (file-sink.ts).
 */
import type { Config, LogLevel } from "../config/schema.ts";
import { ConfigError } from "../config/load.ts";
import { openDailyFileSink } from "./file-sink.ts";
import { openStreamSink, type LogOutput, type LogSink } from "./stream-sink.ts";

export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Writes buffered lines out now (loggers that buffer; `serve` calls it at shutdown). */
  flush?(): void;
}

const RANK: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };
/** Field names never written, whatever a caller passes. */
const REDACTED = /authorization|token|secret|password|private|master.?key|api.?key$|cookie/i;
/** REDACTED's verdict per field name: the names are the code's own, a few dozen. */
const redactedNames = new Map<string, boolean>();
/** Whether a field of this name is never written: REDACTED tested once per name (at most 1,000 kept). */
function isRedacted(name: string): boolean {
  let redacted = redactedNames.get(name);
  if (redacted === undefined) {
    redacted = REDACTED.test(name);
    if (redactedNames.size < 1000) redactedNames.set(name, redacted);
  }
  return redacted;
}

/**
 * Creates a logger writing lines at or above `level` through `write` (stdout by default), which
 * also gets the line's time (epoch ms, the `time` field) so a sink can file it by date.
 */
export function createLogger(
  level: LogLevel,
  write: (line: string, time: number) => void = (line) => process.stdout.write(line),
  now: () => number = Date.now,
): Logger {
  // A busy server writes many lines in one millisecond: their time is formatted once.
  let formattedAt = Number.NaN;
  let formatted = "";
  const emit = (lvl: LogLevel) => (msg: string, fields: LogFields = {}) => {
    if (RANK[lvl] < RANK[level]) return;
    const time = now();
    if (time !== formattedAt) {
      formatted = new Date(time).toISOString();
      formattedAt = time;
    }
    const entry: Record<string, unknown> = { time: formatted, level: lvl, msg };
    for (const name in fields) {
      const value = fields[name];
      if (value !== undefined && !isRedacted(name)) entry[name] = value;
    }
    write(`${JSON.stringify(entry)}\n`, time);
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

/** The settings problem of a TOKENMINT_LOG_FILE whose files cannot be written. */
export const logFileError = (logFile: string, reason: string) => new ConfigError([`TOKENMINT_LOG_FILE: cannot write log files beside ${logFile}: ${reason}`]);

/**
 * The logger of `serve`: stdout, or the daily files of TOKENMINT_LOG_FILE when set. Both hold
 * lines to the end of the event-loop turn, but write warnings and errors at once, with the lines
 * before them (`stdout` stands for standard output in tests). Throws when the log directory or
 * today's file cannot be created (a ConfigError naming the setting).
 */
export function createServiceLogger(config: Pick<Config, "logLevel" | "logFile">, now: () => number = Date.now, stdout?: LogOutput): Logger {
  let sink: LogSink;
  // Lines dropped while standard output was not read (stream-sink.ts): a warning, after the lines held.
  let logger: Logger | undefined;
  const onDropped = (lines: number) => logger?.warn("log lines dropped while standard output was not read", { lines });
  if (config.logFile === undefined) sink = openStreamSink(stdout, onDropped);
  else {
    try {
      sink = openDailyFileSink(config.logFile, { now: now() });
    } catch (error) {
      throw logFileError(config.logFile, (error as Error).message);
    }
  }
  const base = createLogger(config.logLevel, sink.write, now);
  const atOnce = (emit: Logger["warn"]) => (msg: string, fields?: LogFields) => {
    emit(msg, fields);
    sink.flush();
  };
  logger = { ...base, warn: atOnce(base.warn), error: atOnce(base.error), flush: sink.flush };
  return logger;
}

/** A logger that adds `fields` to every line of `logger` (a worker's lines name the worker). */
export function withFields(logger: Logger, fields: LogFields): Logger {
  const wrap = (emit: Logger["info"]) => (msg: string, own: LogFields = {}) => emit(msg, { ...fields, ...own });
  return { debug: wrap(logger.debug), info: wrap(logger.info), warn: wrap(logger.warn), error: wrap(logger.error), flush: logger.flush };
}

/** A logger that drops everything (for tests that do not inspect logs). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
