/**
 * A Store wrapper for tests that counts the calls of each method by name and passes every call
 * on to the real store (bound to it, so backends with private fields keep working).
 */
import type { Store } from "../../src/store/store.ts";

/** Store methods that read. */
export const READ_METHODS = /^(get|list)|^changeSeq$/;

export interface CountingStore {
  store: Store;
  /** Calls per method name since the last reset. */
  calls: Map<string, number>;
  /** Calls of read methods other than changeSeq (reads of data). */
  dataReads(): number;
  reset(): void;
}

export function countingStore(inner: Store): CountingStore {
  const calls = new Map<string, number>();
  const store = new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== "function" || typeof name !== "string") return value;
      return (...args: unknown[]) => {
        calls.set(name, (calls.get(name) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    store,
    calls,
    dataReads: () => [...calls].filter(([name]) => READ_METHODS.test(name) && name !== "changeSeq").reduce((sum, [, n]) => sum + n, 0),
    reset: () => calls.clear(),
  };
}
