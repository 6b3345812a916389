/**
 * The standard-output log of `serve`: a turn's lines leave together, in pieces of whole lines
 * that a pipe never interleaves with another process's, warnings and errors at once, and nothing
 * is lost when the process exits.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { LogSink } from "../../src/logging/stream-sink.ts";
import { createServiceLogger } from "../../src/logging/logger.ts";
import { openStreamSink, PIPE_BUF } from "../../src/logging/stream-sink.ts";
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

/** Records what is written to process.stdout until the test ends. */
function recordStdout(): string[] {
  const writes: string[] = [];
  const original = process.stdout.write;
  process.stdout.write = ((chunk: string | Uint8Array) => {
    writes.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());
    return true;
  }) as typeof process.stdout.write;
  restores.push(() => {
    process.stdout.write = original;
  });
  return writes;
}

const line = (n: number, bytes: number) => `${String(n).padStart(4, "0")}${"x".repeat(bytes - 5)}\n`;

describe("serve's log on standard output", () => {
  test("the lines of one turn are written together once the turn ends, in order", async () => {
    const writes = recordStdout();
    const logger = createServiceLogger({ logLevel: "info", logFile: undefined }, () => Date.UTC(2026, 0, 5, 8));
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
    const writes = recordStdout();
    const logger = createServiceLogger({ logLevel: "info", logFile: undefined });
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
