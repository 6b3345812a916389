/**
 * @module runtime/finishes-within
 * Waiting with a bound, for the steps of a stop that might never finish (a drain, a worker's exit,
 * a store's close).
 */

/**
 * Whether `promise` resolves within `ms`: true once it has, false when the time is up first. A
 * rejection passes through. The timer is cleared either way, so it keeps no process alive.
 */
export async function finishesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
