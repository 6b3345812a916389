/**
 * @module logging/stream-sink
 * How `serve` writes its log: lines are held until the event-loop turn ends and then written
 * together, so a request's log line costs no system call of its own (one `write` per line cost
 * 2.5–3.5 µs to /dev/null and 3–7.5 µs to a pipe, against about 1 µs for building the line).
 * Standard output (journald keeps it) by default; the daily files of file-sink.ts write through
 * it too.
 *
 * The workers write to the primary's standard output, and a pipe keeps a write whole only up to
 * PIPE_BUF (4096 bytes): a longer one may be interleaved with another process's. So a turn's lines
 * go out in pieces of at most PIPE_BUF bytes, each a run of whole lines; a single line longer
 * than that is written alone.
 *
 * A reader that stops reading (a stalled journald or container log driver) must not cost the
 * service its memory, nor stop it. Standard output is written directly (`writeNow`, a `write`
 * system call of the sink's own), not through the runtime's stream: the runtime queues what it
 * cannot write at once and writes it later as one buffer, which a pipe may take in part, so the
 * line a process was writing when it exited could be cut and run into another process's. A
 * write refused for now (the reader has no room) is held and tried again soon (FIRST_RETRY_MS, up
 * to RETRY_MS while nothing goes); at most MAX_HELD_BYTES of lines are held meanwhile, and the lines beyond are dropped and counted;
 * `onDropped` hears the count once the output takes lines again. An output that is only a stream
 * (`write` returning false when it has no room, `whenDrained`) is held the same way.
 *
 * At exit, what is held is written before the process ends, waiting up to EXIT_WAIT_MS for a
 * reader with no room; what still could not be written is counted on standard error.
 */

import { writeSync } from "node:fs";
import { sleepSync } from "../runtime/sleep-sync.ts";

/** Where lines go: the logger calls `write` with each line and its time (epoch ms). */
export interface LogSink {
  write(line: string, time: number): void;
  /** Writes everything held now. */
  flush(): void;
  /** Flushes, closes what it writes to and detaches from the process. */
  close(): void;
}

/** The most bytes a pipe writes without interleaving another writer's (Linux). */
export const PIPE_BUF = 4096;
/** Pieces held before they are written at once, without waiting for the turn to end. */
const FLUSH_AT_PIECES = 16;
/** The most bytes of lines held while the output has no room; lines beyond are dropped. */
export const MAX_HELD_BYTES = 4 * 1024 * 1024;

/**
 * How soon lines held for an output with no room are tried again (ms): at once when the last try
 * wrote something (a reader busy but reading, who would otherwise be kept waiting), doubling up
 * to RETRY_MS while nothing goes (a reader that stopped costs a try every RETRY_MS).
 */
export const FIRST_RETRY_MS = 1;
export const RETRY_MS = 64;
/** How long an exiting process waits for an output with no room to take what is held (ms). */
export const EXIT_WAIT_MS = 2000;

/**
 * Where a sink writes. With `writeNow`, the sink writes through it alone: it writes what it can of
 * `data` at once and answers how many bytes that was (0: no room now). Otherwise `write` takes the
 * text, returning false when the output has no room for more (a pipe nobody reads); then
 * `whenDrained` calls `resume` once it has.
 */
export interface LogOutput {
  write(text: string): boolean | void;
  whenDrained?(resume: () => void): void;
  writeNow?(data: string | Uint8Array): number;
}

/**
 * Writes to file descriptor `fd` at once: the bytes written, or 0 when it takes nothing now (no
 * room, EAGAIN; or a failure that may pass, such as a full disk): the sink holds the lines and
 * tries again. A reader gone for good (EPIPE, a closed descriptor) takes nothing more, ever: its
 * lines are dropped.
 */
export function directOutput(fd: number): LogOutput {
  let closed = false;
  // A string is written as it is (encoding it to a Buffer first cost 1 µs a piece).
  const writeNow = (data: string | Uint8Array): number => {
    if (closed) return byteLength(data);
    try {
      return typeof data === "string" ? writeSync(fd, data) : writeSync(fd, data);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "EPIPE" && code !== "EBADF") return 0;
      closed = true;
      return byteLength(data);
    }
  };
  return { writeNow, write: (text) => void writeNow(text) };
}

/**
 * Standard output, written directly. Reading `process.stdout` makes the runtime set a pipe or
 * socket non-blocking, so a write its reader has no room for fails at once (EAGAIN) rather than
 * stopping the process.
 */
function stdoutOutput(): LogOutput {
  void process.stdout;
  return directOutput(1);
}

const byteLength = (data: string | Uint8Array) => (typeof data === "string" ? Buffer.byteLength(data) : data.byteLength);

/** Newlines in `data`: the lines it ends. */
function linesIn(data: string | Uint8Array): number {
  const text = typeof data === "string" ? data : Buffer.from(data).toString("latin1");
  let count = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) count++;
  return count;
}

/**
 * A sink that writes to `output` (standard output by default) once per event-loop turn, in pieces
 * of whole lines of at most PIPE_BUF bytes, holding lines while the output has no room (see the
 * module). It also writes what it holds when the process exits; `serve` flushes at shutdown.
 * `onDropped` is told how many lines were dropped, once the output has room again.
 */
export function openStreamSink(output?: LogOutput | ((text: string) => void), onDropped?: (lines: number) => void): LogSink {
  const out: LogOutput = output === undefined ? stdoutOutput() : typeof output === "function" ? { write: output } : output;
  let pieces: string[] = [];
  let current = "";
  let currentBytes = 0;
  /** Bytes of the lines held (in `pieces`, `current` and `partial`). */
  let heldBytes = 0;
  /** The rest of a piece `writeNow` took in part: written before anything else. */
  let partial: Uint8Array | undefined;
  let scheduled: ReturnType<typeof setImmediate> | undefined;
  /** Set while the output has no room: nothing is written until it has. */
  let blocked = false;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let retryMs = FIRST_RETRY_MS;
  let dropped = 0;

  const takeCurrent = () => {
    if (scheduled !== undefined) clearImmediate(scheduled);
    scheduled = undefined;
    if (current !== "") pieces.push(current);
    current = "";
    currentBytes = 0;
  };

  /**
   * Through `writeNow`: writes the piece taken in part, then the pieces held, until the output
   * has no room; returns whether everything went. What is left stays held.
   */
  const writeDirect = (writeNow: (data: string | Uint8Array) => number): boolean => {
    const before = heldBytes;
    let i = 0;
    for (;;) {
      const data = partial ?? (i < pieces.length ? (pieces[i++] as string) : undefined);
      if (data === undefined) break;
      partial = undefined;
      const written = writeNow(data);
      heldBytes -= written;
      if (written < byteLength(data)) {
        // A piece nothing of which was taken stays the first held; the rest of one taken in part goes first.
        if (written === 0 && typeof data === "string") pieces = pieces.slice(i - 1);
        else {
          partial = (typeof data === "string" ? Buffer.from(data) : data).subarray(written);
          pieces = pieces.slice(i);
        }
        retryMs = heldBytes < before ? FIRST_RETRY_MS : Math.min(retryMs * 2, RETRY_MS);
        return false;
      }
    }
    pieces = [];
    heldBytes = 0;
    retryMs = FIRST_RETRY_MS;
    return true;
  };

  /** Writes the pieces held, up to the first the output has no room for (or after). */
  const writeHeld = () => {
    takeCurrent();
    if (blocked) return;
    if (out.writeNow !== undefined) {
      if (writeDirect(out.writeNow)) return;
      blocked = true;
      scheduleRetry();
      return;
    }
    const queue = pieces;
    pieces = [];
    heldBytes = 0;
    for (let i = 0; i < queue.length; i++) {
      if (out.write(queue[i] as string) !== false || out.whenDrained === undefined) continue;
      // Taken, but no room for more: hold the rest until the output drains.
      pieces = queue.slice(i + 1);
      for (const piece of pieces) heldBytes += Buffer.byteLength(piece);
      blocked = true;
      out.whenDrained(resume);
      return;
    }
  };
  /** Tells how many lines were dropped since the last time, if any. */
  const tellDropped = () => {
    const count = dropped;
    dropped = 0;
    if (count > 0) onDropped?.(count);
  };
  /** The output has room again: what was dropped meanwhile is told, then the lines held go out. */
  const resume = () => {
    blocked = false;
    // Told before the held lines are written: its line (if it logs one) follows them, where the gap is.
    tellDropped();
    writeHeld();
  };
  const flush = () => writeHeld();
  /** Through `writeNow`, while blocked: tries the lines held again; once they have all gone, the drop is told, after them. */
  const retryHeld = () => {
    retry = undefined;
    takeCurrent();
    if (!writeDirect(out.writeNow as (data: string | Uint8Array) => number)) return scheduleRetry();
    blocked = false;
    tellDropped();
  };
  function scheduleRetry() {
    retry = setTimeout(retryHeld, retryMs);
    retry.unref?.();
  }

  /** At exit: everything held goes out now, waiting up to EXIT_WAIT_MS for room; what cannot is counted on stderr. */
  const writeAll = () => {
    takeCurrent();
    if (retry !== undefined) clearTimeout(retry);
    retry = undefined;
    blocked = false;
    if (out.writeNow === undefined) {
      for (const piece of pieces) out.write(piece);
      pieces = [];
      heldBytes = 0;
      return;
    }
    const deadline = Date.now() + EXIT_WAIT_MS;
    while (!writeDirect(out.writeNow) && Date.now() < deadline) sleepSync(5);
    const lost = dropped + (partial === undefined ? 0 : linesIn(partial)) + pieces.reduce((n, piece) => n + linesIn(piece), 0);
    partial = undefined;
    pieces = [];
    heldBytes = 0;
    dropped = 0;
    if (lost === 0) return;
    // Standard error made non-blocking first (as stdoutOutput does): a stalled reader of it must
    // not hold up the exit either. Only then: the flag stays on the descriptor the process shares.
    void process.stderr;
    directOutput(2).writeNow?.(`tokenmint: ${lost} log line(s) not written: standard output was not read\n`);
  };
  process.on("exit", writeAll);

  return {
    write(line) {
      const bytes = Buffer.byteLength(line);
      if (blocked && heldBytes + bytes > MAX_HELD_BYTES) {
        dropped++;
        return;
      }
      if (current !== "" && currentBytes + bytes > PIPE_BUF) {
        pieces.push(current);
        current = "";
        currentBytes = 0;
      }
      current += line;
      currentBytes += bytes;
      heldBytes += bytes;
      if (blocked) return;
      if (pieces.length >= FLUSH_AT_PIECES) flush();
      else scheduled ??= setImmediate(flush);
    },
    flush,
    close() {
      writeAll();
      process.off("exit", writeAll);
    },
  };
}
