/**
 * The standard-output log of `serve`: a turn's lines leave together, in pieces of whole lines
 * that a pipe never interleaves with another process's, warnings and errors at once, and nothing
 * is lost when the process exits.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { closeSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LogOutput, LogSink } from "../../src/logging/stream-sink.ts";
import { createServiceLogger } from "../../src/logging/logger.ts";
import { directOutput, EXIT_WAIT_MS, MAX_HELD_BYTES, openStreamSink, PIPE_BUF, RETRY_MS } from "../../src/logging/stream-sink.ts";
import { BUN, REPO_ROOT } from "../e2e/process.ts";

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const sinks: LogSink[] = [];
const restores: (() => void)[] = [];
afterEach(() => {
  for (const sink of sinks.splice(0)) sink.close();
  for (const restore of restores.splice(0)) restore();
});

function recordingSink(): { sink: LogSink; writes: string[] } {
  const writes: string[] = [];
  const sink = openStreamSink((text) => writes.push(text));
  sinks.push(sink);
  return { sink, writes };
}

/** An output written directly (as standard output is): records what it writes, all at once. */
function recordingOutput(): { output: LogOutput; writes: string[] } {
  const writes: string[] = [];
  const output: LogOutput = {
    write: () => {
      throw new Error("an output with writeNow is written through it alone");
    },
    writeNow: (data) => {
      const bytes = typeof data === "string" ? Buffer.from(data) : data;
      writes.push(Buffer.from(bytes).toString());
      return bytes.byteLength;
    },
  };
  return { output, writes };
}

const line = (n: number, bytes: number) => `${String(n).padStart(4, "0")}${"x".repeat(bytes - 5)}\n`;

describe("serve's log on standard output", () => {
  test("the lines of one turn are written together once the turn ends, in order", async () => {
    const { output, writes } = recordingOutput();
    const logger = createServiceLogger({ logLevel: "info", logFile: undefined }, () => Date.UTC(2026, 0, 5, 8), output);
    logger.info("request", { method: "POST", status: 201 });
    logger.info("request", { method: "GET", status: 200 });
    logger.debug("below the level");
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toEqual([
      '{"time":"2026-01-05T08:00:00.000Z","level":"info","msg":"request","method":"POST","status":201}\n' +
        '{"time":"2026-01-05T08:00:00.000Z","level":"info","msg":"request","method":"GET","status":200}\n',
    ]);
    logger.info("next turn");
    logger.flush?.();
    expect(writes).toHaveLength(2);
    expect(writes[1]).toContain('"msg":"next turn"');
  });

  test("warnings and errors are written at once, after the lines held before them", () => {
    const { output, writes } = recordingOutput();
    const logger = createServiceLogger({ logLevel: "info", logFile: undefined }, Date.now, output);
    logger.info("first");
    logger.warn("second");
    expect(writes).toHaveLength(1);
    expect(writes[0]?.split("\n").slice(0, -1).map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(["first", "second"]);
    logger.error("third");
    expect(writes).toHaveLength(2);
    expect(writes[1]).toContain('"msg":"third"');
  });

  test("pieces hold whole lines and at most PIPE_BUF bytes, counted in bytes, not characters", async () => {
    const { sink, writes } = recordingSink();
    const lines = Array.from({ length: 100 }, (_, i) => line(i, 100));
    // 52 characters but 99 bytes each ("é" is two bytes in UTF-8).
    const wide = Array.from({ length: 41 }, (_, i) => `${String(i).padStart(4, "0")}${"é".repeat(47)}\n`);
    for (const l of [...lines, ...wide]) sink.write(l, 0);
    await nextTurn();
    expect(writes.join("")).toBe([...lines, ...wide].join(""));
    for (const piece of writes) {
      expect(Buffer.byteLength(piece)).toBeLessThanOrEqual(PIPE_BUF);
      expect(piece.endsWith("\n")).toBe(true);
    }
    // 40 lines of 100 bytes a piece; 21 wide lines fill the third piece's 2,096 bytes left, 20 go
    // to a fourth (counted in characters, 40 would have fitted).
    expect(writes.map((piece) => piece.split("\n").length - 1)).toEqual([40, 40, 41, 20]);
  });

  test("a line longer than PIPE_BUF is written whole, alone", async () => {
    const { sink, writes } = recordingSink();
    const long = line(1, PIPE_BUF + 500);
    sink.write(line(0, 100), 0);
    sink.write(long, 0);
    sink.write(line(2, 100), 0);
    await nextTurn();
    expect(writes).toEqual([line(0, 100), long, line(2, 100)]);
  });

  test("a turn that logs more than 64 KiB writes it without waiting for the turn to end", () => {
    const { sink, writes } = recordingSink();
    for (let i = 0; i < 16 * 40; i++) sink.write(line(i, 100), 0);
    expect(writes).toEqual([]);
    sink.write(line(640, 100), 0);
    expect(writes).toHaveLength(17);
    expect(writes.join("")).toBe(Array.from({ length: 641 }, (_, i) => line(i, 100)).join(""));
  });

  for (const [how, end] of [
    ["exits", "process.exit(3)"],
    ["dies of an uncaught error", "throw new Error('boom')"],
  ] as const) {
    test(`the lines held are written when the process ${how}`, async () => {
      const script = [
        `import { createServiceLogger } from ${JSON.stringify(join(REPO_ROOT, "src/logging/logger.ts"))};`,
        `const logger = createServiceLogger({ logLevel: "info", logFile: undefined });`,
        `logger.info("last words", { n: 1 });`,
        `logger.info("last words", { n: 2 });`,
        end,
      ].join("\n");
      const child = Bun.spawn([BUN, "-e", script], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
      const [stdout] = await Promise.all([new Response(child.stdout).text(), child.exited]);
      expect(child.exitCode).not.toBe(0);
      expect(stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { msg: string; n: number })).toMatchObject([
        { msg: "last words", n: 1 },
        { msg: "last words", n: 2 },
      ]);
    });
  }
});

describe("serve's log when standard output is not read", () => {
  /** An output that takes `room` writes, then has no room until `drain()`. */
  function stalledOutput(room: number) {
    const writes: string[] = [];
    let resume: (() => void) | undefined;
    let left = room;
    const output = {
      write(text: string) {
        writes.push(text);
        return --left > 0;
      },
      whenDrained(callback: () => void) {
        expect(resume).toBeUndefined();
        resume = callback;
      },
    };
    const drain = (more: number) => {
      const callback = resume as () => void;
      resume = undefined;
      left = more;
      callback();
    };
    return { output, writes, drain, waiting: () => resume !== undefined };
  }
  const lineNumbers = (writes: string[]) => writes.join("").split("\n").slice(0, -1).map((l) => Number(l.slice(0, 6)));
  const numbered = (n: number) => `${String(n).padStart(6, "0")}${"x".repeat(93)}\n`;
  /** An output written directly that takes `room` bytes, then none until `open()`. */
  function stalledDirectOutput(room: number) {
    const writes: string[] = [];
    let left = room;
    const output: LogOutput = {
      write: () => {
        throw new Error("an output with writeNow is written through it alone");
      },
      writeNow: (data) => {
        const bytes = typeof data === "string" ? Buffer.from(data) : data;
        const taken = Math.min(left, bytes.byteLength);
        left -= taken;
        if (taken > 0) writes.push(Buffer.from(bytes.subarray(0, taken)).toString());
        return taken;
      },
    };
    return { output, writes, open: () => (left = Number.POSITIVE_INFINITY) };
  }

  test("once the output has no room, nothing more is written until it drains; the lines beyond MAX_HELD_BYTES are dropped and counted", async () => {
    const { output, writes, drain, waiting } = stalledOutput(3);
    const dropped: number[] = [];
    const sink = openStreamSink(output, (lines) => dropped.push(lines));
    sinks.push(sink);
    // 100 bytes a line: 2 MiB more than the sink holds.
    const total = Math.ceil((MAX_HELD_BYTES + 2 * 1024 * 1024) / 100);
    for (let i = 0; i < total; i++) sink.write(numbered(i), 0);
    await nextTurn();
    // Three pieces went out, the third was taken without room for more.
    expect(writes).toHaveLength(3);
    expect(waiting()).toBe(true);
    sink.flush();
    await nextTurn();
    expect(writes).toHaveLength(3);
    expect(dropped).toEqual([]);

    drain(Number.POSITIVE_INFINITY);
    const written = lineNumbers(writes);
    // What was written is the first lines, in order, none twice; the rest were dropped, and said so once.
    expect(written).toEqual(Array.from({ length: written.length }, (_, i) => i));
    expect(dropped).toHaveLength(1);
    expect(written.length + (dropped[0] as number)).toBe(total);
    // What was held, beyond the three pieces taken: at most MAX_HELD_BYTES.
    expect(written.length * 100 - 3 * 40 * 100).toBeLessThanOrEqual(MAX_HELD_BYTES);
    expect(written.length * 100 - 3 * 40 * 100).toBeGreaterThan(MAX_HELD_BYTES - PIPE_BUF);

    // Drained: lines flow again, at the end of the turn.
    sink.write(numbered(total), 0);
    await nextTurn();
    expect(lineNumbers(writes).at(-1)).toBe(total);
    expect(waiting()).toBe(false);
  });

  test("serve's logger says how many lines it dropped, in a warning after the lines it held", async () => {
    const { output, writes, open } = stalledDirectOutput(1000);
    const logger = createServiceLogger({ logLevel: "info", logFile: undefined }, () => Date.UTC(2026, 0, 5, 8), output);
    const lines = Math.ceil(MAX_HELD_BYTES / 60) + 1000;
    for (let i = 0; i < lines; i++) logger.info("request", { n: i });
    await nextTurn();
    open();
    await Bun.sleep(RETRY_MS * 3);
    logger.flush?.();
    const entries = writes.join("").split("\n").slice(0, -1).map((l) => JSON.parse(l) as { level: string; msg: string; n?: number; lines?: number });
    const warning = entries.at(-1);
    expect(warning).toMatchObject({ level: "warn", msg: "log lines dropped while standard output was not read" });
    const kept = entries.slice(0, -1);
    expect(kept.map((e) => e.n)).toEqual(Array.from({ length: kept.length }, (_, i) => i));
    expect(kept.length + (warning?.lines as number)).toBe(lines);
  });

  test("a write taken in part is finished first, before anything else, once there is room", async () => {
    const { output, writes, open } = stalledDirectOutput(PIPE_BUF + 100);
    const sink = openStreamSink(output);
    sinks.push(sink);
    for (let i = 0; i < 200; i++) sink.write(numbered(i), 0);
    await nextTurn();
    // One piece whole, the next cut after 100 bytes: nothing more until there is room again.
    expect(writes.join("")).toHaveLength(PIPE_BUF + 100);
    sink.flush();
    expect(writes.join("")).toHaveLength(PIPE_BUF + 100);
    // Logged while it waits, with no line after it to carry it: it goes out with the rest.
    sink.write(numbered(200), 0);
    open();
    await Bun.sleep(RETRY_MS * 3);
    expect(writes.join("")).toBe(Array.from({ length: 201 }, (_, i) => numbered(i)).join(""));
  });
});

describe("standard output written directly", () => {
  test("a failure that may pass (a full disk) takes nothing now and leaves the output on; a closed one turns it off", () => {
    const full = openSync("/dev/full", "w");
    try {
      const output = directOutput(full);
      expect(output.writeNow?.("line\n")).toBe(0);
      expect(output.writeNow?.("line\n")).toBe(0);
    } finally {
      closeSync(full);
    }
    const gone = directOutput(full);
    expect(gone.writeNow?.("line\n")).toBe(5);
  });
});

describe("serve's log at exit, when standard output is slow to be read", () => {
  /** A child that logs `lines` lines in one turn, lets the turn end, and exits. Its stdout is read only after `readAfterMs`. */
  async function exitingChild(lines: number, readAfterMs: number) {
    const script = [
      `import { createServiceLogger } from ${JSON.stringify(join(REPO_ROOT, "src/logging/logger.ts"))};`,
      `const logger = createServiceLogger({ logLevel: "info", logFile: undefined });`,
      `for (let n = 0; n < ${lines}; n++) logger.info("request", { n });`,
      `setTimeout(() => process.exit(0), 50);`,
    ].join("\n");
    // A pipe whose reader waits (a test's own pipe would be read at once, whoever asks for it).
    const errors = join(tmpdir(), `tokenmint-exit-${process.pid}-${readAfterMs}.err`);
    const shell = `"$BUN" -e "$SCRIPT" 2>"$ERRORS"; echo "exit $?" >>"$ERRORS.code"`;
    const child = Bun.spawn(["sh", "-c", `(${shell}) | (sleep ${readAfterMs / 1000}; cat)`], {
      cwd: REPO_ROOT,
      env: { ...process.env, BUN, SCRIPT: script, ERRORS: errors },
      stdout: "pipe",
      stderr: "inherit",
    });
    const [stdout] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    try {
      return { stdout, stderr: readFileSync(errors, "utf8"), code: readFileSync(`${errors}.code`, "utf8").trim() };
    } finally {
      rmSync(errors, { force: true });
      rmSync(`${errors}.code`, { force: true });
    }
  }

  test("what is held is written in whole lines, in order, once the reader takes it within the wait", async () => {
    // About 400 KB: far more than a pipe holds, so the exit meets a full pipe.
    const { stdout, stderr, code } = await exitingChild(5000, 500);
    expect(code).toBe("exit 0");
    expect(stderr).toBe("");
    const entries = stdout.split("\n").slice(0, -1).map((l) => JSON.parse(l) as { n: number });
    expect(entries.map((e) => e.n)).toEqual(Array.from({ length: 5000 }, (_, n) => n));
  });

  test("past the wait, the process ends; every line out is whole, and stderr counts the rest", async () => {
    const { stdout, stderr, code } = await exitingChild(5000, EXIT_WAIT_MS + 1500);
    expect(code).toBe("exit 0");
    const entries = stdout.split("\n").slice(0, -1).map((l) => JSON.parse(l) as { n: number });
    expect(entries.map((e) => e.n)).toEqual(Array.from({ length: entries.length }, (_, n) => n));
    const lost = Number(/^tokenmint: (\d+) log line\(s\) not written: standard output was not read\n$/.exec(stderr)?.[1]);
    expect(entries.length).toBeLessThan(5000);
    expect(entries.length + lost).toBe(5000);
  }, 15_000);
});
