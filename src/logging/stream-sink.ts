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
 * service its memory: the runtime would queue every write it cannot make at once, without limit.
 * So once a write is refused for now (`write` returns false), the sink writes nothing more until
 * the output has room again (`drain`), holds at most MAX_HELD_BYTES of lines meanwhile and drops
 * the lines beyond, counting them; `onDropped` hears the count once the output takes lines again.
 */

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
 * Where a sink writes. `write` returns false when it took the text but the output has no room for
 * more (a pipe nobody reads); then `whenDrained` calls `resume` once it has.
 */
export interface LogOutput {
  write(text: string): boolean | void;
  whenDrained?(resume: () => void): void;
}

const stdoutOutput: LogOutput = {
  write: (text) => process.stdout.write(text),
  whenDrained: (resume) => void process.stdout.once("drain", resume),
};

/**
 * A sink that writes to `output` (standard output by default) once per event-loop turn, in pieces
 * of whole lines of at most PIPE_BUF bytes, holding lines while the output has no room (see the
 * module). It also flushes on the process's `exit` event; `serve` flushes at shutdown.
 * `onDropped` is told how many lines were dropped, once the output has room again.
 */
export function openStreamSink(output: LogOutput | ((text: string) => void) = stdoutOutput, onDropped?: (lines: number) => void): LogSink {
  const out: LogOutput = typeof output === "function" ? { write: output } : output;
  let pieces: string[] = [];
  let current = "";
  let currentBytes = 0;
  /** Bytes of the lines held (in `pieces` and `current`). */
  let heldBytes = 0;
  let scheduled: ReturnType<typeof setImmediate> | undefined;
  /** Set while the output has no room: nothing is written until it drains. */
  let blocked = false;
  let dropped = 0;

  /** Writes the pieces held, up to the first the output has no room after. */
  const writeHeld = (force: boolean) => {
    if (scheduled !== undefined) clearImmediate(scheduled);
    scheduled = undefined;
    if (current !== "") pieces.push(current);
    current = "";
    currentBytes = 0;
    if (blocked && !force) return;
    const queue = pieces;
    pieces = [];
    heldBytes = 0;
    for (let i = 0; i < queue.length; i++) {
      if (out.write(queue[i] as string) !== false || force || out.whenDrained === undefined) continue;
      // Taken, but no room for more: hold the rest until the output drains.
      pieces = queue.slice(i + 1);
      for (const piece of pieces) heldBytes += Buffer.byteLength(piece);
      blocked = true;
      out.whenDrained(resume);
      return;
    }
  };
  const resume = () => {
    blocked = false;
    const count = dropped;
    dropped = 0;
    // Told before the held lines are written: its line (if it logs one) follows them, where the gap is.
    if (count > 0) onDropped?.(count);
    writeHeld(false);
  };
  const flush = () => writeHeld(false);
  // At exit (and close) nothing is waited for: what is held is handed to the output as it is.
  const onExit = () => writeHeld(true);
  process.on("exit", onExit);

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
      writeHeld(true);
      process.off("exit", onExit);
    },
  };
}
