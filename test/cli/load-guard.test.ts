/**
 * The load guard turns a failure while the modules load into one line (the smoke test checks it on
 * the executable, with a missing TMPDIR); once they have loaded it must step aside, so that a later
 * uncaught error is not reported as a loading failure.
 */
import { expect, test } from "bun:test";

test("the guard handles uncaught errors only until endLoadGuard", async () => {
  const before = process.listeners("uncaughtException").length;
  const { endLoadGuard } = await import("../../src/cli/load-guard.ts");
  expect(process.listeners("uncaughtException")).toHaveLength(before + 1);
  endLoadGuard();
  expect(process.listeners("uncaughtException")).toHaveLength(before);
});
