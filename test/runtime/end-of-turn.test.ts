/**
 * Work held to the end of the loop's turn: it runs once the current turn's code is done, in the
 * order it came, each caller gets its own result or error, a long batch lets the loop in between
 * instead of holding it for the whole batch, and a ready answer never waits behind that work.
 */
import { describe, expect, test } from "bun:test";
import { atEndOfTurn, BUDGET_MS, releaseAtEndOfTurn } from "../../src/runtime/end-of-turn.ts";

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
});

describe("releaseAtEndOfTurn", () => {
  test("settles like the promise it holds, not before the turn ends", async () => {
    let released = false;
    const held = releaseAtEndOfTurn(Promise.resolve(new Response("ok", { status: 201 }))).then((r) => ((released = true), r));
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(released).toBe(false);
    const response = await held;
    expect(response.status).toBe(201);
    expect(await response.text()).toBe("ok");
    await expect(releaseAtEndOfTurn(Promise.reject(new Error("boom")))).rejects.toThrow("boom");
  });
});

describe("answers and work", () => {
  test("a ready answer leaves after at most one budget of held work, not after all of it", async () => {
    const order: string[] = [];
    const work = [0, 1, 2, 3].map((i) => atEndOfTurn(() => (busy(BUDGET_MS), order.push(`sign ${i}`))));
    const answer = releaseAtEndOfTurn(Promise.resolve("answer")).then((a) => order.push(a));
    await Promise.all([...work, answer]);
    expect(order.indexOf("answer")).toBeLessThanOrEqual(1);
    expect(order.filter((o) => o.startsWith("sign"))).toEqual(["sign 0", "sign 1", "sign 2", "sign 3"]);
  });
});
