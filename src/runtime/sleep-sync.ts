/**
 * @module runtime/sleep-sync
 * Blocks the thread for `ms`, where nothing else may run meanwhile: a process about to exit that
 * waits for a full pipe, or a server's start waiting on another's takeover of its lock file. On
 * web standards (Atomics.wait), so it runs wherever the core does.
 */
export const sleepSync = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
