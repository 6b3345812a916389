/**
 * logging/logger: a JSON line per call at or above the level, with the time of its own
 * millisecond (lines of one millisecond share its formatting, never a stale one), fields in the
 * order given, undefined ones left out, and the names of secrets never written, however often.
 */
import { describe, expect, test } from "bun:test";
import { createLogger, withFields } from "../../src/logging/logger.ts";

/** A logger writing into an array, on a clock the test moves. */
function capture(level: "debug" | "info" | "warn" | "error" = "info") {
  const lines: Record<string, unknown>[] = [];
  const times: number[] = [];
  let clock = Date.UTC(2026, 10, 28, 12, 0, 0, 0);
  const logger = createLogger(
    level,
    (line, time) => {
      expect(line.endsWith("\n")).toBe(true);
      lines.push(JSON.parse(line) as Record<string, unknown>);
      times.push(time);
    },
    () => clock,
  );
  return { logger, lines, times, setClock: (ms: number) => (clock = ms) };
}

describe("createLogger", () => {
  test("each line has the time of its own millisecond, forward and back", () => {
    const { logger, lines, times, setClock } = capture();
    const t = Date.UTC(2026, 10, 28, 12, 0, 0, 0);
    for (const ms of [t, t, t + 1, t + 1, t, t + 86_400_000, t + 86_400_000 + 999]) {
      setClock(ms);
      logger.info("tick");
    }
    expect(lines.map((line) => line.time)).toEqual([
      "2026-11-28T12:00:00.000Z",
      "2026-11-28T12:00:00.000Z",
      "2026-11-28T12:00:00.001Z",
      "2026-11-28T12:00:00.001Z",
      "2026-11-28T12:00:00.000Z",
      "2026-11-29T12:00:00.000Z",
      "2026-11-29T12:00:00.999Z",
    ]);
    expect(times).toEqual([t, t, t + 1, t + 1, t, t + 86_400_000, t + 86_400_000 + 999]);
  });

  test("fields follow time, level and msg in the order given; undefined ones and the names of secrets are left out, at every call", () => {
    const { logger, lines } = capture();
    const fields = { method: "POST", apiKey: "tmk_x", route: "/v1/providers", clientSecret: "s", status: 201, authorization: "Bearer x", durationMs: 1.5, gone: undefined, ok: true };
    logger.info("request", fields);
    logger.info("request", fields);
    for (const line of lines) {
      expect(Object.keys(line)).toEqual(["time", "level", "msg", "method", "route", "status", "durationMs", "ok"]);
      expect(line).toMatchObject({ level: "info", msg: "request", method: "POST", route: "/v1/providers", status: 201, durationMs: 1.5, ok: true });
    }
    for (const name of ["token", "accessToken", "privateKey", "masterKey", "master_key", "password", "Cookie", "api_key", "secret"]) {
      logger.info("named", { [name]: "hidden", kept: 1 });
      logger.info("named", { [name]: "hidden", kept: 1 });
    }
    expect(lines.slice(2).every((line) => Object.keys(line).join() === "time,level,msg,kept")).toBe(true);
    expect(JSON.stringify(lines)).not.toContain("hidden");
  });

  test("lines below the level are not written; withFields adds its fields before each line's own", () => {
    const { logger, lines } = capture("warn");
    logger.debug("d");
    logger.info("i");
    const worker = withFields(logger, { worker: 2 });
    worker.warn("w", { reason: "x" });
    worker.error("e");
    expect(lines.map((line) => [line.level, line.msg, Object.keys(line).slice(3)])).toEqual([
      ["warn", "w", ["worker", "reason"]],
      ["error", "e", ["worker"]],
    ]);
  });
});
