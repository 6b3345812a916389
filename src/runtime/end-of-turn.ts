/**
 * @module runtime/end-of-turn
 * Work that is held until the end of the current turn of the event loop and then done in one
 * batch with everything else held in that turn: the signatures of the tokens.
 *
 * Under load one turn reads many requests. Signing each as its request is handled interleaves
 * the signatures with the reading and handling of the others; made back to back at the end of
 * the turn, they cost the server much less CPU per token, and the answers they complete leave
 * together, right after their batch (docs/performance.md, "Signatures are made together", has
 * the A/B runs).
 *
 * A batch yields after BUDGET_MS and goes on in the next turn, so a batch of slow jobs (RSA
 * signatures take most of a millisecond each) never keeps the loop from reading for long. At low
 * load a batch holds one job and the wait is one turn of the loop.
 */

/** How long one batch may run before the rest waits for the next turn, in milliseconds. */
export const BUDGET_MS = 1;

interface Job {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The next turn of the loop: setImmediate where the runtime has it (Bun, Node), else a 0 ms timer. */
const nextTurn: (callback: () => void) => void =
  typeof globalThis.setImmediate === "function" ? (callback) => void globalThis.setImmediate(callback) : (callback) => void setTimeout(callback, 0);

/** Jobs held to the end of the turn, run in the order they came, BUDGET_MS at a time. */
let held: Job[] = [];
let scheduled = false;

function schedule(): void {
  if (scheduled) return;
  scheduled = true;
  nextTurn(runBatch);
}

function runBatch(): void {
  scheduled = false;
  const jobs = held;
  held = [];
  const started = performance.now();
  for (let i = 0; i < jobs.length; i++) {
    const job = jobs[i] as Job;
    try {
      job.resolve(job.run());
    } catch (error) {
      job.reject(error);
    }
    if (i + 1 < jobs.length && performance.now() - started >= BUDGET_MS) {
      // The rest of this batch goes first next turn; jobs held while it ran follow it.
      held = jobs.slice(i + 1).concat(held);
      schedule();
      return;
    }
  }
}

/**
 * Runs `job` at the end of the current turn, in one batch with the other jobs held in this turn
 * (in the order they came), and resolves with its result or rejects with what it threw.
 */
export function atEndOfTurn<T>(job: () => T): Promise<Awaited<T>> {
  return new Promise<Awaited<T>>((resolve, reject) => {
    held.push({ run: job, resolve: resolve as (value: unknown) => void, reject });
    schedule();
  });
}
