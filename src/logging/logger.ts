/**
 * @module logging/logger
 * A small JSON-lines logger: one object per line on stdout (journald keeps it), a constant
 * message and structured fields. Callers pass only system facts; fields whose names suggest
 * secrets are dropped centrally, so a mistake cannot print a token or key.
 */
import type { LogLevel } from "../config/schema.ts";

export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

const RANK: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };
/** Field names never written, whatever a caller passes. */
const REDACTED = /authorization|token|secret|password|private|master.?key|api.?key$|cookie/i;

/** Creates a logger writing lines at or above `level` through `write` (stdout by default). */
export function createLogger(level: LogLevel, write: (line: string) => void = (line) => process.stdout.write(line), now: () => number = Date.now): Logger {
  const emit = (lvl: LogLevel) => (msg: string, fields: LogFields = {}) => {
    if (RANK[lvl] < RANK[level]) return;
    const entry: Record<string, unknown> = { time: new Date(now()).toISOString(), level: lvl, msg };
    for (const [name, value] of Object.entries(fields)) {
      if (value !== undefined && !REDACTED.test(name)) entry[name] = value;
    }
    write(`${JSON.stringify(entry)}\n`);
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

/** A logger that drops everything (for tests that do not inspect logs). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
