/**
 * Daily log files (TOKENMINT_LOG_FILE): naming by each line's UTC date, the switch at midnight
 * UTC on a fake clock, file and directory modes, buffering and flushing, and retention: only
 * files named exactly `name-YYYY-MM-DD.log` older than the retention are ever deleted.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../../src/config/load.ts";
import { dailyLogFileDay, dailyLogFileName, dailyLogPath, ensureLogDirectory, MOVED_CHECK_MS, openDailyFileSink } from "../../src/logging/file-sink.ts";
import type { LogSink } from "../../src/logging/stream-sink.ts";
import { createLogger, createServiceLogger } from "../../src/logging/logger.ts";
import { expiredLogFiles, purgeOldLogFiles, startLogRetention } from "../../src/logging/retention.ts";
import { FakeClock, tempDir } from "../helpers/app.ts";

const DAY = 86_400_000;
const dirs: { path: string; remove: () => void }[] = [];
const sinks: LogSink[] = [];
afterEach(() => {
  for (const sink of sinks.splice(0)) sink.close();
  for (const dir of dirs.splice(0)) dir.remove();
});

function logDir(): string {
  const dir = tempDir("tokenmint-logs-");
  dirs.push(dir);
  return dir.path;
}

function sink(logFile: string, now: number, onError?: (message: string, lines: string) => void): LogSink {
  const opened = openDailyFileSink(logFile, { now, onError });
  sinks.push(opened);
  return opened;
}

const read = (file: string) => readFileSync(file, "utf8");
const mode = (file: string) => statSync(file).mode & 0o777;
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("daily file names", () => {
  test("name-YYYY-MM-DD.ext by the UTC date, for any directory and extension", () => {
    const at = Date.UTC(2026, 2, 9, 23, 59, 59, 999);
    expect(dailyLogFileName(dailyLogPath("/var/log/tokenmint/tokenmint.log"), at)).toBe("tokenmint-2026-03-09.log");
    expect(dailyLogFileName(dailyLogPath("/var/log/tokenmint/tokenmint.log"), at + 1)).toBe("tokenmint-2026-03-10.log");
    expect(dailyLogFileName(dailyLogPath("logs/app.json.log"), at)).toBe("app.json-2026-03-09.log");
    expect(dailyLogFileName(dailyLogPath("/tmp/plain"), at)).toBe("plain-2026-03-09");
    expect(dailyLogPath("/var/log/tokenmint/tokenmint.log")).toEqual({ dir: "/var/log/tokenmint", stem: "tokenmint", ext: ".log" });
  });

  test("only names of exactly that pattern with a real date are recognised", () => {
    const path = dailyLogPath("/x/tokenmint.log");
    expect(dailyLogFileDay(path, "tokenmint-2026-03-09.log")).toBe(Date.UTC(2026, 2, 9));
    for (const name of [
      "tokenmint.log",
      "tokenmint-2026-02-30.log",
      "tokenmint-2026-13-01.log",
      "tokenmint-2026-3-9.log",
      "tokenmint-20260309.log",
      "tokenmint-2026-03-09.log.gz",
      "tokenmint-2026-03-09.log.1",
      "tokenmint-2026-03-09.txt",
      "xtokenmint-2026-03-09.log",
      "other-2026-03-09.log",
      "tokenmint-2026-03-09-extra.log",
    ]) {
      expect(dailyLogFileDay(path, name)).toBeUndefined();
    }
  });
});

describe("daily file sink", () => {
  test("files each line by its UTC date and switches at midnight UTC on the fake clock", async () => {
    const dir = logDir();
    const clock = new FakeClock(Date.UTC(2026, 2, 9, 23, 59, 59, 998));
    const out = sink(join(dir, "tokenmint.log"), clock.now());
    const logger = createLogger("info", out.write, clock.now);
    logger.info("before midnight", { n: 1 });
    clock.ms += 1;
    logger.info("last millisecond", { n: 2 });
    clock.ms += 1;
    logger.info("after midnight", { n: 3 });
    clock.advance(3600);
    logger.info("an hour later", { n: 4 });
    logger.debug("below the level");
    out.flush();

    expect(readdirSync(dir).sort()).toEqual(["tokenmint-2026-03-09.log", "tokenmint-2026-03-10.log"]);
    const day1 = read(join(dir, "tokenmint-2026-03-09.log")).split("\n");
    const day2 = read(join(dir, "tokenmint-2026-03-10.log")).split("\n");
    expect(day1.pop()).toBe("");
    expect(day2.pop()).toBe("");
    expect(day1.map((l) => JSON.parse(l))).toEqual([
      { time: "2026-03-09T23:59:59.998Z", level: "info", msg: "before midnight", n: 1 },
      { time: "2026-03-09T23:59:59.999Z", level: "info", msg: "last millisecond", n: 2 },
    ]);
    expect(day2.map((l) => JSON.parse(l))).toEqual([
      { time: "2026-03-10T00:00:00.000Z", level: "info", msg: "after midnight", n: 3 },
      { time: "2026-03-10T01:00:00.000Z", level: "info", msg: "an hour later", n: 4 },
    ]);
  });

  test("creates the directory 0750 and files 0640, whatever the umask", () => {
    const dir = join(logDir(), "nested", "logs");
    const previous = process.umask(0o077);
    try {
      const now = Date.UTC(2026, 0, 5, 12);
      const out = sink(join(dir, "tokenmint.log"), now);
      // Today's file exists at once, so an unwritable place fails at start-up.
      expect(readdirSync(dir)).toEqual(["tokenmint-2026-01-05.log"]);
      out.write("a\n", now);
      out.write("b\n", now + DAY);
      out.flush();
      expect(mode(dir)).toBe(0o750);
      // Every directory it made, not only the last: the group reaches the files through them.
      expect(mode(join(dir, ".."))).toBe(0o750);
      expect(mode(join(dir, "tokenmint-2026-01-05.log"))).toBe(0o640);
      expect(mode(join(dir, "tokenmint-2026-01-06.log"))).toBe(0o640);
    } finally {
      process.umask(previous);
    }
  });

  test("a log directory or file removed while it runs is made again within a second; nothing goes to a deleted file", async () => {
    const dir = join(logDir(), "logs");
    const now = Date.UTC(2026, 0, 5, 12);
    const errors: string[] = [];
    const out = sink(join(dir, "tokenmint.log"), now, (message) => errors.push(message));
    const file = join(dir, "tokenmint-2026-01-05.log");
    out.write("before\n", now);
    out.flush();
    for (const remove of [() => rmSync(dir, { recursive: true }), () => rmSync(file)]) {
      remove();
      await Bun.sleep(MOVED_CHECK_MS + 50);
      out.write("after\n", now);
      out.flush();
      expect(read(file)).toBe("after\n");
      expect(mode(dir)).toBe(0o750);
    }
    expect(errors).toEqual([]);
  });

  test("a log path through '..' changes the mode of no directory it did not make", () => {
    const parent = logDir();
    chmodSync(parent, 0o755);
    const previous = process.umask(0o077);
    try {
      // Through a directory that does not exist: the path is resolved, so it is not made either.
      ensureLogDirectory(`${parent}/a/../b/c`);
      expect([mode(parent), existsSync(join(parent, "a")), mode(join(parent, "b")), mode(join(parent, "b", "c"))]).toEqual([0o755, false, 0o750, 0o750]);
    } finally {
      process.umask(previous);
    }
  });

  test("appends to an existing file of the day and leaves its mode alone", () => {
    const dir = logDir();
    const file = join(dir, "tokenmint-2026-01-05.log");
    writeFileSync(file, "earlier\n", { mode: 0o600 });
    const out = sink(join(dir, "tokenmint.log"), Date.UTC(2026, 0, 5));
    out.write("later\n", Date.UTC(2026, 0, 5, 1));
    out.close();
    expect(read(file)).toBe("earlier\nlater\n");
    expect(mode(file)).toBe(0o600);
  });

  test("buffers lines and writes them within one event-loop turn; close flushes", async () => {
    const dir = logDir();
    const now = Date.UTC(2026, 0, 5);
    const file = join(dir, "tokenmint-2026-01-05.log");
    const out = openDailyFileSink(join(dir, "tokenmint.log"), { now });
    out.write("one\n", now);
    out.write("two\n", now);
    expect(read(file)).toBe("");
    await nextTurn();
    expect(read(file)).toBe("one\ntwo\n");
    out.write("three\n", now);
    out.close();
    expect(read(file)).toBe("one\ntwo\nthree\n");
  });

  test("a large burst is written before the turn ends", () => {
    const dir = logDir();
    const now = Date.UTC(2026, 0, 5);
    const out = sink(join(dir, "tokenmint.log"), now);
    const line = `${"x".repeat(1023)}\n`;
    for (let i = 0; i < 100; i++) out.write(line, now);
    expect(read(join(dir, "tokenmint-2026-01-05.log")).length).toBeGreaterThanOrEqual(64 * 1024);
  });

  test("a failed write hands the lines to onError instead of losing them", () => {
    const dir = logDir();
    const now = Date.UTC(2026, 0, 5);
    mkdirSync(join(dir, "tokenmint-2026-01-06.log"));
    const errors: { message: string; lines: string }[] = [];
    const out = sink(join(dir, "tokenmint.log"), now, (message, lines) => errors.push({ message, lines }));
    out.write("tomorrow\n", now + DAY);
    out.flush();
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message).toContain("tokenmint-2026-01-06.log");
    expect(errors[0]?.lines).toBe("tomorrow\n");
  });
});

describe("the serve logger", () => {
  test("writes to the daily file and not to stdout when TOKENMINT_LOG_FILE is set", () => {
    const dir = logDir();
    const clock = new FakeClock(Date.UTC(2026, 0, 5, 8));
    const logger = createServiceLogger({ logLevel: "info", logFile: join(dir, "svc.log") }, clock.now);
    logger.info("hello", { port: 8080 });
    logger.flush?.();
    expect(read(join(dir, "svc-2026-01-05.log"))).toBe('{"time":"2026-01-05T08:00:00.000Z","level":"info","msg":"hello","port":8080}\n');
  });

  test("an unwritable location is a settings error naming TOKENMINT_LOG_FILE", () => {
    const dir = logDir();
    writeFileSync(join(dir, "not-a-directory"), "");
    expect(() => createServiceLogger({ logLevel: "info", logFile: join(dir, "not-a-directory", "sub", "svc.log") })).toThrow(ConfigError);
    expect(() => createServiceLogger({ logLevel: "info", logFile: join(dir, "not-a-directory", "sub", "svc.log") })).toThrow(/TOKENMINT_LOG_FILE/);
  });

  test("a path that names an existing directory is a settings error, and nothing is written beside it", () => {
    const dir = logDir();
    mkdirSync(join(dir, "tokenmint"));
    expect(() => createServiceLogger({ logLevel: "info", logFile: join(dir, "tokenmint") })).toThrow(
      new ConfigError([`TOKENMINT_LOG_FILE: cannot write log files beside ${join(dir, "tokenmint")}: ${join(dir, "tokenmint")} is a directory; name a file in it, like ${join(dir, "tokenmint", "tokenmint.log")}`]),
    );
    expect(readdirSync(dir)).toEqual(["tokenmint"]);
    expect(readdirSync(join(dir, "tokenmint"))).toEqual([]);
  });

  test("warnings and errors reach the file at once, after the lines held before them", () => {
    const dir = logDir();
    const clock = new FakeClock(Date.UTC(2026, 0, 5, 8));
    const logger = createServiceLogger({ logLevel: "info", logFile: join(dir, "svc.log") }, clock.now);
    const file = join(dir, "svc-2026-01-05.log");
    logger.info("held");
    expect(read(file)).toBe("");
    logger.warn("at once");
    expect(read(file).split("\n").slice(0, -1).map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(["held", "at once"]);
    logger.error("also at once");
    expect(read(file)).toContain('"msg":"also at once"');
    logger.flush?.();
  });
});

describe("retention", () => {
  /** 2026-03-10T13:00Z: "today" of the purge tests. */
  const NOW = Date.UTC(2026, 2, 10, 13);
  const day = (offset: number) => `tokenmint-${new Date(NOW + offset * DAY).toISOString().slice(0, 10)}.log`;
  const UNRELATED = [
    "tokenmint.log",
    "tokenmint-2026-03-01.log.gz",
    "tokenmint-2026-03-01.log.1",
    "tokenmint-2026-03-01.txt",
    "tokenmint-20260301.log",
    "tokenmint-2026-3-1.log",
    "tokenmint-2026-02-30.log",
    "xtokenmint-2026-03-01.log",
    "other-2026-03-01.log",
    "notes.txt",
  ];

  /** A directory with daily files from 12 days ago to tomorrow, unrelated files, a directory and a symlink. */
  function populated(): string {
    const dir = logDir();
    for (let offset = -12; offset <= 1; offset++) writeFileSync(join(dir, day(offset)), `day ${offset}\n`);
    for (const name of UNRELATED) writeFileSync(join(dir, name), "keep\n");
    mkdirSync(join(dir, "tokenmint-2026-01-01.log"));
    symlinkSync(join(dir, "notes.txt"), join(dir, "tokenmint-2026-01-02.log"));
    return dir;
  }
  const keptExtras = [...UNRELATED, "tokenmint-2026-01-01.log", "tokenmint-2026-01-02.log"];

  test("retention 1 keeps today, yesterday (and a future file); nothing unrelated is touched", () => {
    const dir = populated();
    const logFile = join(dir, "tokenmint.log");
    const { deleted, failed } = purgeOldLogFiles(logFile, 1, NOW);
    expect(failed).toEqual([]);
    expect(deleted).toEqual([-12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2].map(day));
    expect(readdirSync(dir).sort()).toEqual([...keptExtras, day(-1), day(0), day(1)].sort());
    expect(read(join(dir, "notes.txt"))).toBe("keep\n");
    // Idempotent.
    expect(purgeOldLogFiles(logFile, 1, NOW).deleted).toEqual([]);
  });

  test("retention 3 keeps today and the three days before", () => {
    const dir = populated();
    purgeOldLogFiles(join(dir, "tokenmint.log"), 3, NOW);
    expect(readdirSync(dir).sort()).toEqual([...keptExtras, day(-3), day(-2), day(-1), day(0), day(1)].sort());
  });

  test("the boundary is midnight UTC: a day's file goes once N whole days have passed since it ended", () => {
    const dir = populated();
    const logFile = join(dir, "tokenmint.log");
    const midnight = Date.UTC(2026, 2, 10);
    expect(expiredLogFiles(logFile, 1, midnight - 1).at(-1)).toBe("tokenmint-2026-03-07.log");
    expect(expiredLogFiles(logFile, 1, midnight).at(-1)).toBe("tokenmint-2026-03-08.log");
    expect(expiredLogFiles(logFile, 30, midnight)).toEqual([]);
  });

  test("startLogRetention purges at once and again on its timer with the fake clock", async () => {
    const dir = populated();
    const clock = new FakeClock(NOW);
    const lines: string[] = [];
    const stop = startLogRetention({
      logFile: join(dir, "tokenmint.log"),
      retentionDays: 1,
      now: clock.now,
      logger: createLogger("info", (line) => lines.push(line), clock.now),
      intervalMs: 10,
    });
    try {
      expect(existsSync(join(dir, day(-2)))).toBe(false);
      expect(existsSync(join(dir, day(-1)))).toBe(true);
      expect(JSON.parse(lines[0] as string)).toMatchObject({ level: "info", msg: "old log files deleted", count: 11, retentionDays: 1 });
      clock.advance(86_400);
      const deadline = Date.now() + 2000;
      while (existsSync(join(dir, day(-1))) && Date.now() < deadline) await Bun.sleep(5);
      expect(existsSync(join(dir, day(-1)))).toBe(false);
      expect(existsSync(join(dir, day(0)))).toBe(true);
      expect(readdirSync(dir)).toEqual(expect.arrayContaining(keptExtras));
    } finally {
      stop();
    }
  });
});
