/**
 * @module runtime/end-of-turn
 * Work that is held until the end of the current turn of the event loop and then done in one
 * batch with everything else held in that turn.
 *
 * Under load one turn reads many requests. Answering each as soon as it is ready interleaves
 * their writes with the reading and handling of the others; holding the answers until the turn
 * ends sends them out together, which costs the server much less CPU per request (see the
 * README, "Performance"). Signatures are batched the same way, so the signing code runs many
 * times in a row while it is hot.
 *
 * A batch yields after BUDGET_MS and goes on in the next turn, so a batch of slow jobs (RSA
 * signatures take most of a millisecond each) never keeps the loop from reading for long. At low
 * load a batch holds one job and the wait is one turn of the loop.
 */

/** How long one batch may run before the rest waits for the next turn, in milliseconds. */
export const BUDGET_MS = 2;

interface Job {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The next turn of the loop: setImmediate where the runtime has it (Bun, Node), else a 0 ms timer. */
const nextTurn: (callback: () => void) => void =
  typeof globalThis.setImmediate === "function" ? (callback) => void globalThis.setImmediate(callback) : (callback) => void setTimeout(callback, 0);

let queue: Job[] = [];
let scheduled = false;

function schedule(): void {
  if (scheduled) return;
  scheduled = true;
  nextTurn(flush);
}

function flush(): void {
  scheduled = false;
  const jobs = queue;
  queue = [];
  const started = performance.now();
  for (let i = 0; i < jobs.length; i++) {
    const job = jobs[i] as Job;
    try {
      job.resolve(job.run());
    } catch (error) {
      job.reject(error);
    }
    if (i + 1 < jobs.length && performance.now() - started >= BUDGET_MS) {
      // Jobs held while this batch ran (none can be: resolving only queues microtasks) go after these.
      queue = jobs.slice(i + 1).concat(queue);
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
    queue.push({ run: job, resolve: resolve as (value: unknown) => void, reject });
    schedule();
  });
}

/**
 * Settles like `pending`, but not before the end of the turn in which `pending` settled: the
 * answer of a request is released with the other answers that became ready in that turn.
 */
export function releaseAtEndOfTurn<T>(pending: Promise<T>): Promise<T> {
  return pending.then(
    (value) => atEndOfTurn(() => value) as Promise<T>,
    (error: unknown) =>
      atEndOfTurn(() => {
        throw error;
      }),
  );
}
