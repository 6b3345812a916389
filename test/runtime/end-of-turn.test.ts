/**
 * Work held to the end of the loop's turn: it runs once the current turn's code is done, in the
 * order it came, each caller gets its own result or error, and a long batch lets the loop in
 * between instead of holding it for the whole batch, its callers hearing their results first.
 */
import { describe, expect, test } from "bun:test";
import { atEndOfTurn, BUDGET_MS } from "../../src/runtime/end-of-turn.ts";

const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

describe("atEndOfTurn", () => {
  test("runs held jobs after the current code, together and in order", async () => {
    const ran: string[] = [];
    const first = atEndOfTurn(() => (ran.push("a"), 1));
    const second = atEndOfTurn(() => (ran.push("b"), 2));
    await Promise.resolve();
    expect(ran).toEqual([]);
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    expect(ran).toEqual(["a", "b"]);
  });

  test("a job that throws rejects its own caller only", async () => {
    const failing = atEndOfTurn(() => {
      throw new Error("no key");
    });
    const fine = atEndOfTurn(() => "signed");
    await expect(failing).rejects.toThrow("no key");
    expect(await fine).toBe("signed");
  });

  test("a job that returns a promise settles its caller with the promise's value", async () => {
    expect(await atEndOfTurn(async () => "later")).toBe("later");
  });

  test("a batch longer than the budget yields to the loop and then finishes", async () => {
    const order: string[] = [];
    const jobs = [0, 1, 2, 3].map((i) => atEndOfTurn(() => (busy(BUDGET_MS), order.push(`job ${i}`), i)));
    // Queued after the jobs: without the budget it would run only after all four.
    setImmediate(() => order.push("loop"));
    expect(await Promise.all(jobs)).toEqual([0, 1, 2, 3]);
    expect(order).toContain("loop");
    expect(order.indexOf("loop")).toBeLessThan(order.indexOf("job 3"));
    expect(order.filter((o) => o.startsWith("job"))).toEqual(["job 0", "job 1", "job 2", "job 3"]);
  });

  test("a caller hears its result right after its batch, before the jobs put off to a later turn run", async () => {
    // A token's answer leaves when its signature's batch ends, not after the signatures behind it.
    const order: string[] = [];
    const callers = [0, 1, 2, 3].map((i) => atEndOfTurn(() => (busy(BUDGET_MS), order.push(`job ${i}`), i)).then((v) => order.push(`caller ${v}`)));
    await Promise.all(callers);
    expect(order.indexOf("caller 0")).toBeGreaterThan(order.indexOf("job 0"));
    expect(order.indexOf("caller 0")).toBeLessThan(order.indexOf("job 1"));
  });
});
