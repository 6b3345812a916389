/**
 * The primary's restart delays for a worker that dies: 0.5 s after the first crash of a series,
 * doubled for each further crash in a row, up to 30 s; a worker that had run a minute starts a
 * new series, whose second crash waits twice its first, as in any series.
 */
import { expect, test } from "bun:test";
import { restartAfterCrash } from "../../src/cli/serve-primary.ts";

/** The delays of crashes after running `ranMs` each, from a worker's `crashes` so far. */
function delays(ran: number[], crashes = 0): number[] {
  const out: number[] = [];
  for (const ranMs of ran) {
    const next = restartAfterCrash(crashes, ranMs);
    crashes = next.crashes;
    out.push(next.delayMs);
  }
  return out;
}

test("a worker that keeps dying waits 0.5 s, then twice as long each time, up to 30 s", () => {
  expect(delays(Array(9).fill(100))).toEqual([500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
});

test("after a run of a minute or more, a new series starts: 0.5 s, then 1 s", () => {
  expect(delays([100, 100, 100, 60_000, 100, 100])).toEqual([500, 1000, 2000, 500, 1000, 2000]);
  expect(delays([120_000, 100], 6)).toEqual([500, 1000]);
});
