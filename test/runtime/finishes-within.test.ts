import { describe, expect, test } from "bun:test";
import { finishesWithin } from "../../src/runtime/finishes-within.ts";

describe("finishesWithin", () => {
  test("true for a promise that resolves in time, false once the time is up first", async () => {
    expect(await finishesWithin(Bun.sleep(5), 1000)).toBe(true);
    const started = performance.now();
    expect(await finishesWithin(new Promise(() => {}), 50)).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
  });

  test("a rejection passes through", async () => {
    await expect(finishesWithin(Promise.reject(new Error("no")), 1000)).rejects.toThrow("no");
  });
});
